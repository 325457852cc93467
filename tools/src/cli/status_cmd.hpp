// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt status`: a mapping in cryptsetup's format (or JSON), plus sector size, dm device
// and target.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct StatusArgs {
  std::string name;  // NAME or /dev/mapper/NAME
  EnvironmentArgs environment;
  bool json = false;
};

[[nodiscard]] CLI::App *add_status_command(CLI::App &app, StatusArgs &args, CommonFlags &flags);

[[nodiscard]] int status_command(const StatusArgs &args, const CommonFlags &flags,
                                 const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
