// SPDX-License-Identifier: GPL-2.0-only
#include "check_cmd.hpp"

#include "lbscrypt/in_tree.hpp"
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
  auto *kernel = add_text(*cmd, "--kernel", args.kernel,
                          "Instead: whether kernel RELEASE's own crypt target (read from its "
                          "dm-crypt module) is enough to hand over");
  cmd->add_option("--modules-dir", args.modules_dir,
                  "Where --kernel's modules are (default /lib/modules)")
      ->needs(kernel);
  cmd->add_flag("--json", args.json, "JSON output");
  add_environment_options(*cmd, args.environment);
  for (const char *other : {"--sector-size", "--device", "--type", "--assume-version",
                            "--assume-page-size", "--target"}) {
    kernel->excludes(other);
  }
  add_common_flags(*cmd, flags);
  return cmd;
}

namespace {

int check_kernel(const CheckArgs &args, const CommonFlags &flags, std::ostream &out,
                 std::ostream &err) {
  const auto in_tree = in_tree_crypt(args.modules_dir, *args.kernel);
  if (!in_tree) {
    return fail(err, in_tree.error());
  }
  print_in_tree(out, *in_tree, args.json);
  return enough_to_hand_over(*in_tree) ? succeed(err, flags) : kExitInvalid;
}

}  // namespace

int check_command(const CheckArgs &args, const CommonFlags &flags, const Services &services,
                  std::ostream &out, std::ostream &err) {
  announce(err, flags);
  if (args.kernel) {
    return check_kernel(args, flags, out, err);
  }
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
