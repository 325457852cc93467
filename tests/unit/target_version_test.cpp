// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "lbscrypt/target_version.hpp"

using lbscrypt::parse_target_version;
using lbscrypt::TargetVersion;

TEST_CASE("target versions parse as dmsetup targets prints them", "[version]") {
  const auto v = parse_target_version("v1.28.0");
  REQUIRE(v.ok());
  CHECK(*v == TargetVersion{1, 28, 0});
  CHECK(lbscrypt::to_string(*v) == "1.28.0");
  CHECK(*parse_target_version("1.30.0") == lbscrypt::kLargeSectorVersion);
}

TEST_CASE("target versions compare field by field", "[version]") {
  CHECK(TargetVersion{1, 29, 9} < TargetVersion{1, 30, 0});
  CHECK(TargetVersion{1, 30, 1} > TargetVersion{1, 30, 0});
  CHECK(TargetVersion{2, 0, 0} > TargetVersion{1, 99, 99});
  CHECK(TargetVersion{1, 9, 0} < TargetVersion{1, 10, 0});
}

TEST_CASE("malformed versions are refused with an example", "[version]") {
  for (const char *bad :
       {"", "1", "1.30", "1.30.0.1", "1..0", "a.b.c", "1.30.0-rc1", "v", "1.30.x", "-1.30.0"}) {
    INFO(bad);
    const auto v = parse_target_version(bad);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().message.find("for example 1.30.0") != std::string::npos);
  }
}
