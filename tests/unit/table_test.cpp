// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <random>

#include "lbscrypt/table.hpp"
#include "test_data.hpp"

using lbscrypt::CryptTable;
using lbscrypt::format_table_line;
using lbscrypt::KeyDisplay;
using lbscrypt::parse_table_line;

TEST_CASE("every kernel table line round-trips unchanged", "[table][golden]") {
  const auto lines = lbscrypt::test::data_lines("tables-kernel.txt");
  REQUIRE(lines.size() >= 25);
  for (const auto &line : lines) {
    INFO(line);
    const auto table = parse_table_line(line);
    REQUIRE(table.ok());
    CHECK(format_table_line(*table).view() == line);
  }
}

TEST_CASE("fields are typed", "[table]") {
  const auto t = parse_table_line(
      "0 131072 crypt aes-xts-plain64 000102 7 1:0 16 3 allow_discards sector_size:65536 "
      "iv_large_sectors");
  REQUIRE(t.ok());
  CHECK(t->length == 131072U);
  CHECK(t->cipher == "aes-xts-plain64");
  CHECK(lbscrypt::key_size_bytes(t->key) == 3U);
  CHECK(t->iv_offset == 7U);
  CHECK(t->device == "1:0");
  CHECK(t->offset == 16U);
  CHECK(t->options.allow_discards);
  CHECK(t->options.iv_large_sectors);
  CHECK_FALSE(t->options.same_cpu_crypt);
  CHECK(t->options.count() == 3U);
  REQUIRE(t->sector_size().ok());
  CHECK(*t->sector_size() == 65536U);

  const auto ring = parse_table_line("0 8 crypt aes-xts-plain64 :64:logon:cs:a:b 0 7:0 0");
  REQUIRE(ring.ok());
  const auto &key = std::get<lbscrypt::KeyringKey>(ring->key);
  CHECK(key.key_size == 64U);
  CHECK(key.type == "logon");
  CHECK(key.description == "cs:a:b");
}

TEST_CASE("the default sector size is 512 and is not printed", "[table]") {
  const auto t = parse_table_line("0 8 crypt aes-xts-plain64 00 0 7:0 0");
  REQUIRE(t.ok());
  CHECK(*t->sector_size() == 512U);
  CHECK(format_table_line(*t).view() == "0 8 crypt aes-xts-plain64 00 0 7:0 0");
}

TEST_CASE("options written in any order print in the kernel's order", "[table]") {
  const auto t = parse_table_line(
      "0 8 crypt aes-xts-plain64 00 0 7:0 0 3 iv_large_sectors sector_size:4096 allow_discards");
  REQUIRE(t.ok());
  CHECK(format_table_line(*t).view() ==
        "0 8 crypt aes-xts-plain64 00 0 7:0 0 3 allow_discards sector_size:4096 iv_large_sectors");
}

TEST_CASE("a sector_size as written is kept for predict, but is not a number", "[table]") {
  const auto t = parse_table_line("0 8 crypt aes-xts-plain64 00 0 7:0 0 1 sector_size:4096abc");
  REQUIRE(t.ok());
  CHECK(*t->options.sector_size_arg == "4096abc");
  REQUIRE_FALSE(t->sector_size().ok());
  CHECK(t->sector_size().error().message.find("4096abc") != std::string::npos);
}

TEST_CASE("hidden keys print as zeros of the same length", "[table]") {
  const auto t = parse_table_line("0 8 crypt aes-xts-plain64 a1b2c3 0 7:0 0");
  REQUIRE(t.ok());
  CHECK(format_table_line(*t, KeyDisplay::hide).view() ==
        "0 8 crypt aes-xts-plain64 000000 0 7:0 0");
  CHECK(format_table_line(*t, KeyDisplay::show, "crypt_lbs").view() ==
        "0 8 crypt_lbs aes-xts-plain64 a1b2c3 0 7:0 0");
}

TEST_CASE("upper-case key digits are accepted and printed as the kernel does", "[table]") {
  const auto t = parse_table_line("0 8 crypt aes-xts-plain64 A1B2 0 7:0 0");
  REQUIRE(t.ok());
  CHECK(format_table_line(*t).view() == "0 8 crypt aes-xts-plain64 a1b2 0 7:0 0");
}

