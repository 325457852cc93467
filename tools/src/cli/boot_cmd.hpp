// SPDX-License-Identifier: GPL-2.0-only
// The boot-time commands: `generate-units` (the systemd generator, lbscrypttab(5)) and
// `attach` (what each generated unit runs).
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/attach.hpp"

namespace lbscrypt::cli {

// The name the generator is installed under (a link to lbscrypt): run as generate-units.
inline constexpr const char *kGeneratorName = "lbscrypt-generator";

struct GenerateArgs {
  std::string normal_dir;  // systemd passes three directories; the units go to the first
  std::string early_dir;
  std::string late_dir;
  std::string tab = kLbscrypttab;
  std::string tool;  // the lbscrypt the units run; empty: the installed one
};

struct AttachArgs {
  AttachRequest request;
};

[[nodiscard]] CLI::App *add_generate_command(CLI::App &app, GenerateArgs &args);
[[nodiscard]] CLI::App *add_attach_command(CLI::App &app, AttachArgs &args);

[[nodiscard]] int generate_command(const GenerateArgs &args, const Services &services,
                                   std::ostream &err);
[[nodiscard]] int attach_command(const AttachArgs &args, const Environment &env,
                                 const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
