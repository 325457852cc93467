// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/gating.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "lbscrypt/cipher.hpp"
#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

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

// The largest end, in sectors, device-mapper takes for a target (LLONG_MAX >> SECTOR_SHIFT);
// no block device is larger, so a backing range that ends beyond it does not fit either.
constexpr std::uint64_t kMaxSectors = 0x7fffffffffffffffULL / kSectorBytes;

// The IV modes both targets know, spelled as their strcmp() wants them.
constexpr std::array<std::string_view, 11> kIvModes{"plain", "plain64", "plain64be", "essiv",
                                                    "benbi", "null",    "eboiv",     "elephant",
                                                    "lmk",   "tcw",     "random"};

bool has_upper_case(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

// Whether `a + b` passes `limit` (or wraps).
bool ends_beyond(std::uint64_t a, std::uint64_t b, std::uint64_t limit) {
  return a > limit || b > limit - a;
}

std::optional<std::string> range_refusal(const CryptTable &table) {
  if (table.length == 0) {
    return "length 0: device-mapper refuses a zero-length target";
  }
  if (ends_beyond(table.start, table.length, kMaxSectors)) {
    return fmt::format(
        "start {} + length {} ends beyond {} sectors, the largest device "
        "device-mapper makes",
        table.start, table.length, kMaxSectors);
  }
  if (ends_beyond(table.offset, table.length, kMaxSectors)) {
    return fmt::format(
        "offset {} + length {} ends beyond {} sectors: no backing device is that "
        "large (the kernel: too small for target)",
        table.offset, table.length, kMaxSectors);
  }
  return std::nullopt;
}

// The device word as dm_get_device() takes it: MAJOR:MINOR or a path. A relative path would
// be looked up in the loading process's directory: only an absolute one means one device.
std::optional<std::string> device_refusal(std::string_view device) {
  const auto colon = device.find(':');
  if (colon != std::string_view::npos && parse_decimal_u32(device.substr(0, colon)) &&
      parse_decimal_u32(device.substr(colon + 1))) {
    return std::nullopt;
  }
  if (!device.starts_with('/')) {
    return fmt::format(
        "device '{}' is neither MAJOR:MINOR nor an absolute path: the kernel's "
        "lookup fails (Device lookup failed)",
        printable(device));
  }
  return std::nullopt;
}

// The key sizes the kernel's cipher takes, in bytes per key: AES (16, 24 or 32; XTS twice
// that), any XTS an even number. Empty: not known here, the kernel decides.
std::optional<std::string> key_refusal(const CipherSpec &spec, std::uint32_t key_bytes) {
  if (key_bytes == 0 || spec.ivmode == "lmk" || spec.ivmode == "tcw" || spec.ivmode == "elephant") {
    return std::nullopt;  // no key ("-"), or the IV mode takes key bytes of its own
  }
  const std::uint32_t keys = spec.capi ? 1 : spec.keycount;
  if (key_bytes % keys != 0) {
    return fmt::format("a {}-byte key does not split into {} equal keys", key_bytes, keys);
  }
  const std::uint32_t each = key_bytes / keys;
  const bool xts = spec.capi ? spec.cipher.starts_with("xts(") : spec.chainmode == "xts";
  const bool aes =
      spec.capi ? spec.cipher.find("(aes)") != std::string::npos : spec.cipher == "aes";
  const std::uint32_t half = xts ? each / 2 : each;
  if (xts && each % 2 != 0) {
    return fmt::format(
        "a {}-byte key for XTS: XTS takes two keys of equal size, an even number "
        "of bytes (the kernel: Error setting key)",
        each);
  }
  if (aes && half != 16 && half != 24 && half != 32) {
    return fmt::format(
        "a {}-byte key for {}: AES takes 16, 24 or 32 bytes{} (the kernel: Error "
        "setting key)",
        each, spec.to_string(), xts ? ", twice that for XTS" : "");
  }
  return std::nullopt;
}

// What both crypt targets refuse in the cipher: names the crypto API does not know (its names
// are lower case), an unknown IV mode, essiv without its hash, a key the cipher cannot take.
std::optional<std::string> cipher_refusal(const CryptTable &table) {
  if (!table.cipher.starts_with("capi:") && table.cipher.find('-') == std::string::npos) {
    return std::nullopt;  // a bare cipher name: both targets read it as <cipher>-cbc-plain
  }
  const auto spec = parse_cipher_spec(table.cipher);
  if (!spec) {
    return spec.error().message;
  }
  if (has_upper_case(spec->cipher) || has_upper_case(spec->chainmode) ||
      has_upper_case(spec->ivopts)) {
    return fmt::format(
        "cipher '{}': the kernel's crypto API names are lower case, it has no "
        "such algorithm (Error allocating crypto tfm)",
        printable(table.cipher));
  }
  if (!spec->ivmode.empty() &&
      std::find(kIvModes.begin(), kIvModes.end(), spec->ivmode) == kIvModes.end()) {
    return fmt::format("cipher '{}': unknown IV mode '{}' (Invalid IV mode); the kernel knows {}",
                       printable(table.cipher), printable(spec->ivmode), fmt::join(kIvModes, ", "));
  }
  if (spec->ivmode == "essiv" && spec->ivopts.empty()) {
    return fmt::format("cipher '{}': essiv needs a hash, as in essiv:sha256",
                       printable(table.cipher));
  }
  return key_refusal(*spec, key_size_bytes(table.key));
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

Result<void> check_sector_size(std::uint64_t sector_size, const Capabilities &caps,
                               MappingType type, bool target_loaded) {
  if (!target_loaded && type == MappingType::plain && sector_size > kPortableMaxSectorSize &&
      sector_size <= kBlockLayerMaxSectorSize && is_power_of_two(sector_size)) {
    return make_error(Errc::refused,
                      fmt::format("no crypt target is loaded; sector size {} needs v{}: load "
                                  "dm-crypt-lbs",
                                  sector_size, to_string(kLargeSectorVersion)));
  }
  return check_sector_size(sector_size, caps, type);
}

Prediction predict(const CryptTable &table, const TargetVersion &version, std::uint32_t page_size) {
  for (const auto &why :
       {range_refusal(table), device_refusal(table.device), cipher_refusal(table)}) {
    if (why) {
      return refused(*why);
    }
  }
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
