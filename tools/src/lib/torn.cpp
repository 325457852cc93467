// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/torn.hpp"

#include "lbscrypt/numbers.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lbscrypt {

namespace {

// The largest atomic write the device takes for the target's pieces, as kmod/atomic.c
// computes it: the unit (no larger than atomic_write_max_bytes), within what the segments
// hold and the boundary. 0 without atomic writes (no smallest or largest unit).
std::uint64_t atomic_unit(const WriteGeometry &g) {
  if (g.atomic_unit_min == 0 || g.atomic_unit_max == 0) {
    return 0;
  }
  std::uint64_t unit = std::min(g.atomic_unit_max, g.atomic_max);
  if (g.segment_bytes != 0) {
    unit = std::min(unit, g.segment_bytes);
  }
  if (g.atomic_boundary != 0) {
    unit = std::min(unit, g.atomic_boundary);
  }
  return unit;
}

}  // namespace

MappingPlace place_of(const CryptTable &table) {
  MappingPlace place;
  place.device = table.device;
  const auto sector_size = table.sector_size();
  place.sector_size = sector_size ? *sector_size : kSectorBytes;
  place.offset = table.offset;
  place.integrity = table.options.integrity.has_value();
  return place;
}

std::optional<TornSector> torn_sector(const WriteGeometry &geometry, const MappingPlace &place) {
  const std::uint64_t sector = place.sector_size;
  if (sector <= geometry.physical_block || sector < kSectorBytes) {
    return std::nullopt;
  }
  TornSector torn;
  torn.sector_size = sector;
  torn.physical_block = geometry.physical_block;
  torn.atomic_unit = atomic_unit(geometry);
  if (torn.atomic_unit < sector) {
    return torn;
  }
  const std::uint64_t start = geometry.start + place.offset;  // on the whole disk
  if (geometry.zoned) {
    torn.but = "the target sends no atomic writes to a zoned device";
  } else if (place.integrity) {
    torn.but = "the target sends no atomic writes with integrity metadata";
  } else if (geometry.atomic_unit_min > sector) {
    torn.but = fmt::format("none smaller than {} bytes", geometry.atomic_unit_min);
  } else if (start % (sector / kSectorBytes) != 0) {
    torn.but = fmt::format("the mapping starts at byte {} of the disk, not a multiple of {}",
                           start * kSectorBytes, sector);
  } else {
    return std::nullopt;  // every sector goes down as an atomic write
  }
  return torn;
}

std::string torn_sector_warning(const TornSector &torn, const std::string &device) {
  // a device without atomic writes says so; one with them, the largest it takes
  const std::string atomic =
      torn.atomic_unit == 0
          ? std::string("it has no atomic writes")
          : fmt::format("it writes at most {} bytes atomically", torn.atomic_unit);
  return fmt::format(
      "warning: a power failure can tear a {}-byte sector on {}: its physical block is {} bytes "
      "and {}{}{} (dm-crypt-lbs(4), \"Torn writes\")",
      torn.sector_size, device, torn.physical_block, atomic, torn.but.empty() ? "" : ", but ",
      torn.but);
}

std::optional<std::string> torn_sector_warning(const MappingPlace &place, const Environment &env) {
  if (env.devices == nullptr) {
    return std::nullopt;
  }
  const auto geometry = env.devices->write_geometry(place.device);
  if (!geometry) {
    return std::nullopt;
  }
  const auto torn = torn_sector(*geometry, place);
  if (!torn) {
    return std::nullopt;
  }
  return torn_sector_warning(*torn, place.device);
}

}  // namespace lbscrypt
