// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/matrix.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"
#include "fakes.hpp"

using lbscrypt::Errc;
using lbscrypt::MatrixCell;
using lbscrypt::MatrixOptions;
using lbscrypt::MatrixReport;
using lbscrypt::TargetVersion;
using lbscrypt::test::FakeKernel;

namespace {

// The kernel log and sysfs of the fake kernel: the logical block size is the sector size the
// fake recorded; a refused load logs what dm-crypt-lbs and dm core log.
class FakeObserver final : public lbscrypt::KernelObserver {
 public:
  explicit FakeObserver(FakeKernel &fake) : kernel(&fake) {}
  FakeKernel *kernel;
  bool readable = true;
  int marks = 0;
  int creates_at_mark = 0;

  void mark() override {
    ++marks;
    creates_at_mark = kernel->creates;
  }
  std::optional<std::vector<std::string>> messages() override {
    if (!readable) {
      return std::nullopt;
    }
    std::vector<std::string> log;
    if (kernel->creates > creates_at_mark) {
      log.emplace_back("device-mapper: crypt-lbs: sector_size:8192 is above 4096");
      log.emplace_back("device-mapper: table: 253:1: crypt: Invalid sector size (-EINVAL)");
      log.emplace_back("device-mapper: ioctl: error adding target to table");
    }
    return log;
  }
  std::optional<std::uint32_t> logical_block_size(const lbscrypt::DeviceInfo &device) override {
    for (const auto &[name, mapping] : kernel->mappings) {
      if (mapping.info.minor == device.minor) {
        const auto table =
            lbscrypt::parse_table_params(mapping.line.params.view(), 0, mapping.line.length);
        if (table) {
          const auto size = table->sector_size();
          return size ? std::optional(*size) : std::nullopt;
        }
      }
    }
    return std::nullopt;
  }
};

struct Fixture {
  FakeKernel kernel;
  FakeObserver observer{kernel};
  MatrixOptions options;

  lbscrypt::Result<MatrixReport> run() { return lbscrypt::run_matrix(kernel, observer, options); }
};

const MatrixCell &cell(const MatrixReport &report, const std::string &size) {
  for (const auto &c : report.cells) {
    if (c.sector_size == size) {
      return c;
    }
  }
  FAIL("no cell for sector_size " << size);
  return report.cells.front();
}

}  // namespace

TEST_CASE("matrix: every default spelling, each outcome, devices removed", "[matrix]") {
  Fixture f;
  const auto report = f.run();
  REQUIRE(report.ok());
  CHECK(report->cells.size() == lbscrypt::default_matrix_sizes().size());
  CHECK(report->backing_target == "zero");
  CHECK(report->disagreements() == 0);
  CHECK(f.kernel.mappings.empty());

  const auto &ok = cell(*report, "65536");
  CHECK(ok.outcome == "ok");
  CHECK(ok.recorded == 65536U);
  CHECK(ok.logical_block_size == 65536U);
  CHECK_FALSE(ok.error.has_value());
  CHECK_FALSE(ok.truncated());

  const auto &refused = cell(*report, "131072");
  CHECK(refused.outcome == "EINVAL");
  CHECK_FALSE(refused.recorded.has_value());
  CHECK(refused.error == "Invalid sector size (-EINVAL) [sector_size:8192 is above 4096]");
  CHECK(refused.predicted.outcome == "EINVAL");
  CHECK(cell(*report, "4096abc").outcome == "EINVAL");
  CHECK(cell(*report, "+4096").outcome == "EINVAL");
  CHECK(f.observer.marks == static_cast<int>(report->cells.size()));
}

TEST_CASE("matrix: stock truncation is flagged, and predicted", "[matrix]") {
  Fixture f;
  f.kernel.version = TargetVersion{1, 28, 0};
  const auto report = f.run();
  REQUIRE(report.ok());
  const auto &c = cell(*report, "69632");
  CHECK(c.outcome == "ok");
  CHECK(c.recorded == 4096U);
  CHECK(c.truncated());
  CHECK(c.agrees());  // predict() knows pre-1.30.0 truncation
  CHECK(c.predicted.recorded == 4096U);
  CHECK(cell(*report, "8192").outcome == "EINVAL");
  CHECK(report->disagreements() == 0);
}

