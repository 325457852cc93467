// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt`: a plain volume's key, cipher or sector size changed in place, closed
// or (--active-name) open and mounted (the library's reencrypt/run.hpp), with progress on a
// terminal or as JSON lines.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "cli.hpp"
#include "options.hpp"

namespace lbscrypt::cli {

struct ReencryptArgs {
  // Ordered by size (clang-analyzer's padding check), not by meaning.
  MappingArgs old_side;  // the volume as `open` takes it; its device the positional argument
  std::optional<std::string> new_cipher;
  std::optional<std::string> new_hash;
  std::optional<std::string> new_key_file;
  std::optional<std::string> new_tpm2_credential;  // the new key sealed to the TPM2
  std::optional<std::string> active_name;          // online: the open volume's mapping
  std::string state;
  std::uint64_t new_keyfile_offset = 0;
  std::uint64_t hotzone_bytes = 0;  // 0: the default
  std::optional<std::uint32_t> new_key_bits;
  std::optional<std::uint32_t> new_sector_size;
  std::optional<std::uint32_t> new_keyfile_size;
  std::optional<std::uint32_t> pbkdf_iterations;  // the key verifiers' (a new run)
  bool new_iv_large_sectors = false;
  bool new_sealed_passphrase = false;  // the new credential holds a passphrase
  bool keep_key = false;
  bool resume = false;
  bool force = false;
  bool update_tab = false;  // a volume lbscrypttab lists: its line follows the run
  bool json = false;
  bool abort = false;
};

[[nodiscard]] CLI::App *add_reencrypt_command(CLI::App &app, ReencryptArgs &args,
                                              CommonFlags &flags);

[[nodiscard]] int reencrypt_command(const ReencryptArgs &args, const CommonFlags &flags,
                                    const Services &services, std::ostream &out, std::ostream &err);

}  // namespace lbscrypt::cli
