// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt attach`: what each generated unit runs to open one lbscrypttab volume, by the
// library's open sequence (lbscrypt/volume.hpp), the one `open` runs too.
#pragma once

#include <iosfwd>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/attach.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct AttachArgs {
  AttachRequest request;
  EnvironmentArgs environment;  // --target only
};

[[nodiscard]] CLI::App *add_attach_command(CLI::App &app, AttachArgs &args, CommonFlags &flags);

[[nodiscard]] int attach_command(const AttachArgs &args, const CommonFlags &flags,
                                 const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
