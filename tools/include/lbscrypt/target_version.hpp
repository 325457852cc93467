// SPDX-License-Identifier: GPL-2.0-only
// A device-mapper target version (major.minor.patch), as `dmsetup targets` prints it.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "lbscrypt/result.hpp"

namespace lbscrypt {

struct TargetVersion {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::uint32_t patch = 0;

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  auto operator<=>(const TargetVersion &) const = default;
};

// The first crypt target version that accepts sector sizes above 4096.
inline constexpr TargetVersion kLargeSectorVersion{1, 30, 0};

// Parses "1.30.0" (an optional leading 'v' is accepted, as `dmsetup targets` prints it).
[[nodiscard]] Result<TargetVersion> parse_target_version(std::string_view text);
[[nodiscard]] std::string to_string(const TargetVersion &version);

}  // namespace lbscrypt
