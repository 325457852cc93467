// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "lbscrypt/gating.hpp"

using lbscrypt::Capabilities;
using lbscrypt::CryptTable;
using lbscrypt::Errc;
using lbscrypt::MappingType;
using lbscrypt::Outcome;
using lbscrypt::TargetVersion;

namespace {

constexpr TargetVersion kStock{1, 28, 0};
constexpr TargetVersion kStock61{1, 24, 0};
constexpr TargetVersion kLbs{1, 30, 0};

CryptTable table_with(const char *sector_size, std::uint64_t length = 131072) {
  CryptTable t;
  t.length = length;
  t.cipher = "aes-xts-plain64";
  t.device = "/dev/ram0";
  if (sector_size != nullptr) {
    t.options.sector_size_arg = sector_size;
  }
  return t;
}

}  // namespace

TEST_CASE("the largest sector size: version x page size x type", "[gating]") {
  struct Row {
    TargetVersion version{};
    std::uint32_t page = 0;
    MappingType type = MappingType::plain;
    std::uint32_t expected = 0;
  };
  const Row rows[] = {
      {kStock, 4096, MappingType::plain, 4096},
      {kStock, 16384, MappingType::plain, 4096},
      {kStock, 65536, MappingType::plain, 4096},
      {kStock61, 65536, MappingType::plain, 4096},
      {{1, 29, 99}, 65536, MappingType::plain, 4096},
      {kLbs, 4096, MappingType::plain, 4096},
      {kLbs, 16384, MappingType::plain, 16384},
      {kLbs, 65536, MappingType::plain, 65536},
      {{1, 31, 0}, 65536, MappingType::plain, 65536},
      {kLbs, 262144, MappingType::plain, 65536},  // the block layer's cap
      {kLbs, 65536, MappingType::luks, 4096},
      {kStock, 65536, MappingType::luks, 4096},
      {kLbs, 16384, MappingType::luks, 4096},
  };
  for (const auto &row : rows) {
    INFO(lbscrypt::to_string(row.version)
         << " page " << row.page << " " << lbscrypt::to_string(row.type));
    CHECK(lbscrypt::max_sector_size(Capabilities{row.version, row.page}, row.type) == row.expected);
  }
}

TEST_CASE("check_sector_size with no target loaded: above 4096 needs 1.30.0", "[gating]") {
  // caps.version is what a not-yet-loaded target leaves: nothing. Even a 1.30.0 there is not
  // trusted while target_loaded is false.
  const Capabilities caps{kLbs, 65536};
  const auto refused = lbscrypt::check_sector_size(8192, caps, MappingType::plain, false);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::refused);
  CHECK(refused.error().message ==
        "no crypt target is loaded; sector size 8192 needs v1.30.0: load dm-crypt-lbs");
  CHECK(lbscrypt::check_sector_size(4096, caps, MappingType::plain, false).ok());
  CHECK(lbscrypt::check_sector_size(8192, caps, MappingType::plain, true).ok());
  // LUKS, invalid sizes and sizes above 65536 keep their own reasons
  const auto luks = lbscrypt::check_sector_size(8192, caps, MappingType::luks, false);
  REQUIRE_FALSE(luks.ok());
  CHECK(luks.error().code == Errc::luks_refused);
  const auto odd = lbscrypt::check_sector_size(6144, caps, MappingType::plain, false);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == Errc::invalid_argument);
  const auto huge = lbscrypt::check_sector_size(131072, caps, MappingType::plain, false);
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.error().message, Catch::Contains("exceeds 65536"));
}

