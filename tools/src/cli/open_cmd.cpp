// SPDX-License-Identifier: GPL-2.0-only
#include "open_cmd.hpp"

#include <fmt/format.h>

#include <ostream>

#include "lbscrypt/volume.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_open_command(CLI::App &app, OpenArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("open", "Open a plain mapping (libdevmapper)");
  cmd->set_help_flag("--help");
  add_mapping_options(*cmd, args.mapping, flags);
  cmd->add_option("--type,-M", args.type, "Mapping type: plain")->capture_default_str();
  cmd->add_flag("--readonly,-r", args.read_only, "Read-only mapping");
  cmd->add_flag("--shared", args.shared,
                "Map a device that is already in use (another mapping over it), as cryptsetup");
  cmd->add_option("device", args.mapping.mapping.device, "Backing device or regular file")
      ->required();
  cmd->add_option("name", args.name, "Mapping name")->required();
  return cmd;
}

int open_command(const OpenArgs &args, const CommonFlags &flags, const Services &services,
                 std::ostream &out, std::ostream &err) {
  announce(err, flags);
  const EnvironmentArgs &environment = args.mapping.environment;
  if (environment.assume_version || environment.assume_page_size) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--assume-version and --assume-page-size are for table and "
                                "check; open always asks the running kernel"));
  }
  const auto type = mapping_type(args.type);
  if (!type) {
    return fail(err, type.error());
  }
  if (*type != MappingType::plain) {
    return fail(err, make_error(Errc::invalid_argument,
                                "lbscrypt opens plain mappings only; use cryptsetup for LUKS"));
  }
  auto session = make_session(environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  session->env.load_target = true;  // it loads a table: the kernel may load the target for it
  const VolumeRequest request{mapping_name(args.name), mapping_request(args.mapping),
                              args.mapping.key.key_size_bits / 8, args.read_only, args.shared};
  VolumeSteps steps;
  steps.planned = [&](const CryptTable &table) { show_planned(err, flags, table); };
  steps.key = [&](std::uint32_t /*attempt*/) {
    return ask_key(args.mapping, flags, services, err);
  };
  const auto outcome = open_volume(request, session->env, steps);
  if (!outcome) {
    return fail(err, outcome.error());
  }
  print_opened(out, outcome->opened);
  warn_torn(err, flags, outcome->opened.torn_warning);
  if (outcome->already_active && !flags.quiet) {
    print_error(err, fmt::format("{} is already active as requested; nothing done", request.name));
  }
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
