// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt close`: removes a crypt mapping (tried again while udev holds it for a moment).
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
};

[[nodiscard]] CLI::App *add_close_command(CLI::App &app, CloseArgs &args, CommonFlags &flags);

[[nodiscard]] int close_command(const CloseArgs &args, const CommonFlags &flags,
                                const Services &services, std::ostream &err);

}  // namespace lbscrypt::cli
