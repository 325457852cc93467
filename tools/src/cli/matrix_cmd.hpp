// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt matrix`: its options, the run (root only, signals stop it cleanly) and its output.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/matrix.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct MatrixArgs {
  std::vector<std::string> targets;  // default: crypt
  std::vector<std::string> sizes;    // comma-separated lists, added to the defaults
  bool no_defaults = false;          // only the spellings of --sizes
  bool json = false;
};

[[nodiscard]] CLI::App *add_matrix_command(CLI::App &app, MatrixArgs &args, CommonFlags &flags);

[[nodiscard]] int matrix_command(const MatrixArgs &args, const Services &services,
                                 std::ostream &out, std::ostream &err);

// The human table, and the JSON records (one object a line) qemu/lib/matrix.py reads.
void print_matrix(std::ostream &out, const MatrixReport &report, bool json);

}  // namespace lbscrypt::cli
