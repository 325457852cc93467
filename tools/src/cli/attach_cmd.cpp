// SPDX-License-Identifier: GPL-2.0-only
#include "attach_cmd.hpp"

#include <fmt/format.h>

#include <ostream>

#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_attach_command(CLI::App &app, AttachArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand(
      "attach", "Open one lbscrypttab volume: NAME DEVICE KEY OPTIONS, as the line has them");
  cmd->set_help_flag("--help");
  AttachRequest &r = args.request;
  cmd->add_option("name", r.name, "Mapping name")->required();
  cmd->add_option("device", r.device, "Device: a path, or UUID=, PARTUUID=, LABEL=, PARTLABEL=")
      ->required();
  cmd->add_option("key", r.key, "Key file, or none (or -) to ask for a passphrase")->required();
  cmd->add_option("options", r.options, "Comma-separated options (lbscrypttab(5))");
  cmd->add_option("--target", args.environment.target_type, "Device-mapper target name")
      ->capture_default_str();
  add_common_flags(*cmd, flags);
  return cmd;
}

int attach_command(const AttachArgs &args, const CommonFlags &flags, const Services &services,
                   std::ostream &out, std::ostream &err) {
  announce(err, flags);
  auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  session->env.load_target = true;  // it loads a table: the kernel may load the target for it
  const auto outcome = attach_volume(args.request, session->env, services.attach);
  if (!outcome) {
    return fail(err, outcome.error());
  }
  for (const auto &note : outcome->notes) {
    print_error(err, note);
  }
  out << fmt::format("{}: /dev/mapper/{} ({}){}\n", args.request.name, args.request.name,
                     outcome->device.dm_node(),
                     outcome->already_active ? ", already active as lbscrypttab describes it" : "");
  warn_torn(err, flags, outcome->torn_warning);
  return kExitOk;
}

}  // namespace lbscrypt::cli
