// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt benchmark`: the kernel's cipher per unit size, through AF_ALG.
#pragma once

#include <iosfwd>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/benchmark.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct BenchmarkArgs {
  BenchmarkRequest request;
  bool json = false;
  EnvironmentArgs environment;
};

[[nodiscard]] CLI::App *add_benchmark_command(CLI::App &app, BenchmarkArgs &args,
                                              CommonFlags &flags);

[[nodiscard]] int benchmark_command(const BenchmarkArgs &args, const CommonFlags &flags,
                                    const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
