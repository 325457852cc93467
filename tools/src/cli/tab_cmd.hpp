// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt tab list`: lbscrypttab as the tool's parser reads it, one record per volume, for
// the initramfs hook and boot script (which so never parse the file themselves).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/crypttab.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct TabArgs {
  std::string tab = kLbscrypttab;
  bool initrd = false;  // only the volumes the initramfs opens (opens_in_initrd)
  BootArgs boot;        // where --initrd finds the volumes the boot needs
  // The registry of reencrypt runs in progress (default: the services', normally
  // kReencryptRegistry).
  std::optional<std::string> registry;
};

// `tab`, with its one subcommand `list`; returns `tab`.
[[nodiscard]] CLI::App *add_tab_command(CLI::App &app, TabArgs &args);

// Prints tab_record() for each volume; each refused line on `err`. Exit 1 when a line is
// refused (with --initrd: a line that names x-initrd.attach or a mapping the boot needs; the
// others draw a warning). With --initrd, a volume listed only because the boot needs it
// (boot_volumes.hpp) draws a note naming its line and why (boot_use_note), and exit 0.
// A volume whose device has a reencrypt run in progress is listed all the same (attach
// refuses it, naming the run) with a warning on `err`; a registry that cannot be read is an
// error (exit 1), since attach then refuses every volume.
[[nodiscard]] int tab_command(const TabArgs &args, const Services &services, std::ostream &out,
                              std::ostream &err);

}  // namespace lbscrypt::cli
