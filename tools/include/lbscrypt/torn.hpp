// SPDX-License-Identifier: GPL-2.0-only
// Whether a power failure can tear an encryption sector of a mapping: the target writes each
// sector atomically where the device's atomic writes take one whole and the mapping is
// aligned for them (kmod/atomic.c); elsewhere a sector larger than the device's physical
// block and its atomic unit can be left partly old, partly new (dm-crypt-lbs(4), "Torn
// writes"). The tool's side of those rules, from what sysfs tells (WriteGeometry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lbscrypt/device.hpp"
#include "lbscrypt/environment.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

// A mapping's place on its device, as the table gives it.
struct MappingPlace {
  std::string device;             // for the message: a path, or MAJOR:MINOR
  std::uint64_t sector_size = 0;  // the encryption sector, bytes
  std::uint64_t offset = 0;       // the start on the device, 512-byte sectors
  bool integrity = false;         // integrity metadata: the target sends no atomic writes
};

// The place of a table's mapping (its device as the table names it).
[[nodiscard]] MappingPlace place_of(const CryptTable &table);

// A sector that can tear, and the device's two sizes that say why.
struct TornSector {
  std::uint64_t sector_size = 0;
  std::uint64_t physical_block = 0;
  // The largest write the device makes atomically within its unit, boundary and segments;
  // 0 where it has no atomic writes.
  std::uint64_t atomic_unit = 0;
  // Why an atomic unit that takes a whole sector still leaves it unprotected (the mapping's
  // start, a smallest atomic write above the sector, a zoned device, integrity metadata);
  // empty where the unit is smaller than the sector.
  std::string but;
};

// nullopt where no sector can tear: the sector is no larger than the physical block (the
// common case), or the target writes every sector atomically (atomic_unit_min <= sector <=
// the unit; the mapping's start on the disk, partition start plus offset, a multiple of
// the sector; not zoned; no integrity metadata).
[[nodiscard]] std::optional<TornSector> torn_sector(const WriteGeometry &geometry,
                                                    const MappingPlace &place);

// The warning, one line without the program's name: "warning: a power failure can tear a
// 65536-byte sector on /dev/sdb: its physical block is 4096 bytes and it writes at most 0
// bytes atomically (...)".
[[nodiscard]] std::string torn_sector_warning(const TornSector &torn, const std::string &device);

// The warning for a mapping at `place`, from env.devices' write geometry of its device;
// nullopt where no sector can tear or nothing is known of the device (not a block device,
// unknown to sysfs, no devices to ask).
[[nodiscard]] std::optional<std::string> torn_sector_warning(const MappingPlace &place,
                                                             const Environment &env);

}  // namespace lbscrypt
