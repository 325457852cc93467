// SPDX-License-Identifier: GPL-2.0-only
// /etc/lbscrypttab: crypttab(5)'s syntax and option names for plain volumes that open at boot.
// A line is "NAME DEVICE [KEY [OPTIONS]]"; KEY "none", "-" or absent asks for a passphrase.
// crypttab's plain defaults (aes-cbc-essiv:sha256, ripemd160) are not lbscrypt's, so no default
// is taken: every line names cipher= and size=, and hash= when a passphrase is asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/keys.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

inline constexpr const char *kLbscrypttab = "/etc/lbscrypttab";
inline constexpr std::uint32_t kDefaultTries = 3;  // crypttab's
// Where Debian's cryptsetup keeps its check programs (check=NAME).
inline constexpr const char *kCheckDir = "/lib/cryptsetup/checks";
inline constexpr const char *kDefaultCheck = "blkid";

// password-cache=: whether a passphrase is taken from the kernel keyring, where
// systemd-ask-password keeps what it was told (--keyname). Unset: every answer is kept, and one
// is taken from there only for a line with check= (plain mode cannot tell a wrong passphrase; the
// check can, and a failed check asks again). yes: taken without a check; no: never kept or taken.
enum class PasswordCache { unset, yes, no };

// One volume's options: the fourth field of a line, or attach's OPTIONS argument.
struct VolumeOptions {
  MappingRequest mapping;  // cipher, offset, skip, sector size, flags (device: the caller's)
  KeyOptions key;          // size, hash, keyfile-offset, keyfile-size
  bool read_only = false;
  bool noauto = false;
  bool nofail = false;
  bool initrd_attach = false;  // x-initrd.attach: the initramfs opens it, shutdown closes it
  std::uint32_t tries = kDefaultTries;      // passphrase attempts; 0: no limit
  std::optional<std::uint64_t> timeout_us;  // timeout=, a systemd time span; 0: no limit
  std::optional<std::string> check;         // program name (under kCheckDir) or absolute path
  std::optional<std::string> check_args;
  std::optional<std::uint64_t> device_timeout_us;  // x-systemd.device-timeout=
  bool netdev = false;                             // _netdev
  bool headless = false;                           // headless=

  PasswordCache password_cache = PasswordCache::unset;  // password-cache=
};

// True when the key field asks for a passphrase: "none", "-" or empty.
[[nodiscard]] bool is_passphrase_key(std::string_view key_field);

// Parses comma-separated options. Errc::invalid_argument naming the option for an unknown
// option, a bad value, a value given twice, or a missing cipher=, size= (or hash= when
// `passphrase`).
[[nodiscard]] Result<VolumeOptions> parse_volume_options(std::string_view options, bool passphrase);

// The path a DEVICE field names: /dev/disk/by-{uuid,partuuid,label,partlabel}/X for
// UUID=X, PARTUUID=X, LABEL=X, PARTLABEL=X; an absolute path as it is.
[[nodiscard]] Result<std::string> volume_device_path(std::string_view device);

// Checks a mapping name as open takes it: not empty, no '/', whitespace or control
// characters, not "." or "..", at most 127 bytes (DM_NAME_LEN with its NUL).
[[nodiscard]] Result<void> check_mapping_name(std::string_view name);

struct TabEntry {
  unsigned line = 0;
  std::string name;
  std::string device;   // as written
  std::string path;     // volume_device_path(device)
  std::string key;      // as written; "none" when the field is absent
  std::string options;  // as written; "" when absent
  VolumeOptions volume;
};

struct Lbscrypttab {
  std::vector<TabEntry> entries;
  std::vector<Error> errors;  // one per refused line: "PATH:LINE: ..."
};

// Every line of the file: the good ones as entries, the others as errors (so one bad line does
// not keep the other volumes from opening at boot). Blank lines and '#' comments are skipped.
[[nodiscard]] Lbscrypttab parse_lbscrypttab(std::string_view text, std::string_view path);

}  // namespace lbscrypt
