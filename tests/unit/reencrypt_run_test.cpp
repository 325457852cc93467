// SPDX-License-Identifier: GPL-2.0-only
// One offline run as `lbscrypt reencrypt` drives it (reencrypt_run.hpp): the order of checks,
// keys, state, registry and engine, on a fake kernel and devices, a volume in memory behind a
// fake cipher written here, and real state, journal and registry files in a temporary
// directory. The engine's power cuts are reencrypt_engine_test's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fakes.hpp"
#include "lbscrypt/reencrypt_run.hpp"

using lbscrypt::CryptSide;
using lbscrypt::EngineOutcome;
using lbscrypt::Errc;
using lbscrypt::FilesystemProbe;
using lbscrypt::ReencryptRequest;
using lbscrypt::ReencryptState;
using lbscrypt::ReencryptSteps;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;
using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t kRunTestBytes = 256 * 1024ULL;
constexpr std::uint64_t kRunTestHotzone = 64 * 1024ULL;

// The fake cipher: byte j of the sector numbered n (in its own sector size's units) under key
// byte k is XORed with (k + 31 n + j) mod 256. Encrypting and decrypting are the same.
void run_fake_crypt(const CryptSide &side, std::uint8_t key, std::span<std::uint8_t> bytes,
                    std::uint64_t position) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::uint64_t at = position + i;
    const std::uint64_t sector = at / side.sector_size;
    const std::uint64_t j = at % side.sector_size;
    bytes[i] ^= static_cast<std::uint8_t>((key + 31 * sector + j) % 256);
  }
}

// The volume in memory: what the device holds, read and written through the two sides.
struct Volume {
  Bytes raw = Bytes(kRunTestBytes);
  int made = 0;
  int closed = 0;
};

class MemoryIo final : public lbscrypt::DeviceReencryptIo {
 public:
  MemoryIo(Volume &volume, ReencryptState state, std::uint8_t old_key, std::uint8_t new_key)
      : volume_(volume), state_(std::move(state)), old_key_(old_key), new_key_(new_key) {
    ++volume_.made;
  }
  Result<void> read_raw(std::uint64_t position, std::span<std::uint8_t> out) override {
    std::copy_n(volume_.raw.begin() + static_cast<std::ptrdiff_t>(position), out.size(),
                out.begin());
    return {};
  }
  Result<void> write_raw(std::uint64_t position, std::span<const std::uint8_t> data) override {
    std::copy(data.begin(), data.end(),
              volume_.raw.begin() + static_cast<std::ptrdiff_t>(position));
    return {};
  }
  Result<void> read_old(std::uint64_t position, std::span<std::uint8_t> out) override {
    static_cast<void>(read_raw(position, out));
    run_fake_crypt(state_.old_side, old_key_, out, position);
    return {};
  }
  Result<void> write_new(std::uint64_t position, std::span<const std::uint8_t> data) override {
    Bytes cipher(data.begin(), data.end());
    run_fake_crypt(state_.new_side, new_key_, cipher, position);
    return write_raw(position, cipher);
  }
  Result<void> flush() override { return {}; }
  Result<void> close() override {
    ++volume_.closed;
    return {};
  }
  [[nodiscard]] std::string old_node() const override { return "/dev/dm-old"; }

 private:
  Volume &volume_;
  ReencryptState state_;
  std::uint8_t old_key_;
  std::uint8_t new_key_;
};

SecretBuffer run_key_of(std::uint8_t byte, std::size_t size) {
  const Bytes bytes(size, byte);
  return {bytes.data(), bytes.size()};
}

// A temporary directory (on the build tree's filesystem: /tmp may be a tmpfs, which the plan
// refuses for the state) with a stand-in device file, a state directory and a registry.
struct RunFixture {
  fs::path dir;
  std::string device;
  fs::path state;
  fs::path registry;
  fs::path sysfs;
  FakeKernel kernel;
  FakeBlockDevices devices;
  lbscrypt::Environment env;
  Volume volume;
  Bytes plain = Bytes(kRunTestBytes);
  std::optional<FilesystemProbe> probe = FilesystemProbe{"ext4", 4096};
  std::uint8_t old_key = 0x11;
  std::uint8_t new_key = 0x77;
  std::uint8_t given_new_key = 0x77;  // what the user types on --resume
  int keys_asked = 0;
  bool stop_after_first = false;
  int hotzones_seen = 0;

