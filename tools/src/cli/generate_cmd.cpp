// SPDX-License-Identifier: GPL-2.0-only
#include "generate_cmd.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>
#include <system_error>

#include "lbscrypt/units.hpp"
#include "lbscrypt/version.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_generate_command(CLI::App &app, GenerateArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand(
      "generate-units",
      fmt::format("Write the systemd units for lbscrypttab (what {} does at boot)",
                  kGeneratorName));
  cmd->set_help_flag("--help");
  cmd->add_option("--tab", args.tab, "The lbscrypttab to read")->capture_default_str();
  cmd->add_option("--tool", args.tool,
                  "The lbscrypt the units run (default: where it is installed)");
  cmd->add_option("normal-dir", args.normal_dir, "Where the units go")->required();
  cmd->add_option("early-dir", args.early_dir, "systemd's early directory (not used)");
  cmd->add_option("late-dir", args.late_dir, "systemd's late directory (not used)");
  add_common_flags(*cmd, flags);
  return cmd;
}

int generate_command(const GenerateArgs &args, const Services &services, std::ostream &err) {
  const auto text = services.read_file(args.tab);
  if (!text) {
    if (text.error().code == Errc::not_found) {
      return kExitOk;  // no lbscrypttab: nothing to open
    }
    print_error(err, text.error().message, "lbscrypt-generator");
    return exit_code(text.error().code);
  }
  const Lbscrypttab tab = parse_lbscrypttab(*text, args.tab);
  for (const Error &error : tab.errors) {
    print_error(err, error.message + " (the line is skipped)", "lbscrypt-generator");
  }
  std::error_code ec;
  const auto source = std::filesystem::absolute(args.tab, ec);  // SourcePath= must be absolute
  const GeneratorSettings settings{args.tool.empty() ? services.installed_tool : args.tool,
                                   ec ? args.tab : source.string()};
  // A volume with a reencrypt run in progress gets its unit as any other: generators run
  // before udev has made every device (the registry matches a device by what sysfs says of
  // it), and a missing unit would fail what needs it with a bare "not found". Its attach
  // refuses at start, naming the run's state file (open_volume): that volume fails clearly
  // and the rest of the boot goes on.
  // Every volume that can be written is, whatever failed before it; the exit status tells.
  const GeneratedUnits units = generate_units(tab.entries, settings);
  for (const Error &error : units.errors) {
    print_error(err, error.message + " (the line is skipped)", "lbscrypt-generator");
  }
  const std::vector<Error> written = write_units(args.normal_dir, units);
  for (const Error &error : written) {
    print_error(err, error.message, "lbscrypt-generator");
  }
  if (!written.empty()) {
    return exit_code(written.front().code);
  }
  return tab.errors.empty() && units.errors.empty() ? kExitOk : kExitInvalid;
}

}  // namespace lbscrypt::cli
