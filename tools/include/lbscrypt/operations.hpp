// SPDX-License-Identifier: GPL-2.0-only
// The tool's operations, on the Kernel and BlockDevices interfaces: build a table (gated),
// check what this kernel allows, open / close / report a plain mapping.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "lbscrypt/device.hpp"
#include "lbscrypt/environment.hpp"
#include "lbscrypt/gating.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/keys.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

struct KnownCapabilities {
  Capabilities caps;
  bool target_loaded = true;     // false: no crypt target registered yet (version unknown)
  bool target_reachable = true;  // false: device-mapper could not be asked (version unknown)
};

[[nodiscard]] Result<KnownCapabilities> capabilities(const Environment &env);

// Sizes and offsets in 512-byte sectors, as cryptsetup takes them.
struct MappingRequest {
  std::string device;
  std::string cipher = kDefaultCipher;
  std::uint64_t offset = 0;           // --offset: start on the device
  std::uint64_t skip = 0;             // --skip: iv_offset
  std::optional<std::uint64_t> size;  // --size; absent or 0: the rest of the device
  std::uint32_t sector_size = 512;    // --sector-size, bytes
  CryptFlags flags;                   // allow_discards, ... (kFlagWords)
  MappingType type = MappingType::plain;
  std::uint32_t key_bytes = 0;  // the key's size, checked against the cipher (0: unchecked)
};

// Validates the request against the kernel (gate), the device (size, LUKS header) and returns
// the table this kernel loads exactly as written, without its key (EmptyKey). Nothing is
// touched and no key is asked for: a refusal comes before any prompt. Up to 4096 no
// device-mapper is needed (every crypt target takes those sizes); above, its version is.
[[nodiscard]] Result<CryptTable> prepare_table(const MappingRequest &given, const Environment &env);

// A mapping named as cryptsetup takes it: NAME or /dev/mapper/NAME.
[[nodiscard]] std::string mapping_name(std::string_view argument);

// The DM UUID cryptsetup gives a plain mapping: CRYPT-PLAIN-<name>, cut to the 128 bytes
// device-mapper keeps (DM_UUID_LEN less its NUL) where a long name makes it longer, as
// cryptsetup cuts it.
[[nodiscard]] std::string plain_uuid(std::string_view name);

// The device type cryptsetup reports for a DM UUID ("PLAIN", "LUKS2", ...; "n/a" for none).
[[nodiscard]] std::string type_from_uuid(std::string_view uuid);

struct CheckReport {
  KnownCapabilities known;
  std::uint32_t max_plain = 0;
  std::uint32_t max_luks = 0;
  std::optional<std::uint64_t> sector_size;
  MappingType type = MappingType::plain;
  std::optional<Error> refusal;  // set when sector_size would not load
  // With a device: the one-line warning (torn.hpp) when a power failure can tear a sector of
  // a mapping at its start, at sector_size, or without one at the largest size of `type`.
  // None when that size is refused.
  std::optional<std::string> torn_warning;
};

// What this kernel allows, and whether `sector_size` would load. `device` (check --device)
// must be a block device (Errc::device otherwise, naming what it is).
[[nodiscard]] Result<CheckReport> check(const Environment &env,
                                        std::optional<std::uint64_t> sector_size, MappingType type,
                                        const std::optional<std::string> &device = std::nullopt);

struct OpenResult {
  DeviceInfo device;
  CryptTable table;
  std::optional<std::string> loop_file;     // the regular file behind the loop device attached
  std::optional<std::string> torn_warning;  // when a power failure can tear a sector (torn.hpp)
};

// Errc::busy, naming the holder, when `device` is held by a device-mapper mapping, another
// holder, a mounted filesystem or an exclusive opener, unless `shared` (cryptsetup's
// --shared for plain mappings). A regular file (open attaches a loop device) is never held.
[[nodiscard]] Result<void> check_device_free(const std::string &device, bool shared,
                                             const Environment &env);

// Creates the mapping with DM UUID CRYPT-PLAIN-<name>. A regular file gets a loop device first
// (autoclear: it goes away with the mapping). Errc::exists when the name is taken; Errc::busy
// when the device is in use (check_device_free) and not `shared`.
[[nodiscard]] Result<OpenResult> open_mapping(const std::string &name, CryptTable table,
                                              bool read_only, const Environment &env,
                                              bool shared = false);

// The mapping `name` when it is already active as `table` and `read_only` would make it: the
// same target, device, cipher, key size (the key itself is not compared: it is not asked for),
// offsets, length, sector size and flags. nullopt when there is no such mapping; Errc::exists
// naming the first difference when it is active otherwise.
[[nodiscard]] Result<std::optional<DeviceInfo>> active_as(const std::string &name,
                                                          const CryptTable &table,
                                                          std::uint32_t key_bytes, bool read_only,
                                                          const Environment &env);

// Errc::not_found when there is no such mapping, Errc::busy when it is in use. A mapping in
// use is tried again `busy_retries` times, `retry_delay` apart: udev's probes and blkid hold
// a new mapping for a moment, as cryptsetup knows.
struct CloseRetry {
  unsigned busy_retries = 5;
  std::chrono::milliseconds retry_delay{200};
};
[[nodiscard]] Result<void> close_mapping(const std::string &name, const Environment &env,
                                         const CloseRetry &retry = {});

struct StatusReport {
  DeviceInfo device;
  std::string type;          // from the DM UUID: PLAIN, LUKS1, LUKS2, ... or n/a
  bool is_crypt = true;      // false: not a single target of env.target_type
  CryptTable table;          // the key replaced by zeros
  std::string key_location;  // "keyring" for a keyring reference, else "dm-crypt"
  std::string device_path;
  std::optional<std::string> loop_file;
  std::uint32_t sector_size = 512;
  std::uint32_t key_bits = 0;
  std::optional<TargetVersion> target_version;
  std::optional<std::string> torn_warning;  // when a power failure can tear a sector (torn.hpp)
};

// Errc::not_found when there is no such mapping.
[[nodiscard]] Result<StatusReport> mapping_status(const std::string &name, const Environment &env);

}  // namespace lbscrypt