TEST_CASE("check_sector_size: a decision table with reasons", "[gating]") {
  struct Row {
    std::uint64_t size = 0;
    TargetVersion version{};
    std::uint32_t page = 0;
    MappingType type = MappingType::plain;
    bool ok = false;
    Errc code = Errc::refused;
    const char *reason = "";
  };
  const Row rows[] = {
      {512, kStock, 4096, MappingType::plain, true, Errc::refused, ""},
      {4096, kStock, 65536, MappingType::plain, true, Errc::refused, ""},
      {8192, kStock, 65536, MappingType::plain, false, Errc::refused,
       "this kernel's crypt is v1.28.0; sector_size 8192 needs v1.30.0: load dm-crypt-lbs"},
      {65536, kStock, 65536, MappingType::plain, false, Errc::refused,
       "this kernel's crypt is v1.28.0; sector_size 65536 needs v1.30.0: load dm-crypt-lbs"},
      {65536, kLbs, 65536, MappingType::plain, true, Errc::refused, ""},
      {16384, kLbs, 16384, MappingType::plain, true, Errc::refused, ""},
      {32768, kLbs, 16384, MappingType::plain, false, Errc::refused, "exceeds the page size 16384"},
      {8192, kLbs, 4096, MappingType::plain, false, Errc::refused, "exceeds the page size 4096"},
      {131072, kLbs, 65536, MappingType::plain, false, Errc::refused,
       "exceeds 65536, the largest logical block"},
      {8192, kLbs, 65536, MappingType::luks, false, Errc::luks_refused, "LUKS limit"},
      {4096, kLbs, 65536, MappingType::luks, true, Errc::refused, ""},
      {3000, kLbs, 65536, MappingType::plain, false, Errc::invalid_argument, "power of two"},
      {0, kLbs, 65536, MappingType::plain, false, Errc::invalid_argument, "power of two"},
      {256, kLbs, 65536, MappingType::plain, false, Errc::invalid_argument, "power of two"},
      {61440, kLbs, 65536, MappingType::plain, false, Errc::invalid_argument, "power of two"},
  };
  for (const auto &row : rows) {
    INFO(row.size << " on " << lbscrypt::to_string(row.version) << " page " << row.page);
    const auto r =
        lbscrypt::check_sector_size(row.size, Capabilities{row.version, row.page}, row.type);
    REQUIRE(r.ok() == row.ok);
    if (!row.ok) {
      CHECK(r.error().code == row.code);
      CHECK_THAT(r.error().message, Catch::Contains(row.reason));
    }
  }
}

// `dmsetup create ... sector_size:<N>` as measured by `make matrix` on arm64-64k
// (build/matrix/results.json; the rules in tests/expected/matrix.tsv): the in-tree
// target v1.28.0 of 6.12 (its 16-bit parse records 69632 as 4096) and dm-crypt-lbs
// v1.30.0 with 64K pages.
TEST_CASE("predict matches the measured stock and lbscrypt behaviour", "[gating][predict]") {
  struct Row {
    const char *arg;
    Outcome stock;
    std::uint32_t stock_recorded;
    Outcome lbs64k;
    std::uint32_t lbs_recorded;
  };
  const Row rows[] = {
      {"512", Outcome::accepted, 512, Outcome::accepted, 512},
      {"1024", Outcome::accepted, 1024, Outcome::accepted, 1024},
      {"2048", Outcome::accepted, 2048, Outcome::accepted, 2048},
      {"4096", Outcome::accepted, 4096, Outcome::accepted, 4096},
      {"8192", Outcome::refused, 0, Outcome::accepted, 8192},
      {"16384", Outcome::refused, 0, Outcome::accepted, 16384},
      {"32768", Outcome::refused, 0, Outcome::accepted, 32768},
      {"65536", Outcome::refused, 0, Outcome::accepted, 65536},
      {"131072", Outcome::refused, 0, Outcome::refused, 0},
      {"69632", Outcome::accepted_different, 4096, Outcome::refused, 0},
      {"3000", Outcome::refused, 0, Outcome::refused, 0},
      {"0", Outcome::refused, 0, Outcome::refused, 0},
      {"61440", Outcome::refused, 0, Outcome::refused, 0},
      {"-4096", Outcome::refused, 0, Outcome::refused, 0},
      {"4096abc", Outcome::refused, 0, Outcome::refused, 0},
      {"+4096", Outcome::refused, 0, Outcome::refused, 0},
      // Beyond the measured table: the 16-bit wrap of 2^32 + 4096, and an empty value.
      {"4294971392", Outcome::accepted_different, 4096, Outcome::refused, 0},
      {"", Outcome::refused, 0, Outcome::refused, 0},
  };
  for (const auto &row : rows) {
    INFO("sector_size:" << row.arg);
    const CryptTable t = table_with(row.arg);
    for (const auto stock_version : {kStock, kStock61}) {
      const auto stock = lbscrypt::predict(t, stock_version, 65536);
      CHECK(stock.outcome == row.stock);
      CHECK(stock.recorded_sector_size == row.stock_recorded);
      // The stock module behaves the same on every page size.
      CHECK(lbscrypt::predict(t, stock_version, 4096).outcome == row.stock);
      CHECK(lbscrypt::predict(t, stock_version, 16384).outcome == row.stock);
    }
    const auto lbs = lbscrypt::predict(t, kLbs, 65536);
    CHECK(lbs.outcome == row.lbs64k);
    CHECK(lbs.recorded_sector_size == row.lbs_recorded);
    if (lbs.outcome == Outcome::refused) {
      CHECK_FALSE(lbs.reason.empty());
    }
  }
}

