// SPDX-License-Identifier: GPL-2.0-only
// Plain-mode keys, derived exactly as `cryptsetup open --type plain` does (cryptsetup 2.6 and
// 2.7 read and hash alike; only their defaults differ, and lbscrypt takes 2.7's):
// - a key file (not "-") is the key itself: key-size bytes from --keyfile-offset, no hashing,
//   --hash and --keyfile-size ignored;
// - otherwise the passphrase is hashed with --hash (default sha256) through libcryptsetup;
//   --hash plain uses it as is. From a terminal (with or without --key-file=-): one line
//   without its newline, --keyfile-size ignored, --keyfile-offset refused; from standard
//   input without --key-file: up to the first newline; --key-file=- not on a terminal:
//   everything, up to --keyfile-size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

inline constexpr const char *kDefaultCipher = "aes-xts-plain64";
inline constexpr std::uint32_t kDefaultKeyBits = 256;
// cryptsetup 2.7's plain defaults (2.6: aes-cbc-essiv:sha256, ripemd160, 256 bits).
inline constexpr const char *kDefaultPlainHash = "sha256";
inline constexpr std::size_t kMaxTerminalPassphrase = 512;  // cryptsetup's tty limit

struct KeyOptions {
  std::uint32_t key_size_bits = kDefaultKeyBits;
  std::optional<std::string> hash;
  std::optional<std::string> key_file;  // "-" is standard input
  std::uint64_t keyfile_offset = 0;
  std::optional<std::uint32_t> keyfile_size;
  // Whether --cipher and --key-size were given: a passphrase used with any default draws
  // the warning cryptsetup 2.7 gives.
  bool cipher_given = false;
  bool key_size_given = false;
  bool quiet = false;  // -q: no warnings
};

// How the key will be made, decided from the options alone.
struct KeyPlan {
  enum class Source { terminal, stdin_line, stdin_all, file };
  Source source = Source::terminal;
  std::optional<std::string> hash;  // nullopt: the material is the key, used as is
  std::size_t key_bytes = 0;
  std::size_t read_limit = 0;  // 0: no limit beyond the reader's own
  std::vector<std::string> warnings;
};

[[nodiscard]] Result<KeyPlan> plan_plain_key(const KeyOptions &options, bool stdin_is_terminal);

// Reads one passphrase line from the terminal (prompting is the caller's business).
using TerminalReader = std::function<Result<SecretBuffer>(std::size_t max_size)>;

// Reads the key material the plan names.
[[nodiscard]] Result<SecretBuffer> read_key_material(const KeyPlan &plan, const KeyOptions &options,
                                                     const TerminalReader &terminal);

// Turns material into the volume key: the hash through libcryptsetup, or the first
// key_bytes bytes as they are.
[[nodiscard]] Result<SecretBuffer> make_plain_key(const KeyPlan &plan,
                                                  const SecretBuffer &material);

// Errc::invalid_argument when the plan's hash is one libcryptsetup cannot make the key with
// (an unknown name, HASH:N longer than the hash). Checked before any passphrase is asked for.
[[nodiscard]] Result<void> check_plain_hash(const KeyPlan &plan);

// Checks a plain-mode hash spec NAME or NAME:N before libcryptsetup sees it (its sscanf would
// take ' 8' and 0): a name of printable ASCII without spaces, N decimal digits from 1 to
// `key_bytes`. `field` names the option in the error ("--hash", "hash=").
[[nodiscard]] Result<void> check_hash_spec(std::string_view spec, std::size_t key_bytes,
                                           std::string_view field = "--hash");

struct PlainKey {
  SecretBuffer key;
  KeyPlan plan;
};

[[nodiscard]] Result<PlainKey> derive_plain_key(const KeyOptions &options, bool stdin_is_terminal,
                                                const TerminalReader &terminal);

}  // namespace lbscrypt
