// SPDX-License-Identifier: GPL-2.0-only
// The dm-crypt table line:
//   <start> <length> crypt <cipher> <key> <iv_offset> <device> <offset> [<#opt> <opt>...]
// parsed into typed fields and formatted back exactly as the kernel prints it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

inline constexpr std::uint32_t kDefaultSectorSize = 512;

// A key held by the kernel keyring: ":<key_size>:<type>:<description>".
struct KeyringKey {
  std::uint32_t key_size = 0;  // bytes
  std::string type;            // logon, user, encrypted, trusted
  std::string description;
  bool operator==(const KeyringKey &) const = default;
};

struct EmptyKey {  // "-"
  bool operator==(const EmptyKey &) const = default;
};

using KeySpec = std::variant<SecretBuffer, KeyringKey, EmptyKey>;

struct IntegrityOption {  // integrity:<tag_size>:<auth>
  std::uint32_t tag_size = 0;
  std::string auth;
  bool operator==(const IntegrityOption &) const = default;
};

// The dm-crypt flags: optional parameters that are one word without a value.
struct CryptFlags {
  bool allow_discards = false;
  bool same_cpu_crypt = false;
  bool high_priority = false;
  bool submit_from_crypt_cpus = false;
  bool no_read_workqueue = false;
  bool no_write_workqueue = false;
  bool iv_large_sectors = false;
  bool operator==(const CryptFlags &) const = default;
};

// Each flag's words, written once for the table parser and formatter, JSON and status output,
// the command line and lbscrypttab. An empty word: that interface has none for the flag.
struct FlagWord {
  std::string_view table;     // the kernel's word: allow_discards
  std::string_view status;    // cryptsetup status's "flags:" word: discards
  std::string_view cli;       // the option of table and open: --allow-discards
  std::string_view crypttab;  // the crypttab(5) option: discard
  bool CryptFlags::*member;
  bool after_sector_size;  // the kernel prints it after sector_size:, not before integrity:
};

inline constexpr std::array<FlagWord, 7> kFlagWords{{
    {"allow_discards", "discards", "--allow-discards", "discard", &CryptFlags::allow_discards,
     false},
    {"same_cpu_crypt", "same_cpu_crypt", "--perf-same_cpu_crypt", "same-cpu-crypt",
     &CryptFlags::same_cpu_crypt, false},
    {"high_priority", "", "", "", &CryptFlags::high_priority, false},
    {"submit_from_crypt_cpus", "submit_from_crypt_cpus", "--perf-submit_from_crypt_cpus",
     "submit-from-crypt-cpus", &CryptFlags::submit_from_crypt_cpus, false},
    {"no_read_workqueue", "no_read_workqueue", "--perf-no_read_workqueue", "no-read-workqueue",
     &CryptFlags::no_read_workqueue, false},
    {"no_write_workqueue", "no_write_workqueue", "--perf-no_write_workqueue", "no-write-workqueue",
     &CryptFlags::no_write_workqueue, false},
    {"iv_large_sectors", "", "--iv-large-sectors", "", &CryptFlags::iv_large_sectors, true},
}};

// Optional parameters. Formatting prints them in the kernel's order:
// allow_discards same_cpu_crypt high_priority submit_from_crypt_cpus no_read_workqueue
// no_write_workqueue integrity: sector_size: iv_large_sectors integrity_key_size:
struct CryptOptions : CryptFlags {
  std::optional<IntegrityOption> integrity;
  // The sector_size argument exactly as written ("4096", or "4096abc" in a table under
  // test). Absent means the default, 512. Use sector_size() for the validated number.
  std::optional<std::string> sector_size_arg;
  std::optional<std::uint32_t> integrity_key_size;

  // Number of option words the line carries (the <#opt_params> field).
  [[nodiscard]] unsigned count() const;
  bool operator==(const CryptOptions &) const = default;
};

struct CryptTable {
  std::uint64_t start = 0;   // 512-byte sectors
  std::uint64_t length = 0;  // 512-byte sectors
  std::string cipher;        // as written; parse_cipher_spec() gives the typed view
  KeySpec key = EmptyKey{};
  std::uint64_t iv_offset = 0;
  std::string device;  // path or major:minor
  std::uint64_t offset = 0;
  CryptOptions options;

  // The sector size if sector_size_arg is a canonical unsigned decimal (or absent).
  [[nodiscard]] Result<std::uint32_t> sector_size() const;
  bool operator==(const CryptTable &) const = default;
};

enum class KeyDisplay { show, hide };

// Parses a whole line "<start> <length> crypt <params>". The target name must be "crypt"
// (or the name passed in, e.g. "crypt_lbs").
[[nodiscard]] Result<CryptTable> parse_table_line(std::string_view line,
                                                  std::string_view target_name = "crypt");
// Parses only the target parameters (what libdevmapper's dm_get_next_target returns).
[[nodiscard]] Result<CryptTable> parse_table_params(std::string_view params, std::uint64_t start,
                                                    std::uint64_t length);

// Target parameters, as the kernel prints them (STATUSTYPE_TABLE). With KeyDisplay::hide the
// key's hex digits are replaced by '0', as `dmsetup table` does without --showkeys.
[[nodiscard]] SecretBuffer format_table_params(const CryptTable &table,
                                               KeyDisplay keys = KeyDisplay::show);
// The whole line "<start> <length> <target_name> <params>". Contains the key: a secret.
[[nodiscard]] SecretBuffer format_table_line(const CryptTable &table,
                                             KeyDisplay keys = KeyDisplay::show,
                                             std::string_view target_name = "crypt");

// Checks that `word` can stand as one word of a table line, as the kernel splits it
// (dm_split_args): not empty, no whitespace (byte 0xa0 is whitespace to the kernel's ctype),
// no control character, no backslash (the kernel's escape). `field` names it in the error,
// which says what to do.
[[nodiscard]] Result<void> check_table_word(std::string_view field, std::string_view word);

// Checks a device-mapper target name: 1 to 15 letters, digits, '_' or '-' (the kernel's
// DM_MAX_TYPE_NAME is 16 with its NUL).
[[nodiscard]] Result<void> check_target_name(std::string_view name);

// `text` with control characters, backslashes and bytes >= 0x7f written as C escapes
// (\n, \t, \xNN): one printable line for an error message.
[[nodiscard]] std::string printable(std::string_view text);

// `text` with its control characters alone written as C escapes: a message that may
// already hold printable() text stays one line and cannot drive a terminal.
[[nodiscard]] std::string one_line(std::string_view text);

// Size of the key in bytes (0 for "-"), whichever form it has.
[[nodiscard]] std::uint32_t key_size_bytes(const KeySpec &key);

}  // namespace lbscrypt