TEST_CASE("predict: lbscrypt's bound follows the page size", "[gating][predict]") {
  CHECK(lbscrypt::predict(table_with("16384"), kLbs, 16384).outcome == Outcome::accepted);
  CHECK(lbscrypt::predict(table_with("32768"), kLbs, 16384).outcome == Outcome::refused);
  CHECK(lbscrypt::predict(table_with("4096"), kLbs, 4096).outcome == Outcome::accepted);
  CHECK(lbscrypt::predict(table_with("8192"), kLbs, 4096).outcome == Outcome::refused);
}

TEST_CASE("predict: the length must be a multiple of the sector size", "[gating][predict]") {
  CHECK(lbscrypt::predict(table_with("65536", 128), kLbs, 65536).outcome == Outcome::accepted);
  const auto odd = lbscrypt::predict(table_with("65536", 136), kLbs, 65536);
  CHECK(odd.outcome == Outcome::refused);
  CHECK_THAT(odd.reason, Catch::Contains("not a multiple"));
  // The truncated value decides on a stock kernel: 69632 -> 4096 needs a multiple of 8.
  CHECK(lbscrypt::predict(table_with("69632", 8), kStock, 65536).outcome ==
        Outcome::accepted_different);
  CHECK(lbscrypt::predict(table_with("69632", 12), kStock, 65536).outcome == Outcome::refused);
  // No option: 512, any length.
  CHECK(lbscrypt::predict(table_with(nullptr, 7), kStock, 4096).outcome == Outcome::accepted);
}

TEST_CASE("predict names the truncation it foresees", "[gating][predict]") {
  const auto p = lbscrypt::predict(table_with("69632"), kStock, 65536);
  CHECK_THAT(p.reason, Catch::Contains("69632") && Catch::Contains("4096"));
}

