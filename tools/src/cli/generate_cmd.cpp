// SPDX-License-Identifier: GPL-2.0-only
#include "generate_cmd.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <ostream>
#include <system_error>
#include <vector>

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
  cmd->add_option("--makefs", args.makefs,
                  "What formats swap and tmp volumes (default: systemd-makefs)");
  add_boot_options(*cmd, args.boot);
  cmd->add_option("normal-dir", args.normal_dir, "Where the units go")->required();
  cmd->add_option("early-dir", args.early_dir, "systemd's early directory (not used)");
  cmd->add_option("late-dir", args.late_dir, "systemd's late directory (not used)");
  add_common_flags(*cmd, flags);
  return cmd;
}

namespace {

// systemd-makefs where systemd installs it: /lib/systemd on Debian 12, /usr/lib/systemd on a
// system whose /lib is not /usr/lib.
std::string installed_makefs() {
  const std::string debian = kSystemdMakefs;
  const std::string usr = "/usr" + debian;
  return access(debian.c_str(), X_OK) != 0 && access(usr.c_str(), X_OK) == 0 ? usr : debian;
}

}  // namespace

int generate_command(const GenerateArgs &args, const Services &services, std::ostream &err) {
  // lbscrypt=no on the kernel command line (rd.lbscrypt=no in the initramfs): no unit at all,
  // lbscrypttab not even read, as systemd's luks=no.
  if (const auto cmdline = services.read_file(args.boot.cmdline)) {
    const bool in_initrd = static_cast<bool>(services.read_file(kInitrdRelease));
    const KernelSwitch word = kernel_command_line_switch(*cmdline, in_initrd);
    for (const std::string &warning : word.warnings) {
      print_error(err, warning, "lbscrypt-generator");
    }
    if (!word.enabled) {
      return kExitOk;
    }
  } else if (cmdline.error().code != Errc::not_found) {
    print_error(err, cmdline.error().message + " (lbscrypt= not read)", "lbscrypt-generator");
  }
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
  const GeneratorSettings settings{
      args.tool.empty() ? services.installed_tool : args.tool, ec ? args.tab : source.string(),
      args.makefs.empty() ? installed_makefs() : args.makefs,
      read_boot_volumes(args.boot, services, err, "lbscrypt-generator")};
  // A volume with a reencrypt run in progress gets its unit as any other: generators run
  // before udev has made every device (the registry matches a device by what sysfs says of
  // it), and a missing unit would fail what needs it with a bare "not found". Its attach
  // refuses at start, naming the run's state file (open_volume): that volume fails clearly
  // and the rest of the boot goes on.
  // Every volume that can be written is, whatever failed before it; the exit status tells.
  // Made and written a batch of volumes at a time: the memory holds one batch's units, not
  // every volume's (a file of 200,000 lines took 575 MB when all were kept).
  constexpr std::size_t kBatch = 1024;
  bool refused = false;
  std::optional<Errc> write_failed;
  for (std::size_t first = 0; first < tab.entries.size(); first += kBatch) {
    const std::size_t end = std::min(tab.entries.size(), first + kBatch);
    const std::vector<TabEntry> batch(tab.entries.begin() + static_cast<std::ptrdiff_t>(first),
                                      tab.entries.begin() + static_cast<std::ptrdiff_t>(end));
    const GeneratedUnits units = generate_units(batch, settings);
    for (const Error &error : units.errors) {
      print_error(err, error.message + " (the line is skipped)", "lbscrypt-generator");
    }
    refused = refused || !units.errors.empty();
    const std::vector<Error> written = write_units(args.normal_dir, units);
    for (const Error &error : written) {
      print_error(err, error.message, "lbscrypt-generator");
    }
    if (!written.empty() && !write_failed) {
      write_failed = written.front().code;
    }
  }
  if (write_failed) {
    return exit_code(*write_failed);
  }
  return tab.errors.empty() && !refused ? kExitOk : kExitInvalid;
}

}  // namespace lbscrypt::cli
