// SPDX-License-Identifier: GPL-2.0-only
#include "close_cmd.hpp"

namespace lbscrypt::cli {

CLI::App *add_close_command(CLI::App &app, CloseArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("close", "Remove a mapping");
  cmd->set_help_flag("--help");
  cmd->add_option("--target", args.environment.target_type, "Device-mapper target name")
      ->capture_default_str();
  add_common_flags(*cmd, flags);
  cmd->add_option("name", args.name, "Mapping name or /dev/mapper/NAME")->required();
  return cmd;
}

int close_command(const CloseArgs &args, const CommonFlags &flags, const Services &services,
                  std::ostream &err) {
  announce(err, flags);
  const auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const auto closed = close_mapping(mapping_name(args.name), session->env);
  return closed ? succeed(err, flags) : fail(err, closed.error());
}

}  // namespace lbscrypt::cli
