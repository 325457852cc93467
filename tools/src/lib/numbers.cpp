// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/numbers.hpp"

#include <limits>

namespace lbscrypt {

std::optional<std::uint64_t> parse_decimal_u64(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return std::nullopt;
    }
    value = value * 10 + digit;
  }
  return value;
}

std::optional<std::uint32_t> parse_decimal_u32(std::string_view text) {
  const auto value = parse_decimal_u64(text);
  if (!value || *value > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(*value);
}

}  // namespace lbscrypt
