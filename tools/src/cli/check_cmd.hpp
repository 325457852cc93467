// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt check`: what this kernel (or an assumed one) allows, and whether a sector size
// loads; with --device, the torn-sector warning for a mapping there. With --kernel RELEASE,
// instead: that kernel's own crypt target, read from its dm-crypt module file, and whether it
// is enough to hand over (exit 0) or dm-crypt-lbs serves crypt there (exit 1).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct CheckArgs {
  std::optional<std::uint64_t> sector_size;
  std::optional<std::string> device;
  std::string type = "plain";
  std::optional<std::string> kernel;
  std::string modules_dir = "/lib/modules";
  bool json = false;
  EnvironmentArgs environment;
};

[[nodiscard]] CLI::App *add_check_command(CLI::App &app, CheckArgs &args, CommonFlags &flags);

[[nodiscard]] int check_command(const CheckArgs &args, const CommonFlags &flags,
                                const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
