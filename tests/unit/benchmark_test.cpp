// SPDX-License-Identifier: GPL-2.0-only
// lbscrypt benchmark against a fake crypto API: a fake clock that charges every request a fixed
// latency plus its bytes at a fixed rate, as an offload engine does.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"
#include "fakes.hpp"
#include "lbscrypt/benchmark.hpp"

using lbscrypt::BenchmarkRequest;
using lbscrypt::CryptoApi;
using lbscrypt::Direction;
using lbscrypt::Environment;
using lbscrypt::Errc;
using lbscrypt::Error;
using lbscrypt::Result;
using lbscrypt::Skcipher;
using lbscrypt::TargetVersion;
using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

struct Request {
  Direction direction;
  std::vector<std::uint8_t> iv;
  std::size_t size;
};

struct Engine {
  double clock = 0;
  double latency = 1e-3;  // seconds per request
  double rate = 100e6;    // bytes per second
  std::string algorithm;  // what open() was asked for
  std::size_t key_bytes = 0;
  std::optional<Error> open_error;
  std::vector<Request> requests;
};

class FakeTfm final : public Skcipher {
 public:
  explicit FakeTfm(Engine &engine) : engine_(engine) {}
  Result<void> crypt(Direction direction, std::span<const std::uint8_t> iv,
                     std::span<std::uint8_t> data) override {
    engine_.requests.push_back({direction, {iv.begin(), iv.end()}, data.size()});
    engine_.clock += engine_.latency + static_cast<double>(data.size()) / engine_.rate;
    return lbscrypt::Ok{};
  }

 private:
  Engine &engine_;
};

class FakeCrypto final : public CryptoApi {
 public:
  explicit FakeCrypto(Engine &engine) : engine_(engine) {}
  Result<std::unique_ptr<Skcipher>> open(const std::string &algorithm,
                                         std::span<const std::uint8_t> key) override {
    engine_.algorithm = algorithm;
    engine_.key_bytes = key.size();
    if (engine_.open_error) {
      return *engine_.open_error;
    }
    return std::unique_ptr<Skcipher>(std::make_unique<FakeTfm>(engine_));
  }
  double now() override { return engine_.clock; }

 private:
  Engine &engine_;
};

struct Fixture {
  FakeKernel kernel;
  FakeBlockDevices devices;
  Environment env;
  Engine engine;
  FakeCrypto crypto{engine};
  BenchmarkRequest request;

  Fixture() {
    env.kernel = &kernel;
    env.devices = &devices;
    request.seconds = 0.05;
  }
  lbscrypt::BenchmarkReport run() {
    auto report = lbscrypt::run_benchmark(request, env, crypto);
    REQUIRE(report.ok());
    return std::move(report).value();
  }
};

std::vector<std::uint32_t> units_of(const lbscrypt::BenchmarkReport &report) {
  std::vector<std::uint32_t> units;
  for (const auto &r : report.results) {
    units.push_back(r.unit);
  }
  return units;
}

}  // namespace

TEST_CASE("benchmark: unit sizes run from 512 to the page size", "[benchmark]") {
  using V = std::vector<std::uint32_t>;
  CHECK(lbscrypt::unit_sizes(4096) == V{512, 1024, 2048, 4096});
  CHECK(lbscrypt::unit_sizes(16384) == V{512, 1024, 2048, 4096, 8192, 16384});
  CHECK(lbscrypt::unit_sizes(65536) == V{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536});
}