TEST_CASE("matrix: a kernel that differs from the prediction is flagged", "[matrix]") {
  Fixture f;
  f.kernel.recorded_override = "4096";  // records 4096 whatever the table says
  f.options.sizes = {"512", "8192", "3000"};
  const auto report = f.run();
  REQUIRE(report.ok());
  CHECK(report->disagreements() == 2);
  const auto &c = cell(*report, "8192");
  CHECK(c.truncated());
  CHECK_FALSE(c.agrees());
  CHECK(c.disagreement == "the kernel: ok, recorded 4096; predicted: ok, recorded 8192");
  CHECK(cell(*report, "3000").agrees());  // refused as predicted
  CHECK(f.kernel.mappings.empty());
}

TEST_CASE("matrix: the backing device falls back to error without a zero target", "[matrix]") {
  Fixture f;
  f.kernel.missing_targets.insert("zero");
  f.options.sizes = {"4096"};
  const auto report = f.run();
  REQUIRE(report.ok());
  CHECK(report->backing_target == "error");
  CHECK(report->cells.front().outcome == "ok");
  CHECK(f.kernel.mappings.empty());
}

TEST_CASE("matrix: devices are removed when a step fails", "[matrix]") {
  Fixture f;
  f.options.sizes = {"4096"};
  SECTION("the table cannot be read back") {
    f.kernel.fail_table = true;
    const auto report = f.run();
    REQUIRE_FALSE(report.ok());
    CHECK(report.error().code == Errc::kernel);
  }
  SECTION("the crypt target is not registered") {
    f.options.targets = {"crypt_lbs"};
    const auto report = f.run();
    REQUIRE_FALSE(report.ok());
    CHECK(report.error().code == Errc::refused);
    CHECK(f.kernel.creates == 0);
  }
  SECTION("a device of the same name is left over") {
    lbscrypt::CreateRequest leftover;
    leftover.name = "lbscrypt-matrix-cell";
    leftover.length = 8;
    REQUIRE(f.kernel.create(leftover).ok());
    const auto report = f.run();
    REQUIRE_FALSE(report.ok());
    CHECK(report.error().code == Errc::exists);
    REQUIRE(f.kernel.remove("lbscrypt-matrix-cell").ok());
  }
  SECTION("a signal stops the run between cells") {
    std::atomic<bool> stop{true};
    f.options.stop = &stop;
    const auto report = f.run();
    REQUIRE(report.ok());
    CHECK(report->interrupted);
    CHECK(report->cells.empty());
  }
  CHECK(f.kernel.mappings.empty());
}

TEST_CASE("matrix: no kernel log is not an error", "[matrix]") {
  Fixture f;
  f.observer.readable = false;
  f.options.sizes = {"3000"};
  const auto report = f.run();
  REQUIRE(report.ok());
  CHECK_FALSE(report->log_readable);
  CHECK(report->cells.front().outcome == "EINVAL");
  CHECK_FALSE(report->cells.front().error.has_value());
}

TEST_CASE("matrix: the kernel's message from the log lines", "[matrix]") {
  using lbscrypt::table_error_message;
  CHECK_FALSE(table_error_message({}).has_value());
  CHECK(table_error_message({"device-mapper: table: 253:3: crypt: Invalid sector size"}) ==
        "Invalid sector size");
  // The detail counts only directly before the table line; the last table line wins.
  CHECK(table_error_message({"device-mapper: crypt-lbs: old detail", "something else",
                             "device-mapper: table: 253:3: crypt_lbs: first",
                             "device-mapper: crypt-lbs: value 3000",
                             "device-mapper: table: 253:3: crypt_lbs: second"}) ==
        "second [value 3000]");
  CHECK(lbscrypt::errno_name(EINVAL) == "EINVAL");
  CHECK(lbscrypt::errno_name(EBUSY) == "EBUSY");
}

