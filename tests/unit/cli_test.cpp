// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "cli.hpp"
#include "fakes.hpp"
#include "generate_cmd.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "output.hpp"
#include "reencrypt_request.hpp"
#include "temp_dir.hpp"

using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

// Hands the CLI a Kernel that forwards to a fake the test keeps.
class KernelRef final : public lbscrypt::Kernel {
 public:
  explicit KernelRef(FakeKernel &fake) : fake_(fake) {}
  lbscrypt::Result<std::optional<lbscrypt::TargetVersion>> target_version(
      std::string_view t) override {
    return fake_.target_version(t);
  }
  lbscrypt::Result<std::optional<lbscrypt::TargetVersion>> load_target(
      std::string_view t) override {
    return fake_.load_target(t);
  }
  bool module_installed(std::string_view m) override { return fake_.module_installed(m); }
  std::uint32_t page_size() override { return fake_.page_size(); }
  lbscrypt::Result<lbscrypt::DeviceInfo> create(const lbscrypt::CreateRequest &r) override {
    return fake_.create(r);
  }
  lbscrypt::Result<void> remove(std::string_view n) override { return fake_.remove(n); }
  lbscrypt::Result<lbscrypt::DeviceInfo> info(std::string_view n) override { return fake_.info(n); }
  lbscrypt::Result<std::vector<std::string>> list() override { return fake_.list(); }
  lbscrypt::Result<std::vector<lbscrypt::TargetLine>> table(std::string_view n) override {
    return fake_.table(n);
  }
  lbscrypt::Result<void> suspend(std::string_view n, lbscrypt::SuspendMode mode) override {
    return fake_.suspend(n, mode);
  }
  lbscrypt::Result<void> reload(std::string_view n, const std::vector<lbscrypt::TargetLine> &l,
                                bool read_only) override {
    return fake_.reload(n, l, read_only);
  }
  lbscrypt::Result<void> resume(std::string_view n) override { return fake_.resume(n); }

 private:
  FakeKernel &fake_;
};

class DevicesRef final : public lbscrypt::BlockDevices {
 public:
  explicit DevicesRef(FakeBlockDevices &fake) : fake_(fake) {}
  lbscrypt::Result<lbscrypt::PathKind> path_kind(const std::string &p) override {
    return fake_.path_kind(p);
  }
  lbscrypt::Result<std::uint64_t> size_bytes(const std::string &p) override {
    return fake_.size_bytes(p);
  }
  lbscrypt::Result<bool> has_luks_header(const std::string &p) override {
    return fake_.has_luks_header(p);
  }
  std::string resolve(std::string_view mm) override { return fake_.resolve(mm); }
  bool is_regular_file(const std::string &p) override { return fake_.is_regular_file(p); }
  lbscrypt::Result<lbscrypt::LoopDevice> attach_loop(const std::string &f, bool ro) override {
    return fake_.attach_loop(f, ro);
  }
  std::optional<std::string> user_of(const std::string &p) override { return fake_.user_of(p); }
  std::optional<std::string> loop_backing_file(const std::string &d) override {
    return fake_.loop_backing_file(d);
  }
  std::optional<lbscrypt::WriteGeometry> write_geometry(const std::string &d) override {
    return fake_.write_geometry(d);
  }

 private:
  FakeBlockDevices &fake_;
};

const std::string kKeyFile = std::string(LBSCRYPT_TEST_DATA) + "/keyfile-64.bin";
// The first 32 bytes of keyfile-64.bin (bytes 0..63), as dm-crypt prints them.
const std::string kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

struct Cli {
  FakeKernel kernel;
  FakeBlockDevices devices;
  std::ostringstream out;
  std::ostringstream err;
  int kernels_made = 0;
  bool stdin_tty = false;
  bool stdout_tty = false;
  int prompts = 0;

  Cli() { devices.sizes["/dev/ram0"] = 64ULL * 1024 * 1024; }

  int run(std::vector<std::string> args) {
    out.str("");
    err.str("");
    args.insert(args.begin(), "lbscrypt");
    lbscrypt::cli::Services services;
    services.make_kernel = [this] {
      ++kernels_made;
      return std::make_unique<KernelRef>(kernel);
    };
    services.make_devices = [this] { return std::make_unique<DevicesRef>(devices); };
    services.stdin_is_terminal = stdin_tty;
    services.stdout_is_terminal = stdout_tty;
    services.make_terminal = [this](const lbscrypt::cli::TerminalOptions &) {
      return lbscrypt::TerminalReader([this](std::size_t) {
        ++prompts;
        const char *pass = "correct horse";
        return lbscrypt::Result<lbscrypt::SecretBuffer>(lbscrypt::SecretBuffer(pass, 13));
      });
    };
    services.read_file = [this](const std::string &path) -> lbscrypt::Result<std::string> {
      const auto it = files.find(path);
      if (it == files.end()) {
        return lbscrypt::make_error(lbscrypt::Errc::not_found, "no " + path);
      }
      return it->second;
    };
    services.installed_tool = "/usr/sbin/lbscrypt";
    services.attach.key_file_mode = [](const std::string &) { return std::optional(0100400U); };
    services.reencrypt_registry = registry;
    services.reencrypt = reencrypt;
    services.run_child = run_child;
    services.has_program = has_program;
    services.attach.unseal = unseal;
    return lbscrypt::cli::run(args, out, err, services);
  }
  // seal's and open's systemd-creds, the programs installed, the TPM2: unset unless a test
  // gives them.
  lbscrypt::ChildRunner run_child;
  std::function<bool(std::string_view)> has_program;
  std::function<lbscrypt::Result<lbscrypt::SecretBuffer>(const lbscrypt::SealedKey &)> unseal;
  std::map<std::string, std::string> files;  // what read_file finds
  // The registry of reencrypt runs open, attach and tab list consult: none unless a test
  // gives one (the machine's own is never read).
  std::optional<std::filesystem::path> registry;
  // reencrypt's I/O and probe: none unless a test gives them.
  lbscrypt::cli::ReencryptServices reencrypt;
};

}  // namespace

TEST_CASE("cli table: a line for another machine needs no kernel", "[cli]") {
  Cli cli;
  const int rc = cli.run({"table", "--assume-version", "1.30.0", "--assume-page-size", "65536",
                          "--size", "2048", "--sector-size", "65536", "--iv-large-sectors",
                          "--key-file", kKeyFile, "/dev/vdb"});
  CHECK(rc == 0);
  CHECK(cli.err.str().empty());
  CHECK(cli.out.str() == "0 2048 crypt aes-xts-plain64 " + kKeyHex +
                             " 0 /dev/vdb 0 2 sector_size:65536 iv_large_sectors\n");
  CHECK(cli.kernels_made == 0);
}

TEST_CASE("cli table: options in cryptsetup's names and units", "[cli]") {
  Cli cli;
  const int rc = cli.run({"table",
                          "-c",
                          "aes-cbc-essiv:sha256",
                          "-s",
                          "128",
                          "-d",
                          kKeyFile,
                          "--keyfile-offset",
                          "16",
                          "-o",
                          "8",
                          "-p",
                          "104",
                          "-b",
                          "1024",
                          "--allow-discards",
                          "--perf-same_cpu_crypt",
                          "--perf-submit_from_crypt_cpus",
                          "--perf-no_read_workqueue",
                          "--perf-no_write_workqueue",
                          "--sector-size",
                          "4096",
                          "/dev/ram0"});
  CHECK(cli.err.str().empty());
  REQUIRE(rc == 0);
  CHECK(cli.out.str() ==
        "0 1024 crypt aes-cbc-essiv:sha256 101112131415161718191a1b1c1d1e1f 104 /dev/ram0 8 6 "
        "allow_discards same_cpu_crypt submit_from_crypt_cpus no_read_workqueue "
        "no_write_workqueue sector_size:4096\n");
}

