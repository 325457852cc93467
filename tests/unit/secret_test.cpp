// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <cstring>

#include "lbscrypt/secret.hpp"

using lbscrypt::SecretBuffer;

TEST_CASE("secrets copy, move and compare by content", "[secret]") {
  const SecretBuffer a("abc", 3);
  SecretBuffer b = a;
  CHECK(b == a);
  SecretBuffer c = std::move(b);
  CHECK(c == a);
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  c.append("def");
  CHECK(c.view() == "abcdef");
  c.truncate(2);
  CHECK(c.view() == "ab");
}

TEST_CASE("secrets grow across pages without losing content", "[secret]") {
  SecretBuffer s;
  std::string expected;
  for (int i = 0; i < 5000; ++i) {
    s.append("0123456789abcdef");
    expected += "0123456789abcdef";
  }
  CHECK(s.view() == expected);
}

TEST_CASE("truncate wipes the dropped tail", "[secret]") {
  SecretBuffer s("secret!!", 8);
  const std::uint8_t *base = s.data();
  s.truncate(3);
  // The bytes past the new end are still ours (same allocation) and must be zero now.
  CHECK(std::memcmp(base + 3, "\0\0\0\0\0", 5) == 0);
}

TEST_CASE("hex as dm-crypt prints keys", "[secret]") {
  const std::uint8_t raw[] = {0x00, 0x7f, 0x80, 0xff, 0xa5};
  const SecretBuffer key(raw, sizeof raw);
  CHECK(lbscrypt::to_hex(key).view() == "007f80ffa5");
  SecretBuffer back;
  REQUIRE(lbscrypt::from_hex("007F80FFa5", back));
  CHECK(back == key);
  CHECK_FALSE(lbscrypt::from_hex("abc", back));
  CHECK_FALSE(lbscrypt::from_hex("zz", back));
}
