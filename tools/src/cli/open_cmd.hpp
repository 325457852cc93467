// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt open`: a plain mapping through libdevmapper, by the library's open sequence
// (lbscrypt/volume.hpp), the one `attach` runs too.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct OpenArgs {
  MappingArgs mapping;  // the device is mapping.mapping.device
  std::string name;
  std::string type = "plain";
  bool read_only = false;
  bool shared = false;  // map a device already in use, as cryptsetup's --shared
};

[[nodiscard]] CLI::App *add_open_command(CLI::App &app, OpenArgs &args, CommonFlags &flags);

[[nodiscard]] int open_command(const OpenArgs &args, const CommonFlags &flags,
                               const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