TEST_CASE("benchmark: cipher specs map to the crypto API names dm-crypt uses", "[benchmark]") {
  const auto name = [](const char *spec, const std::optional<std::string> &driver = std::nullopt) {
    const auto parsed = lbscrypt::parse_cipher_spec(spec);
    REQUIRE(parsed.ok());
    const auto k = lbscrypt::kernel_cipher(*parsed, driver);
    REQUIRE(k.ok());
    return k->algorithm;
  };
  CHECK(name("aes-xts-plain64") == "xts(aes)");
  CHECK(name("aes-cbc-essiv:sha256") == "essiv(cbc(aes),sha256)");
  CHECK(name("serpent-cbc-plain") == "cbc(serpent)");
  CHECK(name("aes-ecb") == "ecb(aes)");
  CHECK(name("capi:xts(aes)-plain64") == "xts(aes)");
  CHECK(name("capi:lbs-engine-xts-aes-plain64") == "lbs-engine-xts-aes");
  CHECK(name("aes-xts-plain64", "lbs-engine-xts-aes") == "lbs-engine-xts-aes");
  CHECK(name("aes-cbc-essiv:sha256", "cbc-aes-ce") == "essiv(cbc-aes-ce,sha256)");

  for (const char *spec : {"aes-cbc-lmk", "aes-xts-tcw", "aes-xts-random", "aes-cbc-eboiv",
                           "aes:64-cbc-lmk", "aes:2-xts-plain64", "aes-cbc-essiv"}) {
    CAPTURE(spec);
    const auto parsed = lbscrypt::parse_cipher_spec(spec);
    REQUIRE(parsed.ok());
    const auto k = lbscrypt::kernel_cipher(*parsed, std::nullopt);
    REQUIRE_FALSE(k.ok());
    CHECK(k.error().code == Errc::invalid_argument);
    CHECK_THAT(k.error().message, Catch::Contains("cannot be benchmarked through AF_ALG"));
    CHECK(k.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("benchmark: IVs are dm-crypt's for the unit's first 512-byte sector", "[benchmark]") {
  const auto iv = [](const char *spec, std::uint64_t sector) {
    const auto k = lbscrypt::kernel_cipher(*lbscrypt::parse_cipher_spec(spec), std::nullopt);
    REQUIRE(k.ok());
    return lbscrypt::unit_iv(*k, sector);
  };
  using B = std::vector<std::uint8_t>;
  CHECK(iv("aes-xts-plain64", 0x0102030405ULL) ==
        B{5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(iv("aes-xts-plain", 0x0102030405ULL) == B{5, 4, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(iv("aes-xts-plain64be", 0x0102ULL) == B{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2});
  CHECK(iv("aes-cbc-essiv:sha256", 7) == B{7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // benbi: the 16-byte block number, from 1: sector 1 is block 32, plus one
  CHECK(iv("aes-cbc-benbi", 1) == B{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 33});
  CHECK(iv("aes-cbc-null", 9) == B(16, 0));
  CHECK(iv("des3_ede-cbc-plain64", 1) == B{1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(iv("aes-ecb", 1).empty());
}

TEST_CASE("benchmark: one request per unit, each with its own IV", "[benchmark]") {
  Fixture f;
  f.kernel.page = 16384;
  f.request.bytes = 1U << 20;
  const auto report = f.run();
  CHECK(f.engine.algorithm == "xts(aes)");
  CHECK(f.engine.key_bytes == 32);  // the tool's default, 256 bits
  CHECK(units_of(report) == std::vector<std::uint32_t>{512, 1024, 2048, 4096, 8192, 16384});
  std::size_t seen = 0;
  for (const auto &r : report.results) {
    CAPTURE(r.unit);
    CHECK(r.encrypt.bytes == 1U << 20);
    CHECK(r.encrypt.requests == (1U << 20) / r.unit);
    CHECK(r.decrypt.requests == r.encrypt.requests);
    for (std::size_t i = 0; i < r.encrypt.requests + r.decrypt.requests; ++i) {
      const auto &q = f.engine.requests.at(seen + i);
      REQUIRE(q.size == r.unit);
      CHECK(q.direction == (i < r.encrypt.requests ? Direction::encrypt : Direction::decrypt));
      // plain64: the sector number of the unit in a 1 MiB buffer
      const std::uint64_t index = i % r.encrypt.requests;
      CHECK(q.iv.at(0) == static_cast<std::uint8_t>(index * (r.unit / 512)));
      CHECK(q.iv.at(1) == static_cast<std::uint8_t>((index * (r.unit / 512)) >> 8));
    }
    seen += r.encrypt.requests + r.decrypt.requests;
  }
  CHECK(seen == f.engine.requests.size());
}

TEST_CASE("benchmark: a time limit stops each measurement", "[benchmark]") {
  Fixture f;
  f.kernel.page = 4096;
  f.request.seconds = 0.1;
  const auto report = f.run();
  for (const auto &r : report.results) {
    // each request costs 1 ms plus its bytes at 100 MB/s: about 100 requests in 0.1 s
    CHECK(r.encrypt.seconds >= 0.1);
    CHECK(r.encrypt.seconds < 0.1 + 0.0011);
    CHECK(r.encrypt.requests > 90);
    CHECK(r.encrypt.requests <= 100);
  }
}

TEST_CASE("benchmark: the largest size the gate allows is recommended", "[benchmark]") {
  Fixture f;
  SECTION("crypt v1.30.0, 64K pages: 65536, with its gain over 4096") {
    const auto report = f.run();
    const auto &rec = report.recommendation;
    CHECK(rec.sector_size == 65536);
    CHECK(rec.max_plain == 65536);
    CHECK(rec.max_luks == 4096);
    REQUIRE(rec.gain_over_4096);
    // the fake: 4096 -> 4096 / (1 ms + 41 us), 65536 -> 65536 / (1 ms + 655 us)
    const double expected = (65536.0 / (1e-3 + 65536 / 100e6)) / (4096.0 / (1e-3 + 4096 / 100e6));
    CHECK(*rec.gain_over_4096 == Approx(expected - 1).epsilon(0.05));
    CHECK_FALSE(rec.blocked_size);
    CHECK_THAT(rec.reason, Catch::Contains("LUKS stays at 4096"));
    CHECK_THAT(rec.reason, Catch::Contains("v1.30.0 or later"));
    CHECK_THAT(rec.reason, Catch::Contains("the crypt target is v1.30.0"));
  }
  SECTION("stock v1.28.0, 64K pages: 4096, and what 65536 would gain") {
    f.kernel.version = TargetVersion{1, 28, 0};
    const auto report = f.run();
    const auto &rec = report.recommendation;
    CHECK(rec.sector_size == 4096);
    CHECK(rec.max_plain == 4096);
    CHECK(rec.gain_over_4096 == Approx(0.0));
    CHECK(rec.blocked_size == 65536U);
    REQUIRE(rec.blocked_gain);
    CHECK(*rec.blocked_gain > 1.0);
    CHECK_THAT(rec.reason, Catch::Contains("load dm-crypt-lbs"));
    CHECK_THAT(rec.reason, Catch::Contains("LUKS stays at 4096"));
  }
  SECTION("no crypt target loaded: 4096") {
    f.kernel.version.reset();
    const auto report = f.run();
    CHECK(report.recommendation.sector_size == 4096);
    CHECK_THAT(report.recommendation.reason, Catch::Contains("no crypt target is loaded"));
  }
  SECTION("device-mapper unreachable: measured anyway, 4096") {
    f.kernel.fail_list = true;
    const auto report = f.run();
    CHECK(report.results.size() == 8);
    CHECK(report.recommendation.sector_size == 4096);
    CHECK_THAT(report.recommendation.reason, Catch::Contains("could not be asked"));
  }
  SECTION("4K pages: 4096 whatever the target") {
    f.kernel.page = 4096;
    const auto report = f.run();
    CHECK(report.recommendation.sector_size == 4096);
    CHECK_FALSE(report.recommendation.blocked_size);
    CHECK_THAT(report.recommendation.reason, Catch::Contains("4096 is the page size here"));
  }
  SECTION("16K pages: 16384") {
    f.kernel.page = 16384;
    CHECK(f.run().recommendation.sector_size == 16384);
  }
}

TEST_CASE("benchmark: errors of the crypto API come back unchanged", "[benchmark]") {
  Fixture f;
  f.engine.open_error = lbscrypt::make_error(Errc::kernel, "AF_ALG is not available: load x");
  const auto report = lbscrypt::run_benchmark(f.request, f.env, f.crypto);
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().code == Errc::kernel);
  CHECK(report.error().message == "AF_ALG is not available: load x");
  f.request.key_bits = 12;
  const auto bad_key = lbscrypt::run_benchmark(f.request, f.env, f.crypto);
  REQUIRE_FALSE(bad_key.ok());
  CHECK(bad_key.error().code == Errc::invalid_argument);
}

namespace {

// The command line with a fake kernel's facts assumed and the fake crypto API.
struct BenchCli {
  Engine engine;
  std::ostringstream out;
  std::ostringstream err;

  int run(std::vector<std::string> args) {
    args.insert(args.begin(), {"lbscrypt", "benchmark", "--assume-version", "1.30.0"});
    lbscrypt::cli::Services services;
    services.make_devices = [] { return std::make_unique<FakeBlockDevices>(); };
    services.make_crypto = [this] { return std::make_unique<FakeCrypto>(engine); };
    return lbscrypt::cli::run(args, out, err, services);
  }
};

}  // namespace

TEST_CASE("cli benchmark: JSON records, a table, refusals", "[benchmark][cli]") {
  BenchCli cli;
  SECTION("--json: a record per unit size, then the recommendation") {
    REQUIRE(cli.run({"--assume-page-size", "65536", "--json", "--bytes", "65536"}) == 0);
    CHECK(cli.err.str().empty());
    std::istringstream lines(cli.out.str());
    std::vector<nlohmann::json> records;
    for (std::string line; std::getline(lines, line);) {
      records.push_back(nlohmann::json::parse(line));
    }
    REQUIRE(records.size() == 9);
    CHECK(records[0]["sector_size"] == 512);
    CHECK(records[7]["sector_size"] == 65536);
    CHECK(records[7]["algorithm"] == "xts(aes)");
    CHECK(records[7]["driver"].is_null());
    CHECK(records[7]["key_size"] == 256);
    CHECK(records[7]["encrypt_requests"] == 1);
    CHECK(records[0]["encrypt_requests"] == 128);
    CHECK(records[7]["encrypt_mibps"].get<double>() > 0);
    CHECK(records[7]["decrypt_mibps"].get<double>() > 0);
    const auto &rec = records[8];
    CHECK(rec["recommended_sector_size"] == 65536);
    CHECK(rec["max_luks_sector_size"] == 4096);
    CHECK(rec["target_version"] == "1.30.0");
    CHECK(rec["gain_over_4096"].get<double>() > 0);
    CHECK_THAT(rec["reason"].get<std::string>(), Catch::Contains("LUKS stays at 4096"));
  }
  SECTION("a table and a recommendation line") {
    REQUIRE(cli.run({"--assume-page-size", "4096", "--time", "0.01", "--driver", "eng-x", "-c",
                     "aes-xts-plain64", "-s", "512"}) == 0);
    CHECK(cli.engine.algorithm == "eng-x");
    CHECK(cli.engine.key_bytes == 64);
    const std::string text = cli.out.str();
    CHECK_THAT(text, Catch::Contains("encrypt MiB/s"));
    CHECK_THAT(text, Catch::Contains("(driver eng-x)"));
    CHECK_THAT(text, Catch::Contains("\n  4096 "));
    CHECK_THAT(text, Catch::Contains("Recommended sector size: 4096."));
  }
  SECTION("a cipher AF_ALG cannot do: one line, exit 1") {
    CHECK(cli.run({"--assume-page-size", "4096", "-c", "aes-cbc-lmk"}) ==
          lbscrypt::cli::kExitInvalid);
    CHECK(cli.out.str().empty());
    CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: cipher aes-cbc-lmk cannot be "
                                                "benchmarked through AF_ALG"));
    const std::string err = cli.err.str();
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  SECTION("AF_ALG missing: one line, exit 1") {
    cli.engine.open_error =
        lbscrypt::make_error(Errc::kernel, "AF_ALG is not available: load algif_skcipher");
    CHECK(cli.run({"--assume-page-size", "4096"}) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.err.str() == "lbscrypt: AF_ALG is not available: load algif_skcipher\n");
  }
  SECTION("usage errors") {
    CHECK(cli.run({"--assume-page-size", "4096", "--time", "0"}) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.run({"--assume-page-size", "4096", "--bytes", "-1"}) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.run({"--assume-page-size", "4096", "--bytes", "1", "--time", "1"}) ==
          lbscrypt::cli::kExitInvalid);
  }
}

TEST_CASE("only_async_skcipher: an offload driver AF_ALG no longer serves", "[benchmark]") {
  // Shaped like /proc/crypto: the engine's async driver, a sync software xts(aes), and an
  // async cryptd instance of the same name.
  const std::string proc =
      "name         : xts(aes)\n"
      "driver       : lbs-engine-xts-aes\n"
      "module       : lbs_engine\n"
      "priority     : 50\n"
      "type         : skcipher\n"
      "async        : yes\n"
      "\n"
      "name         : xts(aes)\n"
      "driver       : xts(ecb(aes-lib))\n"
      "type         : skcipher\n"
      "async        : no\n"
      "\n"
      "name         : cryptd(xts(ecb(aes-lib)))\n"
      "driver       : cryptd(xts(ecb(aes-lib)))\n"
      "type         : skcipher\n"
      "async        : yes\n"
      "\n"
      "name         : lbs-engine-aes\n"
      "driver       : lbs-engine-aes-cipher\n"
      "type         : cipher\n";
  CHECK(lbscrypt::only_async_skcipher(proc, "lbs-engine-xts-aes"));
  CHECK(lbscrypt::only_async_skcipher(proc, "cryptd(xts(ecb(aes-lib)))"));
  // a synchronous implementation of the name exists: AF_ALG's ENOENT has another cause
  CHECK_FALSE(lbscrypt::only_async_skcipher(proc, "xts(aes)"));
  CHECK_FALSE(lbscrypt::only_async_skcipher(proc, "xts(ecb(aes-lib))"));
  // not a skcipher, or not there at all
  CHECK_FALSE(lbscrypt::only_async_skcipher(proc, "lbs-engine-aes-cipher"));
  CHECK_FALSE(lbscrypt::only_async_skcipher(proc, "serpent-xts"));
  CHECK_FALSE(lbscrypt::only_async_skcipher("", "lbs-engine-xts-aes"));
  // the last entry without a blank line after it counts too
  CHECK(lbscrypt::only_async_skcipher("driver : d\ntype : skcipher\nasync : yes", "d"));
}
