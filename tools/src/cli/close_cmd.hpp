// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt close`: removes a crypt mapping (tried again while udev holds it for a moment).
// `lbscrypt detach`, what a generated unit stops with: the same, and a mapping already gone is
// success (as systemd-cryptsetup detach), so the unit does not show as failed.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct CloseArgs {
  std::string name;  // NAME or /dev/mapper/NAME
  EnvironmentArgs environment;
  bool gone_ok = false;  // detach: a mapping that is not active is success
};

[[nodiscard]] CLI::App *add_close_command(CLI::App &app, CloseArgs &args, CommonFlags &flags);

[[nodiscard]] CLI::App *add_detach_command(CLI::App &app, CloseArgs &args, CommonFlags &flags);

[[nodiscard]] int close_command(const CloseArgs &args, const CommonFlags &flags,
                                const Services &services, std::ostream &err);

}  // namespace lbscrypt::cli
