// SPDX-License-Identifier: GPL-2.0-only
#include "tab_cmd.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <ostream>

#include "lbscrypt/reencrypt/registry.hpp"
#include "options.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_tab_command(CLI::App &app, TabArgs &args) {
  auto *cmd = app.add_subcommand("tab", "Read lbscrypttab as the boot does (for scripts)");
  cmd->set_help_flag("--help");
  cmd->require_subcommand(1);
  auto *list = cmd->add_subcommand(
      "list",
      "One line per volume: NAME DEVICE NODE KEY SECTOR-SIZE CHECK CIPHER OPTIONS (CHECK - "
      "when none); refused lines on standard error");
  list->set_help_flag("--help");
  list->add_option("--tab", args.tab, "The lbscrypttab to read")->capture_default_str();
  list->add_flag("--initrd", args.initrd,
                 "Only the volumes the initramfs opens: x-initrd.attach (not noauto), and those "
                 "behind /, /usr and the resume device, each with a note on standard error");
  add_boot_options(*list, args.boot);
  add_text(
      *list, "--registry", args.registry,
      fmt::format("The registry of reencrypt runs in progress (default {})", kReencryptRegistry));
  return cmd;
}

int tab_command(const TabArgs &args, const Services &services, std::ostream &out,
                std::ostream &err) {
  const auto text = services.read_file(args.tab);
  if (!text) {
    if (text.error().code == Errc::not_found) {
      return kExitOk;  // no lbscrypttab: no volume
    }
    print_error(err, text.error().message);
    return exit_code(text.error().code);
  }
  const Lbscrypttab tab = parse_lbscrypttab(*text, args.tab);
  // Which volumes the boot needs, whatever their lines say (only --initrd asks).
  const BootVolumes boot =
      args.initrd ? read_boot_volumes(args.boot, services, err, "lbscrypt") : BootVolumes{};
  bool refused = false;
  for (std::size_t i = 0; i < tab.errors.size(); ++i) {
    const TabRefusal &line = tab.refused[i];
    const auto needed = boot.uses.find(line.name);
    if (args.initrd && !line.initrd_attach && needed == boot.uses.end()) {
      print_error(err, fmt::format("warning: {} (not an x-initrd.attach line: left out)",
                                   tab.errors[i].message));
      continue;
    }
    print_error(err, tab.errors[i].message);
    refused = true;
  }
  const auto registry = args.registry ? std::optional<std::filesystem::path>(*args.registry)
                                      : services.reencrypt_registry;
  bool registry_failed = false;
  for (const TabEntry &entry : tab.entries) {
    if (args.initrd) {
      if (!opens_in_initrd(entry, boot)) {
        continue;
      }
      if (const auto use = boot_use(entry, boot); use && !opened_by_initrd(entry)) {
        print_error(err, "note: " + boot_use_note(entry, args.tab, *use));
      }
    }
    out << tab_record(entry) << '\n';
    if (!registry || registry_failed) {
      continue;
    }
    const auto run = find_entry(*registry, entry.path);
    if (!run) {
      print_error(err, run.error().message);
      registry_failed = true;
    } else if (*run) {
      print_error(err, fmt::format("warning: {}: {} is being reencrypted (state {}): attach "
                                   "refuses it until 'lbscrypt reencrypt --resume --state {} "
                                   "...' has finished",
                                   entry.name, entry.path, (*run)->state, (*run)->state));
    }
  }
  out.flush();
  if (!out) {
    print_error(err, "cannot write the list to standard output");
    return kExitInvalid;
  }
  return refused || registry_failed ? kExitInvalid : kExitOk;
}

}  // namespace lbscrypt::cli
