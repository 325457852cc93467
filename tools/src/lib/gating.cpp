// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/gating.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

constexpr std::uint32_t kSectorBytes = 512;

bool supports_large_sectors(const TargetVersion &version) { return version >= kLargeSectorVersion; }

// The bound a kernel of this version applies, before any question of mapping type.
std::uint32_t kernel_bound(const TargetVersion &version, std::uint32_t page_size) {
  if (!supports_large_sectors(version)) {
    return kPortableMaxSectorSize;
  }
  return std::min(page_size, kBlockLayerMaxSectorSize);
}

// The value pre-1.30 dm-crypt ends up with: sscanf("%hu%c") takes digits only and keeps
// the low 16 bits of the number (the wrap-around of the 64-bit conversion does not change
// those bits). Returns nullopt where sscanf would not match.
struct LegacyParse {
  std::uint32_t value = 0;
  bool truncated = false;
};

std::optional<LegacyParse> legacy_parse(std::string_view arg) {
  if (arg.empty()) {
    return std::nullopt;
  }
  std::uint32_t low16 = 0;
  bool exceeds = false;
  std::uint64_t full = 0;
  for (const char c : arg) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    const auto digit = static_cast<std::uint32_t>(c - '0');
    low16 = (low16 * 10 + digit) & 0xffffU;
    if (!exceeds) {
      full = full * 10 + digit;
      exceeds = full > 0xffffU;
    }
  }
  return LegacyParse{low16, exceeds};
}

Prediction refused(std::string reason) { return {Outcome::refused, 0, std::move(reason)}; }

bool valid_size(std::uint64_t size, std::uint32_t bound) {
  return size >= kMinSectorSize && size <= bound && is_power_of_two(size);
}

}  // namespace

std::uint32_t max_sector_size(const Capabilities &caps, MappingType type) {
  if (type == MappingType::luks) {
    return kPortableMaxSectorSize;
  }
  return kernel_bound(caps.version, caps.page_size);
}

Result<void> check_sector_size(std::uint64_t sector_size, const Capabilities &caps,
                               MappingType type) {
  if (sector_size < kMinSectorSize || !is_power_of_two(sector_size)) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("sector size {} is not a power of two between 512 and 65536", sector_size));
  }
  const std::uint32_t bound = max_sector_size(caps, type);
  if (sector_size <= bound) {
    return Ok{};
  }
  if (type == MappingType::luks) {
    return make_error(Errc::luks_refused,
                      fmt::format("sector size {} is above 4096, the LUKS limit on every kernel: "
                                  "LUKS headers must open anywhere; use 4096 or a plain mapping",
                                  sector_size));
  }
  if (sector_size > kBlockLayerMaxSectorSize) {
    return make_error(Errc::refused,
                      fmt::format("sector size {} exceeds 65536, the largest logical block the "
                                  "block layer supports",
                                  sector_size));
  }
  if (!supports_large_sectors(caps.version)) {
    return make_error(
        Errc::refused,
        fmt::format("this kernel's crypt is v{}; sector_size {} needs v{}: load "
                    "dm-crypt-lbs",
                    to_string(caps.version), sector_size, to_string(kLargeSectorVersion)));
  }
  return make_error(Errc::refused,
                    fmt::format("sector size {} exceeds the page size {} of this kernel; use at "
                                "most {} here",
                                sector_size, caps.page_size, bound));
}

Prediction predict(const CryptTable &table, const TargetVersion &version, std::uint32_t page_size) {
  const std::uint32_t bound = kernel_bound(version, page_size);
  std::uint32_t value = kDefaultSectorSize;
  bool truncated = false;
  if (const auto &arg = table.options.sector_size_arg) {
    if (!supports_large_sectors(version)) {
      const auto parsed = legacy_parse(*arg);
      if (!parsed) {
        return refused(
            fmt::format("sector_size:{} does not match sscanf(\"%hu%c\"): only "
                        "digits are read, a sign or trailing characters fail",
                        *arg));
      }
      value = parsed->value;
      truncated = parsed->truncated;
    } else {
      const auto parsed = parse_decimal_u32(*arg);
      if (!parsed) {
        return refused(
            fmt::format("sector_size:{} is not an unsigned 32-bit decimal number", *arg));
      }
      value = *parsed;
    }
    if (!valid_size(value, bound)) {
      return refused(fmt::format("sector_size {}{} is not a power of two between 512 and {}", value,
                                 truncated ? " (after 16-bit truncation)" : "", bound));
    }
  }
  const std::uint64_t unit = value / kSectorBytes;
  if (table.length % unit != 0) {
    return refused(fmt::format("device length {} sectors is not a multiple of sector_size {}",
                               table.length, value));
  }
  // Every crypt target refuses an IV offset that does not start on an encryption sector.
  if (table.iv_offset % unit != 0) {
    return refused(fmt::format("iv_offset {} is not a multiple of sector_size {} ({} sectors)",
                               table.iv_offset, value, unit));
  }
  if (truncated) {
    return {Outcome::accepted_different, value,
            fmt::format("sector_size:{} is truncated to 16 bits and recorded as {}",
                        *table.options.sector_size_arg, value)};
  }
  return {Outcome::accepted, value, {}};
}

const char *to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::accepted:
      return "accepted";
    case Outcome::refused:
      return "refused";
    case Outcome::accepted_different:
      return "accepted_different";
  }
  return "unknown";
}

const char *to_string(MappingType type) { return type == MappingType::luks ? "luks" : "plain"; }

}  // namespace lbscrypt