  RunFixture() {
    dir = fs::current_path() / ("reencrypt-run-test-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "state");
    fs::create_directories(dir / "sys");
    device = fs::weakly_canonical(dir / "sdz").string();
    std::ofstream(device).put('x');
    state = dir / "state" / "run.state";
    registry = dir / "registry";
    sysfs = dir / "sys";
    devices.sizes[device] = kRunTestBytes;
    devices.kinds[device] = lbscrypt::PathKind::block_device;
    env.kernel = &kernel;
    env.devices = &devices;
    env.reencrypt_registry = registry;
    for (std::size_t i = 0; i < plain.size(); ++i) {
      plain[i] = static_cast<std::uint8_t>(i * 7 + i / 4096);
    }
    volume.raw = plain;
    run_fake_crypt(old_side(), old_key, volume.raw, 0);
  }
  RunFixture(const RunFixture &) = delete;
  RunFixture &operator=(const RunFixture &) = delete;
  RunFixture(RunFixture &&) = delete;
  RunFixture &operator=(RunFixture &&) = delete;
  ~RunFixture() { fs::remove_all(dir); }

  [[nodiscard]] static CryptSide old_side() { return {"aes-xts-plain64", 64, 512, false}; }
  [[nodiscard]] static CryptSide new_side() { return {"aes-xts-plain64", 64, 4096, false}; }

  [[nodiscard]] ReencryptRequest request(bool resume) const {
    ReencryptRequest r;
    r.state = state;
    r.resume = resume;
    r.old_mapping.device = device;
    r.old_mapping.cipher = old_side().cipher;
    r.old_mapping.key_bytes = old_side().key_bytes;
    r.old_mapping.sector_size = old_side().sector_size;
    r.new_side = new_side();
    r.hotzone_bytes = kRunTestHotzone;
    r.registry_dir = registry;
    r.sysfs = sysfs;
    return r;
  }

  [[nodiscard]] ReencryptSteps steps() {
    ReencryptSteps s;
    s.old_key = [this](std::uint32_t bytes) -> Result<SecretBuffer> {
      ++keys_asked;
      return run_key_of(old_key, bytes);
    };
    s.new_key = [this](std::uint32_t bytes) -> Result<SecretBuffer> {
      ++keys_asked;
      return run_key_of(given_new_key, bytes);
    };
    s.make_io = [this](
                    const ReencryptState &st, const SecretBuffer &o,
                    const SecretBuffer &n) -> Result<std::unique_ptr<lbscrypt::DeviceReencryptIo>> {
      return std::unique_ptr<lbscrypt::DeviceReencryptIo>(
          std::make_unique<MemoryIo>(volume, st, o.data()[0], n.data()[0]));
    };
    s.probe = [this](const std::string &) -> Result<std::optional<FilesystemProbe>> {
      return probe;
    };
    s.now_utc = [] { return std::string("2026-12-04T00:00:00Z"); };
    s.hooks.progress = [this](const lbscrypt::Progress &) { ++hotzones_seen; };
    s.hooks.stop = [this] { return stop_after_first && hotzones_seen >= 1; };
    return s;
  }

  // The plaintext as the new side reads it.
  [[nodiscard]] Bytes read_new() const {
    Bytes out = volume.raw;
    run_fake_crypt(new_side(), new_key, out, 0);
    return out;
  }

  [[nodiscard]] bool registry_empty() const {
    return !fs::exists(registry) || fs::is_empty(registry);
  }
};

}  // namespace

