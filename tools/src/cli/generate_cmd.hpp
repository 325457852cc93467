// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt generate-units`: the systemd generator (lbscrypttab(5)); each unit it writes runs
// `lbscrypt attach`.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "lbscrypt/crypttab.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

// The name the generator is installed under (a link to lbscrypt): run as generate-units.
inline constexpr const char *kGeneratorName = "lbscrypt-generator";
// systemd's mark of an initramfs: rd.lbscrypt= counts only where it exists.
inline constexpr const char *kInitrdRelease = "/etc/initrd-release";

struct GenerateArgs {
  std::string normal_dir;  // systemd passes three directories; the units go to the first
  std::string early_dir;
  std::string late_dir;
  std::string tab = kLbscrypttab;
  std::string tool;  // the lbscrypt the units run; empty: the installed one
  // The kernel command line (lbscrypt=, rd.lbscrypt=; root=, resume=) and what else says
  // which volumes the boot needs (their units are not stopped at shutdown).
  BootArgs boot;
  std::string makefs;  // what formats swap and tmp volumes; empty: systemd's, where it is
};

[[nodiscard]] CLI::App *add_generate_command(CLI::App &app, GenerateArgs &args, CommonFlags &flags);

[[nodiscard]] int generate_command(const GenerateArgs &args, const Services &services,
                                   std::ostream &err);

}  // namespace lbscrypt::cli
