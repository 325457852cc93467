// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt seal`: a key sealed to this machine's TPM2 as a systemd credential (sealed.hpp),
// for a tpm2-device= line of lbscrypttab or open's --tpm2-credential. It wraps
// `systemd-creds encrypt --with-key=tpm2` to warn about PCRs that were never extended, to draw
// a fresh random key that never touches a disk, and to give the credential the name the
// volume's unit asks for.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct SealArgs {
  std::string output;                   // the credential file
  std::string pcrs;                     // --tpm2-pcrs (default kDefaultSealPcrs)
  std::optional<std::uint32_t> random;  // --random BYTES: a fresh key
  std::optional<std::string> key_file;  // --key-file: a key (or passphrase) to seal
  std::optional<std::string> name;      // --name: the credential's name (default: the file's)
  bool force = false;                   // --force: replace an existing OUTPUT (a re-seal)
  std::string sysfs = "/sys";           // where the PCRs are read
  std::string dev = "/dev";             // where tpmrm0 is looked for
};

[[nodiscard]] CLI::App *add_seal_command(CLI::App &app, SealArgs &args, CommonFlags &flags);

[[nodiscard]] int seal_command(const SealArgs &args, const CommonFlags &flags,
                               const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
