// SPDX-License-Identifier: GPL-2.0-only
// /etc/lbscrypttab: crypttab(5)'s syntax and option names for plain volumes that open at boot.
// A line is "NAME DEVICE [KEY [OPTIONS]]"; KEY "none", "-" or absent asks for a passphrase.
// crypttab's plain defaults (aes-cbc-essiv:sha256, ripemd160) are not lbscrypt's, so no default
// is taken: every line names cipher= and size=, and hash= when a passphrase is asked for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
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
// tmp without a type: the filesystem systemd makes for it.
inline constexpr const char *kDefaultTmpFilesystem = "ext4";

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
  bool swap = false;                               // swap: mkswap after it opens
  std::optional<std::string> tmp_fstype;           // tmp[=TYPE]: mkfs.TYPE after it opens

  PasswordCache password_cache = PasswordCache::unset;  // password-cache=
  // tpm2-device=: the key field names a credential sealed to the TPM2 (sealed.hpp), unsealed
  // at open; "auto" for the TPM systemd-creds finds, or a device path (/dev/tpmrm0).
  std::optional<std::string> tpm2_device;
  // x-lbscrypt.sealed=passphrase: the sealed secret is a passphrase, hashed with hash= as a
  // typed one; when the TPM refuses, attach asks for it (not with headless=). Otherwise
  // (x-lbscrypt.sealed=key, the default) it is the key itself and nothing is asked.
  bool sealed_passphrase = false;

  // Whether the key is sealed to the TPM2 (tpm2-device= given).
  [[nodiscard]] bool sealed() const { return tpm2_device.has_value(); }
};

// systemd's USEC_INFINITY: a time span of "infinity".
inline constexpr std::uint64_t kTimeInfinity = std::numeric_limits<std::uint64_t>::max();

// A systemd time span (systemd.time(7), parse_sec): terms of a number (with an optional
// decimal fraction) and a unit, summed ("1h30min", "500ms", "2 min"); a bare number is
// seconds; "infinity" is kTimeInfinity. Units: us/usec/µs, ms/msec, s/sec/second(s),
// m/min/minute(s), h/hr/hour(s), d/day(s), w/week(s), M/month(s), y/year(s). Microseconds.
[[nodiscard]] Result<std::uint64_t> parse_time_span(std::string_view text);

// systemd's booleans (parse_boolean): 1, yes, y, true, t, on and 0, no, n, false, f, off, in
// any case; nullopt for anything else.
[[nodiscard]] std::optional<bool> parse_boolean(std::string_view text);

// True when the key field asks for a passphrase: "none", "-" or empty.
[[nodiscard]] bool is_passphrase_key(std::string_view key_field);

// Parses comma-separated options. Errc::invalid_argument naming the option for an unknown
// option, a bad value, a value given twice, or a missing cipher=, size= (or hash= when
// `passphrase`); and for options that do not fit together or with the key: keyfile-offset= or
// keyfile-size= with a passphrase, hash= other than plain with a key file, offset= or skip= not
// a multiple of the sector size, a key size the cipher cannot take, hash=NAME:0.
[[nodiscard]] Result<VolumeOptions> parse_volume_options(std::string_view options, bool passphrase);

// A tag's value as udev names its link under /dev/disk (libblkid's blkid_encode_string, the
// _ENC properties): ASCII letters, digits and "#+-.:=@_" and valid multi-byte UTF-8 stay,
// every other byte (a backslash, a blank, '/', '(' ...) becomes \xNN, lower-case hex.
[[nodiscard]] std::string udev_encode(std::string_view text);

// The path a DEVICE field names: /dev/disk/by-{uuid,partuuid,label,partlabel}/E for
// UUID=X, PARTUUID=X, LABEL=X, PARTLABEL=X, E being udev_encode(X) (X without the double or
// single quotes around it, as systemd reads it); an absolute path as it is (an escaped one,
// /dev/disk/by-label/Data\x281\x29, as written). A path that is not normalised ("//", "/./",
// "/../", a trailing '/') is refused with its normal form.
[[nodiscard]] Result<std::string> volume_device_path(std::string_view device);

// Checks a key field that names a key file: no quote, backslash or control byte (NUL
// included), and no ':' (systemd's KEY:DEVICE, a key file on another device, not supported).
[[nodiscard]] Result<void> check_key_field(std::string_view key);

// Checks a sealed key's field (tpm2-device=): an absolute path to a credential file, not a
// device, whose name gives a credential name (credential_id). The error names the volume.
[[nodiscard]] Result<void> check_sealed_key_field(std::string_view name, std::string_view key);

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

// Whether the initramfs opens the volume: x-initrd.attach and not noauto.
[[nodiscard]] bool opened_by_initrd(const TabEntry &entry);

// A refused line: its number, whether its options name x-initrd.attach, and its first field
// (the name it gives, checked or not), so the initramfs hook knows which refusals would cost
// the image a volume (boot_volumes.hpp).
struct TabRefusal {
  unsigned line = 0;
  bool initrd_attach = false;
  std::string name;
};

struct Lbscrypttab {
  std::vector<TabEntry> entries;
  std::vector<Error> errors;        // one per refused line: "PATH:LINE: ..."
  std::vector<TabRefusal> refused;  // errors' lines, in the same order
};

// Every line of the file: the good ones as entries, the others as errors (so one bad line does
// not keep the other volumes from opening at boot). Blank lines and '#' comments are skipped,
// and so is a fifth field that starts with '#' (a trailing comment); a '\r' before the line
// end is dropped. Any other fifth field refuses the line.
[[nodiscard]] Lbscrypttab parse_lbscrypttab(std::string_view text, std::string_view path);

// One volume as `lbscrypt tab list` prints it for the initramfs scripts, one line that POSIX
// sh's `read -r name device node key sector check cipher options` splits (no field is empty or
// holds a blank or a control character; OPTIONS, last, is the line's field as written):
//   NAME DEVICE NODE KEY SECTOR-SIZE CHECK CIPHER OPTIONS
// DEVICE as written, NODE the path it names, KEY as written ("none" when absent), CHECK the
// check program as the line names it ("blkid" for a bare check) or "-".
[[nodiscard]] std::string tab_record(const TabEntry &entry);

// ---- the writer: a line's options changed, every other byte kept ----------------------------

// One option of a line's OPTIONS field to set or drop.
struct OptionEdit {
  std::string name;
  // name=VALUE replaces the first option of that name where it stands (name or name=...), or is
  // appended; nullopt drops every option of that name.
  std::optional<std::string> value;
};

// The options field with each edit applied; every other option kept as written, in order.
[[nodiscard]] std::string edit_volume_options(std::string_view options,
                                              std::span<const OptionEdit> edits);

// The text with line `line`'s (1-based, as TabEntry::line) fourth field replaced by `options`;
// every other byte as it was (the other lines, the blanks, the key, a trailing comment, a
// '\r'). Errc::invalid_argument when the line does not exist or has no fourth field.
[[nodiscard]] Result<std::string> replace_tab_options(std::string_view text, unsigned line,
                                                      std::string_view options);

// Replaces the lbscrypttab at `path` atomically with `text`: a temporary file beside it with
// the old file's mode and owner, written and fsynced, renamed over it, and the directory
// fsynced. The file must exist. Errc::permission, Errc::device or Errc::not_found naming it.
[[nodiscard]] Result<void> write_lbscrypttab(const std::filesystem::path &path,
                                             std::string_view text);

}  // namespace lbscrypt
