// SPDX-License-Identifier: GPL-2.0-only
#include "status_cmd.hpp"

#include <fmt/format.h>

#include <ostream>

#include "output.hpp"

namespace lbscrypt::cli {

namespace {

// The path `status` names, as cryptsetup does: the argument when it is a path, otherwise
// /dev/mapper/NAME.
std::string status_path(const std::string &argument) {
  return argument.find('/') != std::string::npos ? argument : "/dev/mapper/" + argument;
}

}  // namespace

CLI::App *add_status_command(CLI::App &app, StatusArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("status", "Report a mapping");
  cmd->set_help_flag("--help");
  cmd->add_option("--target", args.environment.target_type, "Device-mapper target name")
      ->capture_default_str();
  cmd->add_flag("--json", args.json, "JSON output");
  add_common_flags(*cmd, flags);
  cmd->add_option("name", args.name, "Mapping name or /dev/mapper/NAME")->required();
  return cmd;
}

int status_command(const StatusArgs &args, const CommonFlags &flags, const Services &services,
                   std::ostream &out, std::ostream &err) {
  announce(err, flags);
  const auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const auto report = mapping_status(mapping_name(args.name), session->env);
  if (!report) {
    if (report.error().code == Errc::not_found) {
      // cryptsetup's answer for a mapping that is not there: on stdout, exit 4.
      out << fmt::format("{} is inactive.\n", status_path(args.name));
      return kExitDevice;
    }
    return fail(err, report.error());
  }
  print_status(out, *report, status_path(args.name), session->env.target_type, args.json);
  warn_torn(err, flags, report->torn_warning);
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
