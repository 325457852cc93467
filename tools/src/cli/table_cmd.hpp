// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt table`: the crypt table line for dmsetup create, gated like open.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct TableArgs {
  MappingArgs mapping;  // the device is mapping.mapping.device
  bool json = false;
  bool show_keys = false;  // the key even when standard output is a terminal
};

[[nodiscard]] CLI::App *add_table_command(CLI::App &app, TableArgs &args, CommonFlags &flags);

[[nodiscard]] int table_command(const TableArgs &args, const CommonFlags &flags,
                                const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