namespace {

struct MatrixCli {
  FakeKernel *kernel = nullptr;  // the one the command made (it owns it)
  std::ostringstream out;
  std::ostringstream err;
  TargetVersion version{1, 30, 0};
  std::optional<std::string> recorded_override;
  bool root = true;

  int run(std::vector<std::string> args) {
    args.insert(args.begin(), {"lbscrypt", "matrix"});
    lbscrypt::cli::Services services;
    services.is_root = root;
    services.make_kernel = [this] {
      auto made = std::make_unique<FakeKernel>();
      made->version = version;
      made->recorded_override = recorded_override;
      kernel = made.get();
      return made;
    };
    services.make_observer = [this] { return std::make_unique<FakeObserver>(*kernel); };
    return lbscrypt::cli::run(args, out, err, services);
  }
};

}  // namespace

TEST_CASE("cli matrix: root only, one line, exit 2", "[matrix][cli]") {
  MatrixCli cli;
  cli.root = false;
  CHECK(cli.run({}) == 2);
  CHECK(cli.err.str() == "lbscrypt: matrix creates device-mapper devices: run it as root\n");
  CHECK(cli.out.str().empty());
  CHECK(cli.kernel == nullptr);
}

TEST_CASE("cli matrix: --json records, one a line", "[matrix][cli]") {
  MatrixCli cli;
  cli.version = TargetVersion{1, 28, 0};
  REQUIRE(cli.run({"--json", "--sizes", "69632,8192", "--no-defaults"}) == 0);
  std::istringstream lines(cli.out.str());
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) {
    records.push_back(nlohmann::json::parse(line));
  }
  REQUIRE(records.size() == 2);
  CHECK(records[0]["target"] == "crypt");
  CHECK(records[0]["target_version"] == "1.28.0");
  CHECK(records[0]["sector_size"] == "69632");
  CHECK(records[0]["outcome"] == "ok");
  CHECK(records[0]["recorded"] == 4096);
  CHECK(records[0]["logical_block_size"] == 4096);
  CHECK(records[0]["error"].is_null());
  CHECK(records[0]["agrees"] == true);
  CHECK(records[1]["outcome"] == "EINVAL");
  CHECK(records[1]["recorded"].is_null());
  CHECK(records[1]["error"].is_string());
}

TEST_CASE("cli matrix: the table, and exit 1 where the kernel differs", "[matrix][cli]") {
  MatrixCli cli;
  cli.recorded_override = "4096";
  CHECK(cli.run({"--sizes", "8192", "--no-defaults"}) == 1);
  CHECK_THAT(cli.out.str(), Catch::Contains("4096!") && Catch::Contains("DIFFERS crypt "
                                                                        "sector_size:8192"));
  CHECK(cli.err.str() == "lbscrypt: 1 of 1 cells differ from what predict() says\n");
}

TEST_CASE("cli matrix: --sizes adds to the defaults, bad spellings are refused", "[matrix][cli]") {
  MatrixCli cli;
  REQUIRE(cli.run({"--json", "--sizes", "4096,1536"}) == 0);
  const std::string text = cli.out.str();
  const auto count = std::count(text.begin(), text.end(), '\n');
  CHECK(count == static_cast<long>(lbscrypt::default_matrix_sizes().size() + 1));
  MatrixCli bad;
  CHECK(bad.run({"--sizes", "4096,,512"}) == 1);
  CHECK(bad.err.str().starts_with("lbscrypt: --sizes '4096,,512'"));
  CHECK(bad.run({"--no-defaults"}) == 1);
}

TEST_CASE("cli matrix: a --target that is no target name is refused first", "[matrix][cli]") {
  MatrixCli cli;
  CHECK(cli.run({"--target", "crypt lbs"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: --target 'crypt lbs'"));
  CHECK(cli.kernel == nullptr);
}
