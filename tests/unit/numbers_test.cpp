// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "lbscrypt/numbers.hpp"

using lbscrypt::parse_decimal_u32;
using lbscrypt::parse_decimal_u64;

TEST_CASE("decimal numbers are digits only", "[numbers]") {
  CHECK(parse_decimal_u64("0") == 0U);
  CHECK(parse_decimal_u64("4096") == 4096U);
  CHECK(parse_decimal_u64("04096") == 4096U);
  CHECK(parse_decimal_u64("18446744073709551615") == 18446744073709551615ULL);
  for (const char *bad : {"", "-1", "+1", " 1", "1 ", "4096abc", "0x10", "1.0",
                          "18446744073709551616", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_decimal_u64(bad).has_value());
  }
}

TEST_CASE("32-bit numbers refuse what does not fit", "[numbers]") {
  CHECK(parse_decimal_u32("4294967295") == 4294967295U);
  CHECK_FALSE(parse_decimal_u32("4294967296").has_value());
  CHECK_FALSE(parse_decimal_u32("4294971392").has_value());  // 2^32 + 4096
}

TEST_CASE("powers of two", "[numbers]") {
  CHECK(lbscrypt::is_power_of_two(1));
  CHECK(lbscrypt::is_power_of_two(65536));
  CHECK_FALSE(lbscrypt::is_power_of_two(0));
  CHECK_FALSE(lbscrypt::is_power_of_two(3000));
  CHECK_FALSE(lbscrypt::is_power_of_two(61440));
}
