// SPDX-License-Identifier: GPL-2.0-only
// Strict decimal numbers: digits only, no sign, no spaces, no trailing characters, no overflow.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lbscrypt {

[[nodiscard]] std::optional<std::uint64_t> parse_decimal_u64(std::string_view text);
[[nodiscard]] std::optional<std::uint32_t> parse_decimal_u32(std::string_view text);
[[nodiscard]] constexpr bool is_power_of_two(std::uint64_t n) {
  return n != 0 && (n & (n - 1)) == 0;
}

}  // namespace lbscrypt
