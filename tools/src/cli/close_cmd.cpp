// SPDX-License-Identifier: GPL-2.0-only
#include "close_cmd.hpp"

#include <fmt/format.h>

#include <ostream>

namespace lbscrypt::cli {

namespace {

CLI::App *add_mapping_command(CLI::App &app, const char *name, const char *help, CloseArgs &args,
                              CommonFlags &flags) {
  auto *cmd = app.add_subcommand(name, help);
  cmd->set_help_flag("--help");
  cmd->add_option("--target", args.environment.target_type, "Device-mapper target name")
      ->capture_default_str();
  add_common_flags(*cmd, flags);
  cmd->add_option("name", args.name, "Mapping name or /dev/mapper/NAME")->required();
  return cmd;
}

}  // namespace

CLI::App *add_close_command(CLI::App &app, CloseArgs &args, CommonFlags &flags) {
  return add_mapping_command(app, "close", "Remove a mapping", args, flags);
}

CLI::App *add_detach_command(CLI::App &app, CloseArgs &args, CommonFlags &flags) {
  args.gone_ok = true;
  return add_mapping_command(app, "detach",
                             "Remove a mapping; success when it is not active (a unit's ExecStop)",
                             args, flags);
}

int close_command(const CloseArgs &args, const CommonFlags &flags, const Services &services,
                  std::ostream &err) {
  announce(err, flags);
  const auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const std::string name = mapping_name(args.name);
  const auto closed = close_mapping(name, session->env);
  if (!closed && args.gone_ok && closed.error().code == Errc::not_found) {
    err << fmt::format("lbscrypt: {} is not active; nothing to detach\n", name);
    return kExitOk;
  }
  return closed ? succeed(err, flags) : fail(err, closed.error());
}

}  // namespace lbscrypt::cli
