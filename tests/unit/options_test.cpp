// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"

using lbscrypt::cli::add_number;
using lbscrypt::cli::NumberRefused;

namespace {

// Two number options as the commands declare them, parsed from `args`.
struct Parsed {
  std::uint32_t sector_size = 512;
  std::optional<std::uint64_t> size;
  std::string refusal;  // the message of a refused number, empty when none was
};

Parsed parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app{"options test"};
  add_number(app, "--sector-size", p.sector_size, "bytes");
  add_number(app, "--size,-b", p.size, "sectors");
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const NumberRefused &e) {
    p.refusal = e.what();
  }
  return p;
}

}  // namespace

TEST_CASE("options: a number option takes decimal digits within its field", "[cli][options]") {
  const auto p = parse({"--sector-size", "65536", "-b", "18446744073709551615"});
  CHECK(p.refusal.empty());
  CHECK(p.sector_size == 65536);
  CHECK(p.size == 18446744073709551615ULL);
  // not given: the field keeps its default, an optional stays empty
  const auto none = parse({});
  CHECK(none.sector_size == 512);
  CHECK_FALSE(none.size.has_value());
  // leading zeros are decimal (CLI11's own conversion would read 010 as octal 8)
  CHECK(parse({"--size", "010"}).size == 10);
  CHECK(parse({"--sector-size", "0004096"}).sector_size == 4096);
  CHECK(parse({"--size", "0"}).size == 0);
}

TEST_CASE("options: a sign, junk, another base or overflow is refused, naming the option",
          "[cli][options]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--sector-size", "4096abc"}, "--sector-size '4096abc'"},
      {{"--sector-size", "-4096"}, "--sector-size '-4096'"},
      {{"--sector-size", "+4096"}, "--sector-size '+4096'"},
      {{"--sector-size", "4294967296"}, "--sector-size '4294967296'"},
      {{"--sector-size", "0x1000"}, "--sector-size '0x1000'"},
      {{"--sector-size", ""}, "--sector-size ''"},
      {{"-b", "-1"}, "--size '-1'"},  // the short spelling is refused under the long name
      {{"--size", "18446744073709551616"}, "--size '18446744073709551616'"},
      {{"--size", "8 "}, "--size '8 '"},
  };
  for (const auto &[args, quoted] : cases) {
    CAPTURE(args);
    const auto p = parse(args);
    const std::string max = args.front() == "--sector-size" ? "4294967295" : "18446744073709551615";
    std::string want = quoted;
    want += " is not a number: give decimal digits only, 0 to ";
    want += max;
    CHECK(p.refusal == want);
    CHECK(p.sector_size == 512);
    CHECK_FALSE(p.size.has_value());
  }
}