TEST_CASE("malformed lines are refused with a message naming the fault", "[table][golden]") {
  const auto rows = lbscrypt::test::data_lines("tables-invalid.txt");
  REQUIRE(rows.size() >= 20);
  for (const auto &row : rows) {
    const auto tab = row.find('\t');
    REQUIRE(tab != std::string::npos);
    const std::string expected = row.substr(0, tab);
    const std::string line = row.substr(tab + 1);
    INFO(line);
    const auto t = parse_table_line(line);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == lbscrypt::Errc::invalid_argument);
    CHECK_THAT(t.error().message, Catch::Contains(expected));
    CHECK_THAT(t.error().message, Catch::StartsWith("invalid crypt table: "));
  }
}

namespace {

std::string mutate(std::string line, std::mt19937 &rng) {
  static const std::string alphabet = "0123456789abcdef:- x_+\t";
  std::uniform_int_distribution<int> op(0, 3);
  const auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n == 0 ? 0 : n - 1)(rng);
  };
  switch (op(rng)) {
    case 0:
      if (!line.empty()) {
        line.erase(pick(line.size()), 1);
      }
      break;
    case 1:
      line.insert(pick(line.size() + 1), 1, alphabet[pick(alphabet.size())]);
      break;
    case 2:
      if (!line.empty()) {
        line[pick(line.size())] = alphabet[pick(alphabet.size())];
      }
      break;
    default: {
      const auto a = pick(line.size());
      line += " " + line.substr(a, pick(16) + 1);
      break;
    }
  }
  return line;
}

}  // namespace

TEST_CASE("mutated kernel lines either fail cleanly or round-trip", "[table][fuzz]") {
  const auto lines = lbscrypt::test::data_lines("tables-kernel.txt");
  // A fixed seed on purpose: the run is a regression test, the same lines every time.
  std::mt19937 rng(20261130);  // NOLINT(cert-msc32-c,cert-msc51-cpp)
  int accepted = 0;
  int refused = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string line = lines[static_cast<std::size_t>(round) % lines.size()];
    for (int i = 0; i < 1 + round % 3; ++i) {
      line = mutate(line, rng);
    }
    const auto first = parse_table_line(line);
    if (!first) {
      ++refused;
      CHECK_FALSE(first.error().message.empty());
      continue;
    }
    ++accepted;
    const auto printed = format_table_line(*first);
    const auto second = parse_table_line(printed.view());
    INFO(line);
    REQUIRE(second.ok());
    CHECK(*second == *first);
    CHECK(format_table_line(*second).view() == printed.view());
  }
  CHECK(accepted > 100);
  CHECK(refused > 100);
}

TEST_CASE("a table word is one word to the kernel's splitter", "[table]") {
  using lbscrypt::check_table_word;
  CHECK(check_table_word("device", "/dev/ram0").ok());
  CHECK(check_table_word("device", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1").ok());
  CHECK(check_table_word("device", "/dev/\xc3\xa9t\xc3\xa9").ok());  // UTF-8 without 0xa0
  struct Row {
    const char *word;
    const char *says;
  };
  const Row rows[] = {
      {"/dev/a b", "'/dev/a b' contains a space"},
      {"/dev/a\nb", "'/dev/a\\nb' contains a line break"},
      {"/dev/a\tb", "'/dev/a\\tb' contains whitespace"},
      {"/dev/a\x01", "'/dev/a\\x01' contains a control character"},
      {"/dev/a\x7f", "contains a control character"},
      {"/dev/\xc3\xa0", "contains a space"},  // "à": 0xa0 is whitespace to the kernel
      {"/dev/a\\ b", "contains a backslash"},
  };
  for (const auto &row : rows) {
    INFO(row.word);
    const auto r = check_table_word("device", row.word);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == lbscrypt::Errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::StartsWith("device ") && Catch::Contains(row.says));
    CHECK(r.error().message.find('\n') == std::string::npos);  // one line
  }
  const auto empty = check_table_word("--cipher", "");
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.error().message, Catch::StartsWith("--cipher is empty"));
}

TEST_CASE("target names are what the kernel registers", "[table]") {
  using lbscrypt::check_target_name;
  for (const char *good : {"crypt", "crypt_lbs", "thin-pool", "snapshot-origin", "a"}) {
    INFO(good);
    CHECK(check_target_name(good).ok());
  }
  for (const char *bad : {"", "crypt lbs", "crypt\n", "crypt/x", "a-name-of-16-chr", "cr:ypt"}) {
    INFO(bad);
    const auto r = check_target_name(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith("--target '"));
  }
}