TEST_CASE("cli table: refusals are one line, exit non-zero, print no table", "[cli]") {
  Cli cli;
  SECTION("stock version") {
    cli.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
    CHECK(cli.run({"table", "--sector-size", "65536", "-d", kKeyFile, "/dev/ram0"}) ==
          lbscrypt::cli::kExitInvalid);
    CHECK(cli.err.str() ==
          "lbscrypt: this kernel's crypt is v1.28.0; sector_size 65536 needs "
          "v1.30.0: load dm-crypt-lbs\n");
  }
  SECTION("page size") {
    cli.kernel.page = 4096;
    CHECK(cli.run({"table", "--sector-size", "16384", "-d", kKeyFile, "/dev/ram0"}) ==
          lbscrypt::cli::kExitInvalid);
    CHECK_THAT(cli.err.str(), Catch::Contains("exceeds the page size 4096"));
  }
  SECTION("LUKS header") {
    cli.devices.luks["/dev/ram0"] = true;
    CHECK(cli.run({"table", "--sector-size", "8192", "-d", kKeyFile, "/dev/ram0"}) ==
          lbscrypt::cli::kExitInvalid);
  }
  SECTION("not a power of two") {
    CHECK(cli.run({"table", "--sector-size", "3000", "-d", kKeyFile, "/dev/ram0"}) ==
          lbscrypt::cli::kExitInvalid);
  }
  SECTION("missing key file") {
    CHECK(cli.run({"table", "-d", "/nonexistent/key", "/dev/ram0"}) == lbscrypt::cli::kExitInvalid);
  }
  SECTION("bad --assume-version") {
    CHECK(cli.run({"table", "--assume-version", "1.30", "--assume-page-size", "4096", "--size", "8",
                   "-d", kKeyFile, "/dev/x"}) == lbscrypt::cli::kExitInvalid);
    CHECK_THAT(cli.err.str(), Catch::Contains("for example 1.30.0"));
  }
  SECTION("bad --assume-page-size") {
    CHECK(cli.run({"table", "--assume-version", "1.30.0", "--assume-page-size", "5000", "--size",
                   "8", "-d", kKeyFile, "/dev/x"}) == lbscrypt::cli::kExitInvalid);
  }
  CHECK(cli.out.str().empty());
  const std::string err = cli.err.str();
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE("cli usage errors exit 1, as cryptsetup's", "[cli]") {
  Cli cli;
  CHECK(cli.run({}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.run({"frobnicate"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.run({"table", "--sector-size", "4096abc", "/dev/x"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.run({"table", "--no-such-option", "/dev/x"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.run({"open", "/dev/ram0"}) == lbscrypt::cli::kExitInvalid);  // no name
  CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: "));
}

TEST_CASE("cli usage errors: an unknown option is named before a missing argument", "[cli]") {
  Cli cli;
  // CLI11 names an unknown option when nothing required is missing
  CHECK(cli.run({"table", "--sector-sise", "/dev/x"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: The following argument was not expected: --sector-sise (see lbscrypt --help)\n");
  // and first when the device is missing as well (CLI11 alone would say only
  // that the device is required)
  CHECK(cli.run({"table", "--bogus"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: The following argument was not expected: --bogus (see lbscrypt --help)\n");
  // with nothing unknown, the missing argument is still what is reported
  CHECK(cli.run({"table"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("device is required"));
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE("cli help and version", "[cli]") {
  Cli cli;
  CHECK(cli.run({"--help"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains("table") && Catch::Contains("check"));
  CHECK(cli.run({"table", "--help"}) == 0);
  CHECK_THAT(cli.out.str(),
             Catch::Contains("--perf-no_write_workqueue") && Catch::Contains("--assume-page-size"));
  CHECK(cli.run({"--version"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains("lbscrypt 1.30.0"));
}

TEST_CASE("cli check: text and JSON", "[cli]") {
  Cli cli;
  cli.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
  CHECK(cli.run({"check", "--sector-size", "65536"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.out.str(), Catch::Contains("crypt target:             v1.28.0") &&
                                Catch::Contains("largest plain sector size: 4096") &&
                                Catch::Contains("needs v1.30.0: load dm-crypt-lbs"));

  cli.kernel.version = lbscrypt::TargetVersion{1, 30, 0};
  cli.kernel.page = 16384;
  CHECK(cli.run({"check", "--sector-size", "16384", "--json"}) == 0);
  const auto j = nlohmann::json::parse(cli.out.str());
  CHECK(j["target_version"] == "1.30.0");
  CHECK(j["page_size"] == 16384);
  CHECK(j["max_plain_sector_size"] == 16384);
  CHECK(j["max_luks_sector_size"] == 4096);
  CHECK(j["loads"] == true);
  CHECK(j["reason"].is_null());

  CHECK(cli.run({"check", "--sector-size", "8192", "--type", "luks", "--json"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(nlohmann::json::parse(cli.out.str())["loads"] == false);

  cli.kernel.version.reset();
  CHECK(cli.run({"check", "--json"}) == 0);
  CHECK(nlohmann::json::parse(cli.out.str())["target_version"].is_null());

  cli.kernel.fail_list = true;
  CHECK(cli.run({"check"}) == lbscrypt::cli::kExitInvalid);
}

TEST_CASE("cli table --json carries the line and the facts", "[cli]") {
  Cli cli;
  REQUIRE(cli.run({"table", "--json", "--sector-size", "8192", "-d", kKeyFile, "/dev/ram0"}) == 0);
  const auto j = nlohmann::json::parse(cli.out.str());
  CHECK(j["table"] ==
        "0 131072 crypt aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 0 1 sector_size:8192");
  CHECK(j["sector_size"] == 8192);
  CHECK(j["key_size"] == 256);
  CHECK(j["target_version"] == "1.30.0");
}

TEST_CASE("cli open, status, close", "[cli]") {
  Cli cli;
  REQUIRE(cli.run({"open", "--type", "plain", "--sector-size", "65536", "-d", kKeyFile, "/dev/ram0",
                   "big"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains("/dev/mapper/big") && Catch::Contains("/dev/dm-0"));
  REQUIRE(cli.kernel.mappings.count("big") == 1);
  CHECK(std::string(cli.kernel.mappings.at("big").line.params.view()) ==
        "aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 0 1 sector_size:65536");

  REQUIRE(cli.run({"status", "big"}) == 0);
  const std::string status = cli.out.str();
  CHECK_THAT(status, Catch::Contains("/dev/mapper/big is active.") &&
                         Catch::Contains("sector size:  65536") &&
                         Catch::Contains("keysize: 256 bits") &&
                         Catch::Contains("target:  crypt v1.30.0") &&
                         Catch::Contains("dm device: /dev/dm-0"));
  CHECK(status.find(kKeyHex) == std::string::npos);

  REQUIRE(cli.run({"status", "--json", "big"}) == 0);
  const auto j = nlohmann::json::parse(cli.out.str());
  CHECK(j["sector_size"] == 65536);
  CHECK(j["dm_device"] == "/dev/dm-0");
  CHECK(cli.out.str().find(kKeyHex) == std::string::npos);

  // Active with another table: refused in one line, nothing touched.
  CHECK(cli.run({"open", "-d", kKeyFile, "/dev/ram0", "big"}) == lbscrypt::cli::kExitBusy);
  CHECK(cli.err.str() ==
        "lbscrypt: Device big is already active with another table (sector size 65536, not "
        "512): close it first, or give another name\n");
  // Active as asked: success, and no key is read (the key file is not even named).
  const int creates = cli.kernel.creates;
  CHECK(cli.run({"open", "--sector-size", "65536", "/dev/ram0", "big"}) == 0);
  CHECK(cli.kernel.creates == creates);
  CHECK_THAT(cli.out.str(), Catch::Contains("/dev/mapper/big"));
  CHECK_THAT(cli.err.str(), Catch::Contains("big is already active as requested"));
  CHECK(cli.run({"open", "--sector-size", "65536", "--key-size", "512", "/dev/ram0", "big"}) ==
        lbscrypt::cli::kExitBusy);
  CHECK_THAT(cli.err.str(), Catch::Contains("key size 256, not 512"));
  CHECK(cli.run({"open", "--sector-size", "65536", "-r", "/dev/ram0", "big"}) ==
        lbscrypt::cli::kExitBusy);
  CHECK(cli.run({"close", "big"}) == 0);
  CHECK(cli.kernel.mappings.empty());
  CHECK(cli.run({"close", "big"}) == lbscrypt::cli::kExitDevice);
  CHECK(cli.run({"status", "big"}) == lbscrypt::cli::kExitDevice);
}

TEST_CASE("cli open refuses what it must not do", "[cli]") {
  Cli cli;
  CHECK(cli.run({"open", "--type", "luks", "/dev/ram0", "x"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.run({"open", "--assume-version", "1.30.0", "-d", kKeyFile, "/dev/ram0", "x"}) ==
        lbscrypt::cli::kExitInvalid);
  cli.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
  CHECK(cli.run({"open", "--sector-size", "65536", "-d", kKeyFile, "/dev/ram0", "x"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE("cli numbers: negatives, junk and overflow are refused with one line", "[cli]") {
  Cli cli;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--size", "-1"},
      {"--skip", "-8"},
      {"--offset", "-2048"},
      {"--size", "18446744073709551616"},
      {"--sector-size", "4096abc"},
      {"--sector-size", "4294971392"},
      {"--keyfile-offset", "+1"},
      {"--keyfile-size", "1e3"},
      {"--key-size", " 256"},
      {"--timeout", "-5"},
  };
  for (const auto &[option, value] : bad) {
    INFO(option << " " << value);
    CHECK(cli.run({"table", option, value, "-d", kKeyFile, "/dev/ram0"}) ==
          lbscrypt::cli::kExitInvalid);
    CHECK(cli.out.str().empty());
    CHECK_THAT(cli.err.str(), Catch::StartsWith(std::string("lbscrypt: ")
                                                    .append(option)
                                                    .append(" '")
                                                    .append(value)
                                                    .append("' is not a number")));
    const std::string err = cli.err.str();
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE("cli table: an unaligned --skip is refused", "[cli]") {
  Cli cli;
  CHECK(cli.run({"table", "--sector-size", "4096", "--skip", "1", "-d", kKeyFile, "/dev/ram0"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.out.str().empty());
  CHECK_THAT(cli.err.str(), Catch::Contains("--skip 1 is not a multiple of sector size 4096"));
}

TEST_CASE("cli table: no device-mapper needed up to 4096", "[cli]") {
  Cli cli;
  cli.kernel.fail_list = true;
  REQUIRE(cli.run({"table", "--sector-size", "4096", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::EndsWith(" 0 /dev/ram0 0 1 sector_size:4096\n"));
  REQUIRE(cli.run({"table", "--json", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK(nlohmann::json::parse(cli.out.str())["target_version"] == "unknown");
  CHECK(cli.run({"table", "--sector-size", "8192", "-d", kKeyFile, "/dev/ram0"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.out.str().empty());
  CHECK_THAT(cli.err.str(), Catch::Contains("pass --assume-version"));
}

TEST_CASE("cli table: the key is not printed to a terminal without --showkeys", "[cli]") {
  Cli cli;
  cli.stdout_tty = true;
  REQUIRE(cli.run({"table", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK(cli.out.str().find(kKeyHex) == std::string::npos);
  CHECK_THAT(cli.out.str(), Catch::Contains(" " + std::string(64, '0') + " 0 /dev/ram0 0"));
  CHECK_THAT(cli.err.str(), Catch::Contains("--showkeys"));
  REQUIRE(cli.run({"table", "--json", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK(cli.out.str().find(kKeyHex) == std::string::npos);
  REQUIRE(cli.run({"table", "--showkeys", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains(kKeyHex));
  cli.stdout_tty = false;
  REQUIRE(cli.run({"table", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains(kKeyHex));
  CHECK(cli.err.str().empty());
}

TEST_CASE("cli open: the gate runs before the passphrase prompt", "[cli]") {
  Cli cli;
  cli.stdin_tty = true;
  cli.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
  CHECK(cli.run({"open", "--sector-size", "65536", "/dev/ram0", "x"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.prompts == 0);
  CHECK_THAT(cli.err.str(), Catch::Contains("needs v1.30.0"));
  cli.kernel.version = lbscrypt::TargetVersion{1, 30, 0};
  REQUIRE(cli.run({"open", "-c", "aes-xts-plain64", "-s", "256", "-h", "sha256", "--sector-size",
                   "65536", "/dev/ram0", "x"}) == 0);
  CHECK(cli.prompts == 1);
  // sha256("correct horse"), from the fake terminal
  CHECK_THAT(std::string(cli.kernel.mappings.at("x").line.params.view()),
             Catch::Contains("4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631"));
}

TEST_CASE("cli open: a passphrase with defaults warns as cryptsetup 2.7 does", "[cli]") {
  Cli cli;
  cli.stdin_tty = true;
  REQUIRE(cli.run({"open", "/dev/ram0", "x"}) == 0);
  CHECK_THAT(cli.err.str(), Catch::StartsWith("WARNING: ") && Catch::Contains("sha256"));
  REQUIRE(cli.run({"close", "x"}) == 0);
  REQUIRE(cli.run({"open", "-q", "/dev/ram0", "x"}) == 0);
  CHECK(cli.err.str().empty());
}

TEST_CASE("cli exit codes and messages are cryptsetup's", "[cli]") {
  Cli cli;
  REQUIRE(cli.run({"open", "-d", kKeyFile, "/dev/ram0", "x"}) == 0);
  CHECK(cli.kernel.mappings.at("x").info.uuid == "CRYPT-PLAIN-x");
  CHECK(cli.run({"open", "-d", kKeyFile, "--offset", "8", "/dev/ram0", "x"}) == 5);
  CHECK(cli.run({"open", "-d", kKeyFile, "/dev/absent", "y"}) == 4);
  CHECK_THAT(cli.err.str(), Catch::Contains("/dev/absent"));
  cli.kernel.mappings.at("x").info.open_count = 1;
  CHECK(cli.run({"close", "x"}) == 5);
  CHECK(cli.err.str() == "lbscrypt: Device x is still in use.\n");
  cli.kernel.mappings.at("x").info.open_count = 0;
  CHECK(cli.run({"close", "-v", "/dev/mapper/x"}) == 0);
  CHECK(cli.out.str().empty());
  CHECK(cli.err.str() == "Command successful.\n");
  CHECK(cli.run({"close", "x"}) == 4);
  CHECK(cli.err.str() == "lbscrypt: Device x is not active.\n");
  // detach, a unit's ExecStop: a mapping already gone is success, as systemd's detach
  CHECK(cli.run({"detach", "x"}) == 0);
  CHECK(cli.err.str() == "lbscrypt: x is not active; nothing to detach\n");
  REQUIRE(cli.run({"open", "-d", kKeyFile, "/dev/ram0", "x"}) == 0);
  CHECK(cli.run({"detach", "/dev/mapper/x"}) == 0);
  CHECK_FALSE(cli.kernel.mappings.contains("x"));
  CHECK(cli.run({"status", "x"}) == 4);
  CHECK(cli.out.str() == "/dev/mapper/x is inactive.\n");
  CHECK(cli.run({"status", "/dev/mapper/x"}) == 4);
  CHECK(cli.out.str() == "/dev/mapper/x is inactive.\n");
  CHECK(cli.run({"table", "--bogus", "/dev/ram0"}) == 1);
  CHECK(cli.run({"open", "-d", "/nonexistent/key", "/dev/ram0", "y"}) == 1);
  cli.devices.regular_files["/dev/ram0"] = true;
  CHECK(cli.run({"table", "-d", kKeyFile, "/dev/ram0"}) == 4);
  CHECK_THAT(cli.err.str(), Catch::Contains("regular file"));
}

TEST_CASE("cli status: cryptsetup's format, plus sector size, dm device and target", "[cli]") {
  Cli cli;
  REQUIRE(cli.run({"open", "-d", kKeyFile, "--sector-size", "4096", "--skip", "8",
                   "--allow-discards", "--size", "2048", "/dev/ram0", "x"}) == 0);
  cli.kernel.mappings.at("x").info.suspended = true;
  REQUIRE(cli.run({"status", "/dev/mapper/x"}) == 0);
  CHECK(cli.out.str() ==
        "/dev/mapper/x is active.\n"
        "  type:    PLAIN\n"
        "  cipher:  aes-xts-plain64\n"
        "  keysize: 256 bits\n"
        "  key location: dm-crypt\n"
        "  device:  /dev/ram0\n"
        "  sector size:  4096\n"
        "  offset:  0 sectors\n"
        "  size:    2048 sectors\n"
        "  skipped: 8 sectors\n"
        "  mode:    read/write (suspended)\n"
        "  flags:   discards \n"
        "  dm device: /dev/dm-0\n"
        "  target:  crypt v1.30.0\n");
  lbscrypt::CreateRequest linear;
  linear.name = "lin";
  linear.target_type = "linear";
  linear.length = 8;
  linear.params.append("7:0 0");
  REQUIRE(cli.kernel.create(linear).ok());
  REQUIRE(cli.run({"status", "lin"}) == 0);
  CHECK(cli.out.str() == "/dev/mapper/lin is active.\n  type:    n/a\n");
}

TEST_CASE("cli open: a regular file through a loop device, shown by status", "[cli]") {
  Cli cli;
  cli.devices.sizes["/srv/disk.img"] = 1024ULL * 1024;
  cli.devices.regular_files["/srv/disk.img"] = true;
  REQUIRE(cli.run({"open", "-d", kKeyFile, "/srv/disk.img", "img"}) == 0);
  CHECK_THAT(std::string(cli.kernel.mappings.at("img").line.params.view()),
             Catch::Contains(" /dev/loop0 0"));
  // The fake resolves "/dev/loop0" as given; the real one reads /sys/dev/block.
  cli.kernel.mappings.at("img").line.params = lbscrypt::SecretBuffer();
  cli.kernel.mappings.at("img").line.params.append("aes-xts-plain64 " + kKeyHex + " 0 7:0 0");
  REQUIRE(cli.run({"status", "img"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains("  device:  /dev/loop0\n  loop:    /srv/disk.img\n"));
}

TEST_CASE("cli: -v talks on standard error, stdout is only the table", "[cli]") {
  Cli cli;
  const std::vector<std::string> table = {"table", "-d", kKeyFile, "--size", "2048", "/dev/ram0"};
  REQUIRE(cli.run(table) == 0);
  const std::string line = cli.out.str();
  CHECK(line == "0 2048 crypt aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 0\n");
  auto verbose = table;
  verbose.insert(verbose.begin() + 1, "-v");
  REQUIRE(cli.run(verbose) == 0);
  CHECK(cli.out.str() == line);  // one line: what dmsetup create reads
  CHECK(cli.err.str() == "Command successful.\n");
  REQUIRE(cli.run({"-v", "check"}) == 0);
  CHECK(cli.out.str().find("Command successful.") == std::string::npos);
  CHECK(cli.err.str() == "Command successful.\n");
}

TEST_CASE("cli: -q, -v and --debug are taken before the command as after it", "[cli]") {
  Cli cli;
  cli.stdin_tty = true;
  REQUIRE(cli.run({"-q", "open", "/dev/ram0", "x"}) == 0);
  CHECK(cli.err.str().empty());  // no 2.7 defaults warning
  CHECK(cli.kernel.mappings.contains("x"));
  REQUIRE(cli.run({"--batch-mode", "-v", "close", "x"}) == 0);
  CHECK(cli.err.str() == "Command successful.\n");
  REQUIRE(cli.run({"--debug", "table", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK_THAT(cli.err.str(), Catch::StartsWith("# lbscrypt "));
  CHECK(cli.run({"-q", "status", "x"}) == 4);
  CHECK(cli.run({"-q", "-v", "check"}) == 0);
  // matrix takes them too (it refuses without root before anything else)
  CHECK(cli.run({"-q", "matrix", "-v"}) == 2);
  CHECK_THAT(cli.err.str(), Catch::Contains("root"));
}

TEST_CASE("cli table: -q drops the note about the hidden key, not the hiding", "[cli]") {
  Cli cli;
  cli.stdout_tty = true;
  REQUIRE(cli.run({"table", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK_THAT(cli.err.str(), Catch::Contains("--showkeys"));
  REQUIRE(cli.run({"table", "-q", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK(cli.err.str().empty());
  CHECK(cli.out.str().find(kKeyHex) == std::string::npos);
}

TEST_CASE("cli: table words are refused with one line, nothing on stdout", "[cli]") {
  Cli cli;
  cli.devices.sizes["/dev/a b"] = 1024ULL * 1024;
  CHECK(cli.run({"table", "-d", kKeyFile, "/dev/a b"}) == 1);
  CHECK(cli.out.str().empty());
  CHECK(cli.err.str() ==
        "lbscrypt: device '/dev/a b' contains a space: a dm table line cannot carry it as one "
        "word; use a path without whitespace, control characters or backslashes (a "
        "/dev/disk/by-id/ or by-partuuid link, or the /dev node itself)\n");
  CHECK(cli.run({"table", "-d", kKeyFile, "--size", "8", "/dev/x\n0 8 zero"}) == 1);
  CHECK(cli.out.str().empty());
  CHECK(cli.run({"table", "-d", kKeyFile, "-c", "aes-xts-plain64 extra", "/dev/ram0"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::Contains("--cipher 'aes-xts-plain64 extra' contains a space"));
  CHECK(cli.out.str().empty());
  CHECK(cli.run({"table", "-d", kKeyFile, "--target", "", "/dev/ram0"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: --target '' is not a device-mapper"));
  CHECK(cli.out.str().empty());
  // open: refused before the passphrase is asked for and before the kernel is touched
  cli.stdin_tty = true;
  CHECK(cli.run({"open", "--target", "crypt lbs", "/dev/ram0", "x"}) == 1);
  CHECK(cli.run({"open", "/dev/a b", "x"}) == 1);
  CHECK(cli.prompts == 0);
  CHECK(cli.kernel.creates == 0);
  CHECK(cli.run({"status", "--target", "", "x"}) == 1);
}

TEST_CASE("cli: a value quoted in a refusal keeps it one line, its control bytes escaped",
          "[cli]") {
  // Messages that quote an argument as given: a number, a version, a key file's path,
  // an option name CLI11 does not know.
  const std::vector<std::vector<std::string>> lines = {
      {"table", "--assume-version", "1.30.0", "--size", "8\n0 8 zero", "-d", kKeyFile, "/dev/x"},
      {"table", "--assume-version", "1.30.0\n", "--size", "8", "-d", kKeyFile, "/dev/x"},
      {"table", "--size", "8", "-d", "/no/such\nkey\x1b[2J", "/dev/ram0"},
      {"table", "--si\rze", "8", "-d", kKeyFile, "/dev/ram0"},
      {"check", "--sector-size",
       "\x7f"
       "4096"},
  };
  for (const auto &line : lines) {
    Cli cli;
    CAPTURE(line);
    CHECK(cli.run(line) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.out.str().empty());
    const std::string err = cli.err.str();
    REQUIRE_FALSE(err.empty());
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.back() == '\n');
    CHECK(std::none_of(err.begin(), err.end() - 1,
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }));
  }
  Cli cli;
  CHECK(cli.run({"table", "--size", "8\n0", "-d", kKeyFile, "/dev/x"}) == 1);
  CHECK(cli.err.str() ==
        "lbscrypt: --size '8\\n0' is not a number: give decimal digits only, 0 to "
        "18446744073709551615\n");
}

TEST_CASE("cli open: an unknown --hash is refused before the prompt", "[cli]") {
  Cli cli;
  cli.stdin_tty = true;
  CHECK(cli.run({"open", "-h", "nosuchhash", "/dev/ram0", "x"}) == 1);
  CHECK(cli.prompts == 0);
  CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: --hash 'nosuchhash' is not a hash"));
  CHECK(cli.kernel.creates == 0);
  CHECK(cli.run({"open", "-d", "/nonexistent/key", "/dev/ram0", "x"}) == 1);
  CHECK(cli.err.str() ==
        "lbscrypt: cannot read the key file /nonexistent/key: No such file or directory\n");
}

namespace {
std::string json_string(std::string_view text) {
  std::ostringstream out;
  lbscrypt::cli::write_json_string(out, text);
  return out.str();
}
}  // namespace

TEST_CASE("json: bytes that are not UTF-8 become \\udcXX, the rest is as nlohmann writes it",
          "[cli][json]") {
  CHECK(json_string("/dev/x\xff") == "\"/dev/x\\udcff\"");
  CHECK(json_string("\xc0\xaf") == "\"\\udcc0\\udcaf\"");             // overlong '/'
  CHECK(json_string("\xed\xa0\x80") == "\"\\udced\\udca0\\udc80\"");  // a surrogate in UTF-8
  CHECK(json_string("a\xe2\x82") == "\"a\\udce2\\udc82\"");           // cut short
  CHECK(json_string("\xf4\x90\x80\x80") == "\"\\udcf4\\udc90\\udc80\\udc80\"");  // > U+10FFFF
  CHECK(json_string("\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\x91") ==
        "\"\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\x91\"");
  const nlohmann::json sample = {{"b", "q\"\\\b\f\n\r\t\x01\x7f"},
                                 {"a", {1, 2.5, nullptr, true, "\xc3\xa9"}},
                                 {"c", {{"z", -3}, {"y", nlohmann::json::object()}}}};
  std::ostringstream out;
  lbscrypt::cli::write_json(out, sample);
  CHECK(out.str() == sample.dump());
}

TEST_CASE("cli table --json: a path that is not UTF-8 is no internal error", "[cli][json]") {
  Cli cli;
  const std::string device = "/dev/disk/by-id/caf\xe9";  // Latin-1, as a path may be
  cli.devices.sizes[device] = 1024ULL * 1024;
  REQUIRE(cli.run({"table", "--json", "-d", kKeyFile, "--size", "8", device}) == 0);
  CHECK_THAT(cli.out.str(), Catch::StartsWith("{\"table\":\"0 8 crypt aes-xts-plain64 " + kKeyHex +
                                              " 0 /dev/disk/by-id/caf\\udce9 0\",") &&
                                Catch::Contains(",\"device\":\"/dev/disk/by-id/caf\\udce9\","));
  CHECK(cli.err.str().empty());
  // status of a mapping on a loop device whose file is not UTF-8
  cli.devices.sizes["/srv/\xff.img"] = 1024ULL * 1024;
  cli.devices.regular_files["/srv/\xff.img"] = true;
  REQUIRE(cli.run({"open", "-d", kKeyFile, "/srv/\xff.img", "img"}) == 0);
  REQUIRE(cli.run({"status", "--json", "img"}) == 0);
  CHECK_THAT(cli.out.str(), Catch::Contains("\"loop\":\"/srv/\\udcff.img\""));
}

TEST_CASE("cli open: a second mapping over a device in use needs --shared", "[cli]") {
  Cli cli;
  cli.stdin_tty = true;
  REQUIRE(cli.run({"open", "-q", "/dev/ram0", "first"}) == 0);
  cli.devices.users["/dev/ram0"] = "device-mapper mapping first (dm-0)";  // as sysfs shows it
  const int prompts = cli.prompts;
  CHECK(cli.run({"open", "-q", "/dev/ram0", "second"}) == 5);
  CHECK(cli.prompts == prompts);  // refused before the passphrase
  CHECK_FALSE(cli.kernel.mappings.contains("second"));
  CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: Cannot use device /dev/ram0 which is in "
                                              "use (held by device-mapper mapping first") &&
                                Catch::Contains("--shared"));
  REQUIRE(cli.run({"open", "-q", "--shared", "/dev/ram0", "second"}) == 0);
  CHECK(cli.kernel.mappings.contains("second"));
}

TEST_CASE("cli attach: one line's fields, and a second start succeeds without the key",
          "[cli][boot]") {
  Cli cli;
  const std::string options = "cipher=aes-xts-plain64,size=256,sector-size=65536";
  REQUIRE(cli.run({"attach", "vol", "/dev/ram0", kKeyFile, options}) == 0);
  CHECK(cli.out.str() == "vol: /dev/mapper/vol (/dev/dm-0)\n");
  CHECK(cli.err.str().empty());
  CHECK(std::string(cli.kernel.mappings.at("vol").line.params.view()) ==
        "aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 0 1 sector_size:65536");
  REQUIRE(cli.run({"attach", "vol", "/dev/ram0", "/nonexistent", options}) == 0);
  CHECK(cli.out.str() ==
        "vol: /dev/mapper/vol (/dev/dm-0), already active as lbscrypttab describes it\n");
  CHECK(cli.kernel.creates == 1);
  CHECK(cli.run({"attach", "vol", "/dev/ram0", kKeyFile, options + ",bogus"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: unknown option 'bogus': see lbscrypttab(5) for the options lbscrypt takes\n");
  cli.devices.users["/dev/ram0"] = "device-mapper mapping vol (dm-0)";
  CHECK(cli.run({"attach", "other", "/dev/ram0", kKeyFile, options}) == lbscrypt::cli::kExitBusy);
  CHECK(cli.kernel.creates == 1);
}

TEST_CASE("cli generate-units: no lbscrypttab is no error, a bad line is", "[cli][boot]") {
  Cli cli;
  const auto dir =
      std::filesystem::temp_directory_path() / ("lbscrypt-cli-units-" + std::to_string(getpid()));
  CHECK(cli.run({"generate-units", "--tab", "/etc/lbscrypttab-absent", dir.string()}) == 0);
  CHECK_FALSE(std::filesystem::exists(dir));
  cli.files["/t"] =
      "ok /dev/vdb /k cipher=aes-xts-plain64,size=256\n"
      "bad /dev/vdc /k cipher=aes-xts-plain64,size=256,bogus\n";
  std::filesystem::create_directories(dir);
  CHECK(cli.run({"generate-units", "--tab", "/t", dir.string(), "/early", "/late"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt-generator: /t:2: bad: unknown option 'bogus': see "
        "lbscrypttab(5) for the options lbscrypt takes (the line is skipped)\n");
  CHECK(std::filesystem::exists(dir / "lbscrypt@ok.service"));
  CHECK_FALSE(std::filesystem::exists(dir / "lbscrypt@bad.service"));
  std::ifstream unit(dir / "lbscrypt@ok.service");
  std::ostringstream text;
  text << unit.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("ExecStart=/usr/sbin/lbscrypt attach 'ok'"));
  std::filesystem::remove_all(dir);
}

namespace {

const std::string kTornSdb =
    "lbscrypt: warning: a power failure can tear a 65536-byte sector on /dev/sdb: its physical "
    "block is 4096 bytes and it has no atomic writes "
    "(dm-crypt-lbs(4), \"Torn writes\")\n";

// /dev/sdb: 4096-byte physical blocks, no atomic writes; /dev/sdc: 4096-byte blocks that
// writes 4 KiB to 1 MiB atomically.
void add_disks(Cli &cli) {
  cli.devices.sizes["/dev/sdb"] = 64ULL * 1024 * 1024;
  cli.devices.sizes["/dev/sdc"] = 64ULL * 1024 * 1024;
  lbscrypt::WriteGeometry plain;
  plain.physical_block = 4096;
  cli.devices.geometries["/dev/sdb"] = plain;
  lbscrypt::WriteGeometry atomic = plain;
  atomic.atomic_unit_min = 4096;
  atomic.atomic_unit_max = 1048576;
  atomic.atomic_max = 1048576;
  cli.devices.geometries["/dev/sdc"] = atomic;
}

}  // namespace

TEST_CASE("cli check --device: the torn-sector warning on stderr only, stdout as without it",
          "[cli][torn]") {
  Cli cli;
  add_disks(cli);
  REQUIRE(cli.run({"check", "--sector-size", "65536"}) == 0);
  const std::string report = cli.out.str();
  CHECK(cli.err.str().empty());

  REQUIRE(cli.run({"check", "--sector-size", "65536", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.out.str() == report);
  CHECK(cli.err.str() == kTornSdb);
  // without --sector-size: the largest plain size here (the fake kernel's 65536)
  REQUIRE(cli.run({"check", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.err.str() == kTornSdb);
  // JSON is unchanged; the warning stays on stderr
  REQUIRE(cli.run({"check", "--json", "--sector-size", "65536"}) == 0);
  const std::string json = cli.out.str();
  REQUIRE(cli.run({"check", "--json", "--sector-size", "65536", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.out.str() == json);
  CHECK(cli.err.str() == kTornSdb);

  // no warning: 4096 on 4096, LUKS's largest (4096), or a device that writes 64K atomically
  REQUIRE(cli.run({"check", "--sector-size", "4096", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"check", "--type", "luks", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"check", "--sector-size", "65536", "--device", "/dev/sdc"}) == 0);
  CHECK(cli.err.str().empty());
  // a size that is refused gets its refusal, not a warning about tearing
  cli.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
  CHECK(cli.run({"check", "--sector-size", "65536", "--device", "/dev/sdb"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str().empty());
}

TEST_CASE("cli check --device: -q drops the warning, and a device that is not one is refused",
          "[cli][torn]") {
  Cli cli;
  add_disks(cli);
  REQUIRE(cli.run({"check", "-q", "--sector-size", "65536", "--device", "/dev/sdb"}) == 0);
  CHECK(cli.err.str().empty());
  CHECK_THAT(cli.out.str(), Catch::Contains("sector size 65536 (plain):     loads"));

  CHECK(cli.run({"check", "--device", "/dev/nothing"}) == lbscrypt::cli::kExitDevice);
  CHECK(cli.err.str() == "lbscrypt: Device /dev/nothing does not exist\n");
  CHECK(cli.out.str().empty());
  cli.devices.regular_files["/srv/disk.img"] = true;
  CHECK(cli.run({"check", "--device", "/srv/disk.img"}) == lbscrypt::cli::kExitDevice);
  CHECK(cli.err.str() ==
        "lbscrypt: --device /srv/disk.img is a regular file, not a block device: name the block "
        "device a mapping would sit on\n");
}

TEST_CASE("cli open and status: the torn-sector warning on stderr, stdout unchanged",
          "[cli][torn]") {
  Cli cli;
  add_disks(cli);
  REQUIRE(cli.run({"open", "--sector-size", "65536", "-d", kKeyFile, "/dev/sdb", "big"}) == 0);
  CHECK(cli.out.str() == "big: /dev/mapper/big (/dev/dm-0), 131072 sectors, sector size 65536\n");
  CHECK(cli.err.str() == kTornSdb);
  // opened already as asked: the same warning after the note
  REQUIRE(cli.run({"open", "--sector-size", "65536", "/dev/sdb", "big"}) == 0);
  CHECK(cli.err.str() == kTornSdb + "lbscrypt: big is already active as requested; nothing done\n");

  REQUIRE(cli.run({"status", "big"}) == 0);
  CHECK(cli.err.str() == kTornSdb);
  CHECK(cli.out.str().find("tear") == std::string::npos);
  CHECK(cli.out.str().find("warning") == std::string::npos);
  REQUIRE(cli.run({"status", "--json", "big"}) == 0);
  CHECK(cli.err.str() == kTornSdb);
  CHECK_FALSE(nlohmann::json::parse(cli.out.str()).contains("warning"));
  REQUIRE(cli.run({"-q", "status", "big"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"close", "big"}) == 0);

  // -q on open; 4096 on the same disk; 64K on a disk that writes it atomically: no warning
  REQUIRE(cli.run({"open", "-q", "--sector-size", "65536", "-d", kKeyFile, "/dev/sdb", "q"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"open", "--sector-size", "4096", "-d", kKeyFile, "/dev/sdb", "small"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"status", "small"}) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"open", "--sector-size", "65536", "-d", kKeyFile, "/dev/sdc", "at"}) == 0);
  CHECK(cli.err.str().empty());
  // ... unless the mapping starts off a sector boundary of the disk (a table dmsetup loaded)
  REQUIRE(cli.run({"status", "at"}) == 0);
  CHECK(cli.err.str().empty());
  cli.kernel.mappings.at("at").line.params = lbscrypt::SecretBuffer();
  cli.kernel.mappings.at("at").line.params.append("aes-xts-plain64 " + kKeyHex +
                                                  " 0 /dev/sdc 8 1 sector_size:65536");
  REQUIRE(cli.run({"status", "at"}) == 0);
  CHECK(cli.err.str() ==
        "lbscrypt: warning: a power failure can tear a 65536-byte sector on /dev/sdc: its "
        "physical block is 4096 bytes and it writes at most 1048576 bytes atomically, but the "
        "mapping starts at byte 4096 of the disk, not a multiple of 65536 "
        "(dm-crypt-lbs(4), \"Torn writes\")\n");
}

TEST_CASE("cli table: --size 0 is the rest of the device, as cryptsetup's", "[cli]") {
  Cli cli;
  REQUIRE(cli.run({"table", "--size", "0", "-o", "8", "--sector-size", "4096", "-d", kKeyFile,
                   "/dev/ram0"}) == 0);
  CHECK(cli.out.str() ==
        "0 131064 crypt aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 8 1 sector_size:4096\n");
  // For another machine there is no device to measure: a length must be given.
  CHECK(cli.run({"table", "--assume-version", "1.30.0", "--assume-page-size", "65536", "--size",
                 "0", "-d", kKeyFile, "/dev/vdb"}) == lbscrypt::cli::kExitDevice);
  CHECK(cli.out.str().empty());
  CHECK(cli.err.str() ==
        "lbscrypt: Device /dev/vdb does not exist, and without --size (or with --size 0) the "
        "mapping is the rest of it: give --size in sectors for a table meant for another "
        "machine\n");
}

TEST_CASE("cli table: --iv-large-sectors at sector size 512 is refused, as cryptsetup's", "[cli]") {
  Cli cli;
  CHECK(cli.run({"table", "--iv-large-sectors", "-d", kKeyFile, "/dev/ram0"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.out.str().empty());
  CHECK(cli.err.str() ==
        "lbscrypt: --iv-large-sectors counts the IV in sector-size units and needs "
        "--sector-size above 512: drop it, or give the sector size\n");
  CHECK(cli.run({"table", "--iv-large-sectors", "--sector-size", "4096", "-d", kKeyFile,
                 "/dev/ram0"}) == 0);
}

TEST_CASE("cli table: tables a kernel refuses are refused offline too", "[cli]") {
  Cli cli;
  const std::vector<std::string> offline{
      "table", "--assume-version", "1.30.0", "--assume-page-size", "65536", "-d", kKeyFile};
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = offline;
    args.insert(args.end(), extra.begin(), extra.end());
    return cli.run(args);
  };
  CHECK(run({"--size", "8", "--offset", "18446744073709551608", "/dev/vdb"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("ends beyond"));
  CHECK(run({"--size", "8", "-s", "8", "/dev/vdb"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("a 1-byte key for XTS"));
  CHECK(run({"--size", "8", "-c", "aes-xts-foo", "/dev/vdb"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("unknown IV mode 'foo'"));
  CHECK(run({"--size", "8", "-c", "AES-XTS-PLAIN64", "/dev/vdb"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("names are lower case"));
  CHECK(run({"--size", "8", "--", "-v"}) == lbscrypt::cli::kExitInvalid);
  CHECK_THAT(cli.err.str(), Catch::Contains("device '-v' is neither MAJOR:MINOR"));
  CHECK(cli.out.str().empty());
}

TEST_CASE("cli table: a relative device path that is here goes into the table absolute", "[cli]") {
  Cli cli;
  cli.devices.sizes["ram0"] = 64ULL * 1024 * 1024;
  REQUIRE(cli.run({"table", "--size", "8", "-d", kKeyFile, "ram0"}) == 0);
  const std::string path = std::filesystem::absolute("ram0").lexically_normal().string();
  CHECK(cli.out.str() == "0 8 crypt aes-xts-plain64 " + kKeyHex + " 0 " + path + " 0\n");
}

TEST_CASE("cli: an unknown command is refused in one line that names the commands, exit 1",
          "[cli]") {
  Cli cli;
  const std::string commands =
      "give one of table, open, close, detach, status, check, matrix, benchmark, tab, "
      "generate-units, "
      "attach, reencrypt, seal (lbscrypt --help says what each does)\n";
  CHECK(cli.run({"frobnicate", "/dev/ram0"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() == "lbscrypt: 'frobnicate' is not a command: " + commands);
  CHECK(cli.out.str().empty());
  // after a flag every command takes; a misspelt command is no command either
  CHECK(cli.run({"-q", "stauts", "x"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() == "lbscrypt: 'stauts' is not a command: " + commands);
  CHECK(cli.run({}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() == "lbscrypt: no command given: " + commands);
  CHECK(cli.run({"-v"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() == "lbscrypt: no command given: " + commands);
  // an unknown option and no command: the option is what is named
  CHECK(cli.run({"--bogus"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: The following argument was not expected: --bogus (see lbscrypt --help)\n");
  CHECK(cli.out.str().empty());
  CHECK(cli.kernels_made == 0);
}

TEST_CASE("cli numbers: every command's number options are refused while parsing", "[cli]") {
  Cli cli;
  const std::vector<std::vector<std::string>> lines = {
      {"check", "--sector-size", "65536x"},
      {"check", "--assume-page-size", "-65536"},
      {"check", "--sector-size", "18446744073709551616"},
      {"benchmark", "--bytes", "1e6"},
      {"benchmark", "--key-size", "4294967552"},
      {"open", "--size", "-8", "-d", kKeyFile, "/dev/ram0", "x"},
      {"open", "--sector-size", "65536 ", "-d", kKeyFile, "/dev/ram0", "x"},
  };
  for (const auto &line : lines) {
    CAPTURE(line);
    CHECK(cli.run(line) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.out.str().empty());
    CHECK_THAT(cli.err.str(), Catch::StartsWith("lbscrypt: " + line[1] + " '" + line[2] +
                                                "' is not a number: give decimal digits only"));
  }
  // refused before any command ran: no kernel was asked, nothing was created
  CHECK(cli.kernels_made == 0);
  CHECK(cli.kernel.creates == 0);
  // digits with leading zeros are decimal
  REQUIRE(cli.run({"table", "--size", "010", "-d", kKeyFile, "/dev/ram0"}) == 0);
  CHECK(cli.out.str() == "0 10 crypt aes-xts-plain64 " + kKeyHex + " 0 /dev/ram0 0\n");
}

TEST_CASE("cli open and attach: the same warnings for the same volume", "[cli][torn][boot]") {
  Cli cli;
  add_disks(cli);
  // One volume both ways: /dev/sdb, 64K sectors (they can tear there), a key file of mode 0400.
  const auto open_line = [](const std::string &disk) {
    return std::vector<std::string>{"open",  "-c", "aes-xts-plain64", "-s", "256", "--sector-size",
                                    "65536", "-d", kKeyFile,          disk, "vol"};
  };
  const auto attach_line = [](const std::string &disk) {
    return std::vector<std::string>{"attach", "vol", disk, kKeyFile,
                                    "cipher=aes-xts-plain64,size=256,sector-size=65536"};
  };
  REQUIRE(cli.run(open_line("/dev/sdb")) == 0);
  CHECK(cli.err.str() == kTornSdb);
  const std::string params(cli.kernel.mappings.at("vol").line.params.view());
  REQUIRE(cli.run({"close", "vol"}) == 0);
  REQUIRE(cli.run(attach_line("/dev/sdb")) == 0);
  CHECK(cli.err.str() == kTornSdb);
  CHECK(std::string(cli.kernel.mappings.at("vol").line.params.view()) == params);

  // found active as asked: the warning again, from both (open adds its note after it)
  const int creates = cli.kernel.creates;
  REQUIRE(cli.run(attach_line("/dev/sdb")) == 0);
  CHECK(cli.err.str() == kTornSdb);
  REQUIRE(cli.run(open_line("/dev/sdb")) == 0);
  CHECK(cli.err.str() == kTornSdb + "lbscrypt: vol is already active as requested; nothing done\n");
  CHECK(cli.kernel.creates == creates);

  // -q silences it for both
  auto quiet_attach = attach_line("/dev/sdb");
  quiet_attach.insert(quiet_attach.begin(), "-q");
  REQUIRE(cli.run(quiet_attach) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"close", "vol"}) == 0);
  REQUIRE(cli.run(quiet_attach) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"close", "vol"}) == 0);

  // a disk that writes a 64K sector atomically: neither warns
  REQUIRE(cli.run(open_line("/dev/sdc")) == 0);
  CHECK(cli.err.str().empty());
  REQUIRE(cli.run({"close", "vol"}) == 0);
  REQUIRE(cli.run(attach_line("/dev/sdc")) == 0);
  CHECK(cli.err.str().empty());
}

TEST_CASE("cli reencrypt: --pbkdf-force-iterations below 1000, or with --resume, is refused",
          "[cli][reencrypt]") {
  Cli cli;
  CHECK(cli.run({"reencrypt", "--key-file", kKeyFile, "--new-sector-size", "4096",
                 "--pbkdf-force-iterations", "999", "--state", "/nonexistent-lbscrypt/s.state",
                 "/dev/ram0"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: --pbkdf-force-iterations 999 is below 1000: give 1000 or more\n");
  CHECK(cli.run({"reencrypt", "--resume", "--key-file", kKeyFile, "--pbkdf-force-iterations",
                 "5000", "--state", "/nonexistent-lbscrypt/s.state"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: --pbkdf-force-iterations sets a new run's key verifiers; the state file "
        "holds them: drop it with --resume\n");
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE("cli reencrypt: the arguments' refusals, each one line and exit 1, in their order",
          "[cli][reencrypt]") {
  Cli cli;
  const std::string state = "/nonexistent-lbscrypt/s.state";
  const auto refused = [&cli](std::vector<std::string> args, const std::string &message) {
    args.insert(args.begin(), "reencrypt");
    CHECK(cli.run(args) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.out.str().empty());
    CHECK(cli.err.str() == "lbscrypt: " + message + "\n");
  };
  refused({"--assume-version", "1.30.0", "--key-file", kKeyFile, "--state", state, "/dev/ram0"},
          "--assume-version and --assume-page-size are for table and check; reencrypt always "
          "asks the running kernel");
  refused({"--abort", "--key-file", kKeyFile, "--state", state},
          "--abort puts an online run's mapping right: give --active-name NAME and the run's "
          "--state");
  refused({"--resume", "--key-file", kKeyFile, "--state", state, "/dev/ram0"},
          "--resume takes the device and the parameters from the state file: give only --state "
          "and the keys");
  refused({"--key-file", kKeyFile, "--state", state},
          "give the volume's device, or --active-name NAME for an open one (or --resume)");
  refused({"--keep-key", "--key-file", kKeyFile, "--new-key-file", kKeyFile, "--state", state,
           "/dev/ram0"},
          "--keep-key keeps the old key: drop the --new-key options");
  // standard input is no terminal here: a key without a file comes from it
  refused({"--new-sector-size", "4096", "--state", state, "/dev/ram0"},
          "both keys would be read from standard input: give at least one with --key-file or "
          "--new-key-file");
  // the kernel's session comes before the request's own checks
  refused({"--target", "no/target", "--new-key-size", "100", "--key-file", kKeyFile,
           "--new-key-file", kKeyFile, "--state", state, "/dev/ram0"},
          "--target 'no/target' is not a device-mapper target name: give 1 to 15 letters, digits, "
          "'_' or '-' (crypt, or crypt_lbs beside the stock module)");
  refused({"--new-key-size", "100", "--key-file", kKeyFile, "--new-key-file", kKeyFile, "--state",
           state, "/dev/ram0"},
          "--new-key-size 100 is not a whole number of bytes");
  // a build without reencrypt's I/O (this test's services give none)
  refused({"--key-file", kKeyFile, "--new-key-file", kKeyFile, "--new-sector-size", "4096",
           "--state", state, "/dev/ram0"},
          "reencrypt is not available in this build");
  CHECK(cli.kernel.creates == 0);
}

TEST_CASE(
    "cli tab list and attach: a volume being reencrypted is listed with a warning, and "
    "attach refuses it",
    "[cli][boot][reencrypt]") {
  Cli cli;
  const lbscrypt::test::TempDir dir;
  const auto registry = dir.path / "reencrypt";
  cli.registry = registry;
  cli.devices.sizes["/nonexistent-lbscrypt/vdz"] = 64ULL * 1024 * 1024;
  const std::string options = "cipher=aes-xts-plain64,size=256,sector-size=4096";
  cli.files["/t"] = "mid /nonexistent-lbscrypt/vdz " + kKeyFile + " " + options +
                    ",x-initrd.attach\n" + "ram /dev/ram0 " + kKeyFile + " " + options + "\n";
  REQUIRE(cli.run({"tab", "list", "--tab", "/t"}) == 0);
  const std::string records = cli.out.str();
  CHECK(cli.err.str().empty());
  REQUIRE(lbscrypt::add_entry(
              registry, lbscrypt::RegistryEntry{1, "/nonexistent-lbscrypt/vdz",
                                                "path-/nonexistent-lbscrypt/vdz", "/srv/vdz.state",
                                                "0123456789abcdef0123456789abcdef"})
              .ok());
  const std::string warning =
      "lbscrypt: warning: mid: /nonexistent-lbscrypt/vdz is being reencrypted (state "
      "/srv/vdz.state): attach refuses it until 'lbscrypt reencrypt --resume --state "
      "/srv/vdz.state ...' has finished\n";
  CHECK(cli.run({"tab", "list", "--tab", "/t"}) == 0);
  CHECK(cli.out.str() == records);  // the records as before: scripts read them
  CHECK(cli.err.str() == warning);
  CHECK(cli.run({"tab", "list", "--tab", "/t", "--initrd"}) == 0);
  CHECK(cli.err.str() == warning);
  // --registry names another: an empty one
  CHECK(cli.run({"tab", "list", "--tab", "/t", "--registry", (dir.path / "none").string()}) == 0);
  CHECK(cli.err.str().empty());
  // attach refuses before the key (the key file would do: it is never read)
  CHECK(cli.run({"attach", "mid", "/nonexistent-lbscrypt/vdz", kKeyFile, options}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: /nonexistent-lbscrypt/vdz is being reencrypted (state /srv/vdz.state): "
        "finish with 'lbscrypt reencrypt --resume --state /srv/vdz.state ...' before opening "
        "it\n");
  CHECK(cli.kernel.creates == 0);
  CHECK(cli.run({"open", "--key-file", kKeyFile, "/nonexistent-lbscrypt/vdz", "mid"}) ==
        lbscrypt::cli::kExitInvalid);
  CHECK(cli.kernel.creates == 0);
  CHECK(cli.run({"attach", "ram", "/dev/ram0", kKeyFile, options}) == 0);
  CHECK(cli.kernel.creates == 1);
  // a damaged entry: tab list lists, says so, and exits 1 (the initramfs hook then fails)
  { std::ofstream(registry / "wwid-torn.json") << "["; }
  CHECK(cli.run({"tab", "list", "--tab", "/t"}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.out.str() == records);
  CHECK_THAT(
      cli.err.str(),
      Catch::StartsWith("lbscrypt: " + (registry / "wwid-torn.json").string() + ": not JSON ("));
}

TEST_CASE("cli reencrypt: --new-tpm2-credential is the new key's source, never a clear file",
          "[cli][reencrypt][sealed]") {
  Cli cli;
  const std::string state = "/nonexistent-lbscrypt/s.state";
  const auto refused = [&cli](std::vector<std::string> args, const std::string &message) {
    args.insert(args.begin(), "reencrypt");
    CHECK(cli.run(args) == lbscrypt::cli::kExitInvalid);
    CHECK(cli.err.str() == "lbscrypt: " + message + "\n");
  };
  const std::string cred = "/etc/lbscrypt/data.new.cred";
  refused({"--key-file", kKeyFile, "--new-tpm2-credential", cred, "--new-key-file", kKeyFile,
           "--state", state, "/dev/ram0"},
          "--new-tpm2-credential is the new key's source: drop --new-key-file, "
          "--new-keyfile-offset and --new-keyfile-size");
  refused({"--key-file", kKeyFile, "--new-tpm2-credential", cred, "--new-keyfile-size", "64",
           "--state", state, "/dev/ram0"},
          "--new-tpm2-credential is the new key's source: drop --new-key-file, "
          "--new-keyfile-offset and --new-keyfile-size");
  refused({"--key-file", kKeyFile, "--new-sealed-passphrase", "--state", state, "/dev/ram0"},
          "--new-sealed-passphrase says what a --new-tpm2-credential holds: give the credential "
          "file too");
  refused({"--key-file", kKeyFile, "--new-tpm2-credential", cred, "--new-hash", "sha512", "--state",
           state, "/dev/ram0"},
          "--new-hash hashes a passphrase, and the new credential holds a key: drop --new-hash, "
          "or give --new-sealed-passphrase if it holds a passphrase");
  refused({"--key-file", kKeyFile, "--keep-key", "--new-tpm2-credential", cred, "--state", state,
           "/dev/ram0"},
          "--keep-key keeps the old key: drop the --new-key options");
  // Neither key from standard input: both sealed (standard input is no terminal here), so the
  // command goes on to the next refusal.
  refused({"--tpm2-credential", "/etc/lbscrypt/data.cred", "--new-tpm2-credential", cred,
           "--new-sector-size", "4096", "--state", state, "/dev/ram0"},
          "reencrypt is not available in this build");
  CHECK(cli.kernel.creates == 0);

  // The steps: the new key unsealed from the credential under its own name (the step serves
  // a run without a sealed line), a passphrase hashed with --new-hash; --update-tab hands the
  // credential to the library.
  lbscrypt::cli::ReencryptArgs args;
  args.old_side.key.key_file = kKeyFile;
  args.new_tpm2_credential = cred;
  args.update_tab = true;
  args.state = state;
  std::vector<lbscrypt::SealedKey> asked;
  std::string secret(64, '\x5a');
  lbscrypt::cli::Services services;
  services.attach.unseal = [&](const lbscrypt::SealedKey &key) {
    asked.push_back(key);
    return lbscrypt::Result<lbscrypt::SecretBuffer>(
        lbscrypt::SecretBuffer(secret.data(), secret.size()));
  };
  const lbscrypt::cli::CommonFlags flags;
  std::ostringstream err;
  lbscrypt::SecretBuffer old_copy;
  lbscrypt::ReencryptSteps steps;
  lbscrypt::cli::add_key_steps(steps, args, flags, services, err, old_copy);
  const auto key = steps.new_key(64);
  REQUIRE(key.ok());
  CHECK(key->view() == secret);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].credential == cred);
  CHECK_FALSE(asked[0].name);
  CHECK_FALSE(asked[0].tpm2_device);
  args.new_sealed_passphrase = true;
  args.new_hash = "sha256";
  secret = "correct horse";
  const auto hashed = steps.new_key(32);
  REQUIRE(hashed.ok());
  // sha256("correct horse"), as table hashes that passphrase (the --tpm2-credential test)
  CHECK(lbscrypt::to_hex(*hashed).view() ==
        "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631");
  const auto request = lbscrypt::cli::reencrypt_request(args, services);
  REQUIRE(request.ok());
  REQUIRE(request->update_tab);
  CHECK(request->update_tab->new_key == lbscrypt::TabUpdate::NewKey::sealed);
  CHECK(request->update_tab->new_key_file == cred);
  CHECK(request->update_tab->sealed_passphrase);
  CHECK(request->update_tab->new_hash == "sha256");
  REQUIRE(request->update_tab->unseal);
  CHECK(std::find(request->key_files.begin(), request->key_files.end(),
                  std::filesystem::path(cred)) != request->key_files.end());
  CHECK(err.str().empty());
}

TEST_CASE("cli reencrypt --active-name: online mode needs no environment variable",
          "[cli][reencrypt]") {
  // Online mode was refused unless LBSCRYPT_EXPERIMENTAL_ONLINE=1 until its guest test
  // (tests/guest/reencrypt-online.sh) had passed on a kernel. Now the command goes to the live
  // mapping and checks it against the parameters given: lbscrypt-reencrypt.rst, "Online": a
  // difference is refused naming the field and both values, before a byte is written.
  REQUIRE(std::getenv("LBSCRYPT_EXPERIMENTAL_ONLINE") == nullptr);
  Cli cli;
  cli.reencrypt.make_io = [](lbscrypt::Kernel &, const std::string &) {
    return [](const lbscrypt::ReencryptState &, const lbscrypt::SecretBuffer &,
              const lbscrypt::SecretBuffer &)
               -> lbscrypt::Result<std::unique_ptr<lbscrypt::DeviceReencryptIo>> {
      return lbscrypt::make_error(lbscrypt::Errc::kernel, "no private mappings in this test");
    };
  };
  cli.reencrypt.make_prober = [] { return std::unique_ptr<lbscrypt::FilesystemProber>{}; };
  const lbscrypt::test::TempDir dir;
  const std::string state = (dir.path / "vol.state").string();
  REQUIRE(cli.run({"open", "--key-file", kKeyFile, "--sector-size", "4096", "/dev/ram0", "vol"}) ==
          0);
  const auto creates = cli.kernel.creates;
  CHECK(cli.run({"reencrypt", "--active-name", "vol", "--key-file", kKeyFile, "--sector-size",
                 "512", "--new-key-file", kKeyFile, "--new-sector-size", "4096", "--state",
                 state}) == lbscrypt::cli::kExitInvalid);
  CHECK(cli.err.str() ==
        "lbscrypt: the active mapping vol has sector size 4096, not the 512 given: give the "
        "parameters vol was opened with (nothing was written)\n");
  CHECK(cli.kernel.creates == creates);
  CHECK(!std::filesystem::exists(state));
}

TEST_CASE("cli generate-units: lbscrypt=no on the kernel command line writes no unit",
          "[cli][boot]") {
  Cli cli;
  const lbscrypt::test::TempDir dir;
  cli.files["/t"] = "ok /dev/vdb /k cipher=aes-xts-plain64,size=256\n";
  cli.files["/cmdline"] = "root=/dev/vda1 lbscrypt=no\n";
  CHECK(cli.run({"generate-units", "--tab", "/t", "--cmdline", "/cmdline", dir.path.string()}) ==
        0);
  CHECK(cli.err.str().empty());
  CHECK(std::filesystem::is_empty(dir.path));
  // rd.lbscrypt=no: in the initramfs only
  cli.files["/cmdline"] = "rd.lbscrypt=no";
  CHECK(cli.run({"generate-units", "--tab", "/t", "--cmdline", "/cmdline", dir.path.string()}) ==
        0);
  CHECK(std::filesystem::exists(dir.path / "lbscrypt@ok.service"));
  std::filesystem::remove_all(dir.path / "lbscrypt@ok.service");
  cli.files[lbscrypt::cli::kInitrdRelease] = "NAME=initramfs\n";
  CHECK(cli.run({"generate-units", "--tab", "/t", "--cmdline", "/cmdline", dir.path.string()}) ==
        0);
  CHECK_FALSE(std::filesystem::exists(dir.path / "lbscrypt@ok.service"));
  // a value that is not a boolean: said, and the volumes get their units
  cli.files["/cmdline"] = "lbscrypt=perhaps";
  CHECK(cli.run({"generate-units", "--tab", "/t", "--cmdline", "/cmdline", dir.path.string()}) ==
        0);
  CHECK(cli.err.str() ==
        "lbscrypt-generator: the kernel command line's lbscrypt=perhaps is not "
        "yes or no: ignored\n");
  CHECK(std::filesystem::exists(dir.path / "lbscrypt@ok.service"));
}

namespace {

// seal's world: a sysfs whose PCR 7 was never extended and PCR 0 was, a /dev with tpmrm0, and
// a systemd-creds that records what it was given.
struct SealRig {
  lbscrypt::test::TempDir dir;
  Cli cli;
  std::vector<std::vector<std::string>> calls;
  std::vector<std::string> inputs;
  int status = 0;

  SealRig() {
    const auto pcrs = dir.path / "sys/class/tpm/tpm0/pcr-sha256";
    std::filesystem::create_directories(pcrs);
    std::ofstream(pcrs / "7") << std::string(64, '0') << "\n";
    std::ofstream(pcrs / "0") << std::string(63, '0') << "1\n";
    std::filesystem::create_directories(dir.path / "dev");
    std::ofstream(dir.path / "dev/tpmrm0") << "";
    cli.has_program = [](std::string_view program) { return program == "systemd-creds"; };
    cli.run_child = [this](const std::vector<std::string> &argv,
                           const lbscrypt::SecretBuffer *input,
                           lbscrypt::SecretBuffer *) -> lbscrypt::Result<lbscrypt::ChildOutcome> {
      calls.push_back(argv);
      inputs.emplace_back(input != nullptr ? std::string(input->view()) : "");
      return lbscrypt::ChildOutcome{status, status == 0 ? "" : "Failed to seal: no TPM2"};
    };
  }

  int seal(std::vector<std::string> args) {
    args.insert(args.begin(), {"seal", "--sysfs", (dir.path / "sys").string(), "--dev",
                               (dir.path / "dev").string()});
    return cli.run(args);
  }
  [[nodiscard]] std::string output() const { return (dir.path / "data.cred").string(); }
};

}  // namespace

TEST_CASE("cli seal: a fresh random key through systemd-creds, with the PCR warning", "[cli]") {
  SealRig rig;
  REQUIRE(rig.seal({"--random", "64", rig.output()}) == 0);
  REQUIRE(rig.calls.size() == 1);
  CHECK(rig.calls[0] == std::vector<std::string>{"systemd-creds", "encrypt", "--with-key=tpm2",
                                                 "--tpm2-pcrs=7", "--name=data", "-",
                                                 rig.output()});
  CHECK(rig.inputs[0].size() == 64);
  CHECK(rig.cli.err.str() ==
        "lbscrypt: warning: PCR 7 was never extended: a policy on it protects nothing\n");
  CHECK(rig.cli.out.str() == rig.output() +
                                 ": sealed to this TPM2 (PCRs 7) as credential data; "
                                 "lbscrypttab: key " +
                                 rig.output() + ", options tpm2-device=auto\n");
  // PCR 0 was extended: no warning; -q drops the warning.
  REQUIRE(rig.seal({"--random", "32", "--tpm2-pcrs", "0", (rig.dir.path / "b.cred").string()}) ==
          0);
  CHECK(rig.cli.err.str().empty());
  CHECK(rig.calls[1][3] == "--tpm2-pcrs=0");
  REQUIRE(rig.seal({"-q", "--random", "32", (rig.dir.path / "c.cred").string()}) == 0);
  CHECK(rig.cli.err.str().empty());
}

TEST_CASE("cli seal: --name seals under the name of the line's credential it will replace",
          "[cli]") {
  SealRig rig;
  const std::string next = (rig.dir.path / "data.new.cred").string();
  REQUIRE(rig.seal({"-q", "--random", "64", "--name", "data", next}) == 0);
  REQUIRE(rig.calls.size() == 1);
  CHECK(rig.calls[0] == std::vector<std::string>{"systemd-creds", "encrypt", "--with-key=tpm2",
                                                 "--tpm2-pcrs=7", "--name=data", "-", next});
  CHECK(rig.cli.out.str() == next +
                                 ": sealed to this TPM2 (PCRs 7) as credential data, not its "
                                 "file's name: it unseals once renamed to " +
                                 rig.output() +
                                 " (reencrypt --update-tab --new-tpm2-credential renames it at "
                                 "the end)\n");
  // The file's own name given: the ordinary line.
  REQUIRE(rig.seal({"-q", "--random", "64", "--name", "b", (rig.dir.path / "b.cred").string()}) ==
          0);
  CHECK_THAT(rig.cli.out.str(), Catch::Contains("as credential b; lbscrypttab: key "));
  // A name systemd would refuse: one line, exit 1, nothing run or written.
  for (const std::string bad : {"a/b", "a:b", "..", "a b"}) {
    INFO(bad);
    CHECK(rig.seal({"--random", "64", "--name", bad, (rig.dir.path / "c.cred").string()}) == 1);
    CHECK_THAT(rig.cli.err.str(), Catch::StartsWith("lbscrypt: --name '"));
    CHECK_THAT(rig.cli.err.str(), Catch::EndsWith("is no credential name systemd takes: name it "
                                                  "with printable ASCII letters, digits and -._ "
                                                  "only, at most 255 bytes\n"));
  }
  CHECK(rig.calls.size() == 2);
  CHECK_FALSE(std::filesystem::exists(rig.dir.path / "c.cred"));
}

TEST_CASE("cli seal: a key file, or a passphrase typed twice", "[cli]") {
  SealRig rig;
  REQUIRE(rig.seal({"--key-file", kKeyFile, "--tpm2-pcrs", "0+7", rig.output()}) == 0);
  std::string key;
  for (int i = 0; i < 64; ++i) {
    key += static_cast<char>(i);
  }
  CHECK(rig.inputs.at(0) == key);
  CHECK(rig.calls.at(0)[3] == "--tpm2-pcrs=0+7");
  // The clear copies are the user's to remove; the tool says so, once, unless -q.
  CHECK(rig.cli.err.str() ==
        "lbscrypt: warning: PCR 7 was never extended: a policy on it protects nothing\n"
        "lbscrypt: warning: " +
            kKeyFile +
            " still holds the key in the clear, as does every initramfs image and backup made "
            "with it: keep a copy offline for recovery and remove it here, rebuild the images "
            "(update-initramfs -u -k all), and better, reencrypt the volume to a fresh sealed "
            "key (lbscrypt reencrypt --new-tpm2-credential)\n");
  rig.cli.err.str("");
  REQUIRE(rig.seal({"-q", "--key-file", kKeyFile, "--tpm2-pcrs", "0",
                    (rig.dir.path / "q.cred").string()}) == 0);
  CHECK(rig.cli.err.str().empty());
  SealRig typed;
  typed.cli.stdin_tty = true;
  REQUIRE(typed.seal({typed.output()}) == 0);
  CHECK(typed.inputs.at(0) == "correct horse");
  CHECK(typed.cli.prompts == 1);  // the fake reader stands for both prompts (verify=true)
  CHECK_THAT(typed.cli.out.str(),
             Catch::EndsWith("tpm2-device=auto,x-lbscrypt.sealed=passphrase\n"));
}

TEST_CASE("cli seal: refusals are one line, exit non-zero, run nothing", "[cli]") {
  SealRig rig;
  SECTION("no TPM2") {
    std::filesystem::remove(rig.dir.path / "dev/tpmrm0");
    CHECK(rig.seal({"--random", "64", rig.output()}) == lbscrypt::cli::kExitDevice);
    CHECK(rig.cli.err.str() == "lbscrypt: no TPM2 here: " + (rig.dir.path / "dev/tpmrm0").string() +
                                   " does not exist; load its driver (modprobe tpm_tis or "
                                   "tpm_crb) on a machine with a TPM2, or give a virtual machine "
                                   "one (swtpm)\n");
  }
  SECTION("no systemd-creds") {
    rig.cli.has_program = [](std::string_view) { return false; };
    CHECK(rig.seal({"--random", "64", rig.output()}) == lbscrypt::cli::kExitDevice);
    CHECK_THAT(rig.cli.err.str(),
               Catch::StartsWith("lbscrypt: systemd-creds is not installed: install systemd"));
  }
  SECTION("an existing credential: never replaced by a random key, else only with --force") {
    std::ofstream(rig.output()) << "old";
    CHECK(rig.seal({"--random", "64", rig.output()}) == lbscrypt::cli::kExitBusy);
    CHECK_THAT(rig.cli.err.str(), Catch::Contains("exists: a fresh random key would replace"));
    CHECK(rig.seal({"--random", "64", "--force", rig.output()}) == lbscrypt::cli::kExitBusy);
    CHECK(rig.seal({"--key-file", kKeyFile, rig.output()}) == lbscrypt::cli::kExitBusy);
    CHECK_THAT(rig.cli.err.str(), Catch::Contains("give --force to replace it"));
    CHECK(rig.calls.empty());
    CHECK(rig.seal({"--key-file", kKeyFile, "--force", rig.output()}) == 0);
    CHECK(rig.calls.size() == 1);
    CHECK_FALSE(rig.cli.out.str().empty());
    rig.calls.clear();
    rig.cli.out.str("");
  }
  SECTION("bad words") {
    CHECK(rig.seal({"--random", "64", "--key-file", kKeyFile, rig.output()}) == 1);
    CHECK(rig.seal({"--random", "64", "--tpm2-pcrs", "24", rig.output()}) == 1);
    CHECK(rig.seal({"--random", "8", rig.output()}) == 1);
    CHECK(rig.seal({"--random", "64", (rig.dir.path / "a:b.cred").string()}) == 1);
    CHECK(rig.seal({rig.output()}) == 1);  // no terminal, no source
    CHECK_THAT(rig.cli.err.str(), Catch::StartsWith("lbscrypt: no secret to seal: give --random"));
  }
  SECTION("systemd-creds refuses") {
    rig.status = 1;
    CHECK(rig.seal({"--random", "64", rig.output()}) == 1);
    CHECK_THAT(rig.cli.err.str(),
               Catch::EndsWith("lbscrypt: systemd-creds could not seal " + rig.output() +
                               " to the TPM2 (exit status 1): Failed to seal: no TPM2\n"));
    rig.calls.clear();
  }
  CHECK(rig.calls.empty());
  CHECK(rig.cli.out.str().empty());
}

TEST_CASE("cli: --tpm2-credential unseals the key for table and open", "[cli]") {
  Cli cli;
  std::vector<lbscrypt::SealedKey> asked;
  std::optional<std::string> secret;
  cli.unseal = [&](const lbscrypt::SealedKey &key) -> lbscrypt::Result<lbscrypt::SecretBuffer> {
    asked.push_back(key);
    if (!secret) {
      return lbscrypt::make_error(lbscrypt::Errc::key, "the TPM2 did not unseal it");
    }
    const std::string &text = *secret;
    return lbscrypt::SecretBuffer(text.data(), text.size());
  };
  const std::vector<std::string> offline{
      "table", "--assume-version", "1.30.0", "--assume-page-size", "4096", "--size", "8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = offline;
    args.insert(args.end(), extra.begin(), extra.end());
    return cli.run(args);
  };
  secret = std::string(32, '\x01');
  REQUIRE(with({"--tpm2-credential", "/etc/lbscrypt/data.cred", "/dev/vdb"}) == 0);
  CHECK(cli.out.str() ==
        "0 8 crypt aes-xts-plain64 "
        "0101010101010101010101010101010101010101010101010101010101010101 0 /dev/vdb 0\n");
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].credential == "/etc/lbscrypt/data.cred");
  // A sealed passphrase, hashed as a typed one.
  secret = "correct horse";
  REQUIRE(with({"--tpm2-credential", "/etc/lbscrypt/p.cred", "--sealed-passphrase", "--hash",
                "sha256", "/dev/vdb"}) == 0);
  CHECK(cli.out.str() ==
        "0 8 crypt aes-xts-plain64 "
        "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631 0 /dev/vdb 0\n");
  // Refusals: the TPM refuses (never a prompt), conflicting key sources.
  secret.reset();
  cli.stdin_tty = true;
  CHECK(with({"--tpm2-credential", "/etc/lbscrypt/data.cred", "/dev/vdb"}) == 1);
  CHECK(cli.err.str() == "lbscrypt: the TPM2 did not unseal it\n");
  CHECK(cli.prompts == 0);
  CHECK(with({"--tpm2-credential", "/c.cred", "--key-file", kKeyFile, "/dev/vdb"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::Contains("--tpm2-credential is the key's source"));
  CHECK(with({"--tpm2-credential", "/c.cred", "--hash", "sha256", "/dev/vdb"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::Contains("give --sealed-passphrase if it holds a passphrase"));
  CHECK(with({"--sealed-passphrase", "/dev/vdb"}) == 1);
  CHECK_THAT(cli.err.str(), Catch::Contains("give the credential file too"));
  CHECK(asked.size() == 3);
  CHECK(cli.prompts == 0);
}
