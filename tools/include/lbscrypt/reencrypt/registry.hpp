// SPDX-License-Identifier: GPL-2.0-only
// The registry of reencrypt runs in progress. A plain volume has no header that could say it
// is half converted, so `lbscrypt reencrypt` writes an entry here before the first byte and
// removes it after the last; `open`, `attach` (the boot's units and the initramfs) and
// `tab list` consult it and refuse a device that has one.
//
// One JSON file per run, in a directory (kReencryptRegistry): its name is the device's
// registry key (registry_key()) escaped as a file name (entry_file_name()), its content
//   {"device": "/dev/sdb", "device_id": "wwid-naa.5000c500a1b2c3d4", "format": 1,
//    "run_id": "<32 hex>", "state": "/var/lib/x/sdb.state"}
// Reading is strict: a file that is not exactly an entry is an error naming it, never
// skipped, since it may be the entry of the device being opened. Names starting with "." are
// add_entry's temporaries (an entry is linked into place only once it is whole) and ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/result.hpp"

namespace lbscrypt {

inline constexpr std::string_view kReencryptRegistry = "/etc/lbscrypt/reencrypt";
inline constexpr std::uint32_t kRegistryFormat = 1;

// A block device's number.
struct DevNumber {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  bool operator==(const DevNumber &) const = default;
};

// The text of a sysfs attribute, trimmed of surrounding white space; nullopt when it is
// absent or blank.
[[nodiscard]] std::optional<std::string> read_sysfs_text(const std::filesystem::path &file);
// Printable ASCII kept, the backslash and every other byte written as \xNN: the text is
// ASCII, and two different texts never give the same result.
[[nodiscard]] std::string ascii_id_text(std::string_view text);

// An id of block device MAJOR:MINOR that survives a reboot, from `sysfs` (normally /sys):
// - a device-mapper device: "dm-uuid-<dm/uuid>", or "dm-name-<dm/name>" when it has no uuid;
// - a partition (it has a `partition` file): its disk's id + "-part<N>";
// - a disk with a World Wide Id (wwid, or device/wwid): "wwid-<wwid>".
// Otherwise nullopt (a loop device, a virtio disk without one): the registry then keys the
// device by "devt-MAJ:MIN", which a reboot may give another device, and the caller says so.
// The text read is trimmed of surrounding white space; a byte outside printable ASCII is
// written as \xNN, so an id is ASCII.
[[nodiscard]] std::optional<std::string> stable_device_id(const std::filesystem::path &sysfs,
                                                          DevNumber device);

// What a path names, as the registry matches it.
struct DeviceIdentity {
  std::string canonical;                 // absolute, links resolved (as far as they exist)
  std::optional<DevNumber> number;       // a block device's st_rdev
  std::optional<std::string> stable_id;  // stable_device_id()
};

// The block device whose stable_device_id() is `id` now, as "/dev/NAME" (NAME its directory's
// name under sysfs, "!" read as "/"); nullopt when no device has it, or more than one (the
// paths of a multipath disk), or `id` is not one stable_device_id() gives.
[[nodiscard]] std::optional<std::string> find_device_by_stable_id(
    const std::filesystem::path &sysfs, std::string_view id);

// Looks the path up (stat and sysfs). A path that does not exist, or is no block device, has
// only its canonical path.
[[nodiscard]] DeviceIdentity identify_device(const std::string &path,
                                             const std::filesystem::path &sysfs = "/sys");

// The key an entry is filed under: the stable id; else "devt-MAJ:MIN" for a block device;
// else "path-<canonical path>" (a regular file behind a loop device).
[[nodiscard]] std::string registry_key(const DeviceIdentity &identity);
// Whether a key names the device after a reboot ("devt-" keys do not).
[[nodiscard]] bool registry_key_survives_reboot(std::string_view key);

// The file name of a key, as systemd-escape writes a name: every byte outside [A-Za-z0-9_.-],
// "/" included, and a leading ".", as \xNN (lower-case hex), then ".json". A name that would
// pass 255 bytes keeps the first 233 bytes at most of the escaped key (never cutting an
// escape), then "~" (which escaping never writes) and the 16 hex digits of the key's 64-bit
// FNV-1a hash: 233 + 1 + 16 + 5 = 255 bytes at most. (The name only files the entry: reading
// compares the device_id inside, so a collision of two cut names costs a refused add_entry.)
[[nodiscard]] std::string entry_file_name(std::string_view key);
// FNV-1a, 64 bits (the hash of entry_file_name()).
[[nodiscard]] std::uint64_t fnv1a_64(std::string_view bytes);

struct RegistryEntry {
  std::uint32_t format = kRegistryFormat;
  std::string device;     // canonical path when the run started
  std::string device_id;  // registry_key() of the device
  std::string state;      // absolute path of the state file
  std::string run_id;     // 32 lower-case hex characters
  bool operator==(const RegistryEntry &) const = default;
};

// The JSON of an entry; Errc::invalid_argument when a field is not valid (a relative path, a
// run id that is not 32 hex digits, text that is not UTF-8).
[[nodiscard]] Result<std::string> entry_to_json(const RegistryEntry &entry);
// Strict: one object with exactly the five keys, each once, of the right type; format 1;
// `origin` (the file) named in every error, Errc::invalid_argument.
[[nodiscard]] Result<RegistryEntry> entry_from_json(std::string_view text,
                                                    const std::string &origin);

// Files `entry` (mode 0644; the directory and its parent made 0755 when missing): written
// beside as a temporary, fsynced, linked into place (never over an entry), the directory
// fsynced. Errc::exists, naming the other run's state file, when the device has an entry.
[[nodiscard]] Result<void> add_entry(const std::filesystem::path &directory,
                                     const RegistryEntry &entry);
// Removes the device's entry and fsyncs the directory. Nothing to remove is success (a run
// cut after removing it); an entry of another run (its run id) is Errc::refused and stays.
[[nodiscard]] Result<void> remove_entry(const std::filesystem::path &directory,
                                        const RegistryEntry &entry);
// Every entry, sorted by file name. A directory that does not exist has none; a file that is
// not a whole entry filed under its own key is Errc::invalid_argument naming it.
[[nodiscard]] Result<std::vector<RegistryEntry>> list_entries(
    const std::filesystem::path &directory);

// The entry of a device. When the entry and the device both have a stable id, the ids
// decide (a disk renamed from sdb to sdc is still found, another disk now called sdb is not).
// Otherwise an entry matches on the major:minor of a "devt-" key or on the canonical path:
// generously, since opening a half-converted volume with its old parameters destroys it,
// while a wrong refusal costs a look at the state file named.
[[nodiscard]] bool entry_matches(const RegistryEntry &entry, const DeviceIdentity &identity);
[[nodiscard]] Result<std::optional<RegistryEntry>> find_entry(
    const std::filesystem::path &directory, const DeviceIdentity &identity);
// The same for a path (identify_device() is asked only when the registry has entries).
[[nodiscard]] Result<std::optional<RegistryEntry>> find_entry(
    const std::filesystem::path &directory, const std::string &device,
    const std::filesystem::path &sysfs = "/sys");

// The refusal open and attach give for a device with a run (Errc::refused):
// "DEVICE is being reencrypted (state STATE): finish with 'lbscrypt reencrypt --resume
// --state STATE ...' before opening it".
[[nodiscard]] Error reencrypt_in_progress(const std::string &device, const RegistryEntry &entry);

}  // namespace lbscrypt
