// SPDX-License-Identifier: GPL-2.0-only
// Numbers: strict decimal parsing (digits only, no sign, no spaces, no trailing characters, no
// overflow), powers of two, and the 512-byte sector device-mapper counts in.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lbscrypt {

// device-mapper's sector: table lengths, offset, skip and iv_offset count these
inline constexpr std::uint32_t kSectorBytes = 512;

[[nodiscard]] std::optional<std::uint64_t> parse_decimal_u64(std::string_view text);
[[nodiscard]] std::optional<std::uint32_t> parse_decimal_u32(std::string_view text);
[[nodiscard]] constexpr bool is_power_of_two(std::uint64_t n) {
  return n != 0 && (n & (n - 1)) == 0;
}

}  // namespace lbscrypt
