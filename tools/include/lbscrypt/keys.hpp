// SPDX-License-Identifier: GPL-2.0-only
// Plain-mode keys, derived exactly as `cryptsetup open --type plain` (cryptsetup 2.6) does:
// - a key file (not "-") is the key itself: key-size bytes from --keyfile-offset, no hashing,
//   --hash and --keyfile-size ignored;
// - otherwise the passphrase (terminal: one line without its newline; stdin without
//   --key-file: up to the first newline; --key-file=-: everything, up to --keyfile-size) is
//   hashed with --hash (default ripemd160) through libcryptsetup; --hash plain uses it as is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

inline constexpr const char *kDefaultCipher = "aes-xts-plain64";
inline constexpr std::uint32_t kDefaultKeyBits = 256;
inline constexpr const char *kDefaultPlainHash = "ripemd160";  // cryptsetup 2.6 plain default
inline constexpr std::size_t kMaxTerminalPassphrase = 512;     // cryptsetup's tty limit

struct KeyOptions {
  std::uint32_t key_size_bits = kDefaultKeyBits;
  std::optional<std::string> hash;
  std::optional<std::string> key_file;  // "-" is standard input
  std::uint64_t keyfile_offset = 0;
  std::optional<std::uint32_t> keyfile_size;
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

struct PlainKey {
  SecretBuffer key;
  KeyPlan plan;
};

[[nodiscard]] Result<PlainKey> derive_plain_key(const KeyOptions &options, bool stdin_is_terminal,
                                                const TerminalReader &terminal);

}  // namespace lbscrypt