TEST_CASE("predict: what every crypt target refuses before the sector size", "[gating][predict]") {
  struct Row {
    const char *what;
    void (*change)(CryptTable &);
    const char *reason;  // the start of predict()'s reason
  };
  const Row rows[] = {
      {"offset + length past 2^64", [](CryptTable &t) { t.offset = 18446744073709551615ULL; },
       "offset 18446744073709551615 + length 131072 ends beyond"},
      {"offset + length past the largest device",
       [](CryptTable &t) { t.offset = 18014398509481984ULL - 8; },
       "offset 18014398509481976 + length 131072 ends beyond 18014398509481983 sectors"},
      {"start + length past the largest device",
       [](CryptTable &t) { t.start = 18014398509481983ULL; },
       "start 18014398509481983 + length 131072 ends beyond"},
      {"length 0", [](CryptTable &t) { t.length = 0; }, "length 0"},
      {"a 1-byte XTS key", [](CryptTable &t) { t.key = lbscrypt::SecretBuffer("k", 1); },
       "a 1-byte key for XTS"},
      {"a 20-byte AES-XTS key", [](CryptTable &t) { t.key = lbscrypt::SecretBuffer(20); },
       "a 20-byte key for aes-xts-plain64: AES takes 16, 24 or 32 bytes"},
      {"a 24-byte AES-CBC key split in two",
       [](CryptTable &t) {
         t.cipher = "aes:2-cbc-plain";
         t.key = lbscrypt::SecretBuffer(24);
       },
       "a 12-byte key for aes:2-cbc-plain"},
      {"an unknown IV mode", [](CryptTable &t) { t.cipher = "aes-xts-foo"; },
       "cipher 'aes-xts-foo': unknown IV mode 'foo'"},
      {"an upper-case IV mode", [](CryptTable &t) { t.cipher = "aes-xts-PLAIN64"; },
       "cipher 'aes-xts-PLAIN64': unknown IV mode 'PLAIN64'"},
      {"upper-case names", [](CryptTable &t) { t.cipher = "AES-XTS-plain64"; },
       "cipher 'AES-XTS-plain64': the kernel's crypto API names are lower case"},
      {"an upper-case essiv hash", [](CryptTable &t) { t.cipher = "aes-cbc-essiv:SHA256"; },
       "cipher 'aes-cbc-essiv:SHA256': the kernel's crypto API names are lower case"},
      {"essiv without its hash", [](CryptTable &t) { t.cipher = "aes-cbc-essiv"; },
       "cipher 'aes-cbc-essiv': essiv needs a hash"},
      {"a device word -v", [](CryptTable &t) { t.device = "-v"; },
       "device '-v' is neither MAJOR:MINOR nor an absolute path"},
      {"a relative device path", [](CryptTable &t) { t.device = "dev/ram0"; },
       "device 'dev/ram0' is neither"},
  };
  for (const auto &row : rows) {
    INFO(row.what);
    CryptTable t = table_with("4096");
    t.key = lbscrypt::SecretBuffer(64);
    row.change(t);
    for (const auto version : {kStock61, kStock, kLbs}) {
      const auto p = lbscrypt::predict(t, version, 65536);
      CHECK(p.outcome == Outcome::refused);
      CHECK_THAT(p.reason, Catch::StartsWith(row.reason));
    }
  }
  // What loads: each key size AES-XTS takes, MAJOR:MINOR, no key, a bare cipher name, a
  // capi: name, and a range that ends exactly at the largest device.
  CryptTable t = table_with("4096");
  for (const std::size_t bytes : {std::size_t{32}, std::size_t{48}, std::size_t{64}}) {
    t.key = lbscrypt::SecretBuffer(bytes);
    CHECK(lbscrypt::predict(t, kLbs, 65536).outcome == Outcome::accepted);
  }
  t.device = "253:0";
  CHECK(lbscrypt::predict(t, kStock, 65536).outcome == Outcome::accepted);
  t.key = lbscrypt::EmptyKey{};
  CHECK(lbscrypt::predict(t, kStock, 65536).outcome == Outcome::accepted);
  t.cipher = "aes";
  t.key = lbscrypt::SecretBuffer(16);
  CHECK(lbscrypt::predict(t, kStock, 65536).outcome == Outcome::accepted);
  t.cipher = "capi:xts(aes)-plain64";
  t.key = lbscrypt::SecretBuffer(64);
  CHECK(lbscrypt::predict(t, kLbs, 65536).outcome == Outcome::accepted);
  t.cipher = "capi:xts(aes)-plain64";
  t.key = lbscrypt::SecretBuffer(33);
  CHECK(lbscrypt::predict(t, kLbs, 65536).outcome == Outcome::refused);
  t.key = lbscrypt::SecretBuffer(64);
  t.offset = 18014398509481983ULL - t.length;
  CHECK(lbscrypt::predict(t, kLbs, 65536).outcome == Outcome::accepted);
}
