// SPDX-License-Identifier: GPL-2.0-only
#include "check_cmd.hpp"

#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_check_command(CLI::App &app, CheckArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("check", "What this kernel allows");
  cmd->set_help_flag("--help");
  add_number(*cmd, "--sector-size", args.sector_size, "Sector size to try, bytes");
  add_text(*cmd, "--device", args.device,
           "Block device a mapping would sit on: warn when a power failure can tear a sector "
           "there");
  cmd->add_option("--type", args.type, "plain or luks")->capture_default_str();
  cmd->add_flag("--json", args.json, "JSON output");
  add_environment_options(*cmd, args.environment);
  add_common_flags(*cmd, flags);
  return cmd;
}

int check_command(const CheckArgs &args, const CommonFlags &flags, const Services &services,
                  std::ostream &out, std::ostream &err) {
  announce(err, flags);
  const auto type = mapping_type(args.type);
  if (!type) {
    return fail(err, type.error());
  }
  const auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const auto report = check(session->env, args.sector_size, *type, args.device);
  if (!report) {
    return fail(err, report.error());
  }
  print_check(out, *report, session->env.target_type, args.json);
  warn_torn(err, flags, report->torn_warning);
  return report->refusal ? exit_code(report->refusal->code) : succeed(err, flags);
}

}  // namespace lbscrypt::cli