TEST_CASE("reencrypt run: a new run converts the volume and leaves nothing behind", "[reencrypt]") {
  RunFixture f;
  const auto outcome = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE(outcome.ok());
  CHECK(outcome->report.outcome == EngineOutcome::finished);
  CHECK(outcome->report.progress.done_bytes == kRunTestBytes);
  CHECK(f.read_new() == f.plain);
  CHECK(f.hotzones_seen == 4);  // 256 KiB in 64 KiB hotzones
  CHECK(f.keys_asked == 2);
  CHECK_FALSE(fs::exists(f.state));
  CHECK_FALSE(fs::exists(lbscrypt::journal_path(f.state)));
  CHECK(f.registry_empty());
  CHECK(f.volume.closed == 1);
}

TEST_CASE("reencrypt run: a stop keeps the run, --resume checks both keys, then finishes",
          "[reencrypt]") {
  RunFixture f;
  f.stop_after_first = true;
  const auto stopped = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE(stopped.ok());
  CHECK(stopped->report.outcome == EngineOutcome::stopped);
  CHECK(stopped->report.progress.done_bytes == kRunTestHotzone);
  CHECK(fs::exists(f.state));
  CHECK(fs::exists(lbscrypt::journal_path(f.state)));
  REQUIRE_FALSE(f.registry_empty());

  // open and attach see the run (open_volume consults the same registry)
  const auto listed = lbscrypt::find_entry(f.registry, f.device, f.sysfs);
  REQUIRE(listed.ok());
  REQUIRE(listed->has_value());
  CHECK((*listed)->state == fs::absolute(f.state).lexically_normal().string());

  // a new run of the same device is refused before a key is asked for
  f.keys_asked = 0;
  ReencryptRequest again = f.request(false);
  again.state = f.dir / "state" / "other.state";
  const auto refused = lbscrypt::reencrypt_offline(again, f.env, f.steps());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::busy);
  CHECK(f.keys_asked == 0);

  // a wrong new key on --resume: refused, nothing written
  const Bytes before = f.volume.raw;
  f.stop_after_first = false;
  f.given_new_key = 0x78;
  const auto wrong = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == Errc::key);
  CHECK_THAT(wrong.error().message, Catch::Contains("new key"));
  CHECK(f.volume.raw == before);

  f.given_new_key = f.new_key;
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  CHECK(resumed->report.progress.start_bytes == kRunTestHotzone);
  CHECK(f.read_new() == f.plain);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
}

TEST_CASE("reencrypt run: refusals before a byte is written", "[reencrypt]") {
  RunFixture f;
  const Bytes before = f.volume.raw;

  SECTION("a state file that exists, without --resume") {
    std::ofstream(f.state).put('{');
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::exists);
    CHECK_THAT(r.error().message, Catch::Contains("--resume"));
    CHECK(f.keys_asked == 0);
  }
  SECTION("no signature without --force") {
    f.probe.reset();
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("--force"));
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
  }
  SECTION("a filesystem whose blocks are below the new sector") {
    f.probe = FilesystemProbe{"ext4", 1024};
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::refused);
    CHECK_THAT(r.error().message, Catch::Contains("1024") && Catch::Contains("4096"));
    CHECK_FALSE(fs::exists(f.state));
  }
  SECTION("nothing would change") {
    f.given_new_key = f.old_key;
    ReencryptRequest request = f.request(false);
    request.new_side = RunFixture::old_side();
    const auto r = lbscrypt::reencrypt_offline(request, f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("nothing would change"));
  }
  SECTION("a device held by a mapping") {
    f.devices.users[f.device] = "device-mapper mapping data (dm-0)";
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::busy);
    CHECK(f.keys_asked == 0);
  }
  SECTION("a LUKS device") {
    f.devices.luks[f.device] = true;
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("cryptsetup reencrypt"));
    CHECK(f.keys_asked == 0);
  }
  SECTION("a new sector size the page size does not allow") {
    f.kernel.page = 4096;
    ReencryptRequest big = f.request(false);
    big.new_side.sector_size = 8192;
    const auto refused = lbscrypt::reencrypt_offline(big, f.env, f.steps());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::refused);
    CHECK(f.keys_asked == 0);
  }
  CHECK(f.volume.raw == before);
}
