// SPDX-License-Identifier: GPL-2.0-only
// Online reencrypt (reencrypt/online.hpp): the tables the users' mapping carries during a run,
// checked against dm-crypt's rules as written here (not against the code's own arithmetic);
// the live table compared with what the user gave; and whole runs on a fake kernel whose
// mapping the test reads and writes as the users would, between the hotzones, while the order
// of suspend, journal records, reload and resume is watched.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fake_cipher.hpp"
#include "fakes.hpp"
#include "file_bytes.hpp"
#include "lbscrypt/reencrypt/online.hpp"
#include "lbscrypt/reencrypt/run.hpp"

using lbscrypt::CryptFlags;
using lbscrypt::CryptSide;
using lbscrypt::CryptTable;
using lbscrypt::EngineOutcome;
using lbscrypt::Errc;
using lbscrypt::FilesystemProbe;
using lbscrypt::ReencryptRequest;
using lbscrypt::ReencryptState;
using lbscrypt::ReencryptSteps;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;
using lbscrypt::test::fake_crypt;
using lbscrypt::test::fake_keystream;
using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

SecretBuffer online_key(std::uint8_t byte, std::size_t size = 64) {
  const Bytes bytes(size, byte);
  return {bytes.data(), bytes.size()};
}

// dm-crypt, as its documentation and code give it: a line [start, start + length) of a table
// maps the table's 512-byte sector L to the device's sector offset + (L - start), and encrypts
// the sector beginning at L with the IV iv_offset + (L - start), counted in 512-byte units, or
// in sector_size units (the same number shifted) with iv_large_sectors. The constructor wants
// iv_offset and length multiples of sector_size / 512, and the table wants every line's start
// aligned to the largest logical block (sector size) of its lines.
struct OnlineModelSector {
  std::uint64_t device_sector = 0;
  std::uint64_t iv = 0;
};

OnlineModelSector online_model(const CryptTable &line, std::uint64_t logical) {
  const std::uint64_t sector = *line.sector_size() / 512;
  const std::uint64_t rel = logical - line.start;
  const std::uint64_t iv = line.iv_offset + rel;
  return {line.offset + rel, line.options.iv_large_sectors ? iv / sector : iv};
}

OnlineModelSector online_whole(const ReencryptState &state, const CryptSide &side,
                               std::uint64_t logical) {
  const std::uint64_t iv = state.skip + logical;
  return {state.offset + logical, side.iv_large_sectors ? iv / (side.sector_size / 512) : iv};
}

}  // namespace

TEST_CASE("reencrypt online: every line reads as one whole-device table of its side",
          "[reencrypt][online]") {
  const std::vector<std::uint32_t> sizes{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  const SecretBuffer old_key = online_key(0x11);
  const SecretBuffer new_key = online_key(0x77);
  for (const std::uint32_t old_size : sizes) {
    for (const std::uint32_t new_size : sizes) {
      for (const bool old_large : {false, true}) {
        for (const bool new_large : {false, true}) {
          if ((old_large && old_size == 512) || (new_large && new_size == 512)) {
            continue;
          }
          ReencryptState state;
          state.offset = 384;  // 196608 bytes: a multiple of every sector size
          state.skip = 256;
          state.data_bytes = 1U << 20U;
          state.old_side = CryptSide{"aes-xts-plain64", 64, old_size, old_large};
          state.new_side = CryptSide{"aes-xts-plain64", 64, new_size, new_large};
          const std::uint64_t larger = std::max(old_size, new_size);
          for (const std::uint64_t boundary : {std::uint64_t{0}, std::uint64_t{3} * 65536U,
                                               state.data_bytes - larger, state.data_bytes}) {
            CAPTURE(old_size, new_size, old_large, new_large, boundary);
            CryptFlags flags;
            flags.allow_discards = true;
            const auto segments =
                lbscrypt::online_segments(state, boundary, old_key, new_key, "254:7", flags);
            const auto lines = lbscrypt::online_table_lines(segments, "crypt");
            const std::size_t expected_lines =
                boundary == 0 || boundary == state.data_bytes ? 1U : 2U;
            REQUIRE(lines.size() == expected_lines);
            std::uint64_t next = 0;
            for (const auto &raw : lines) {
              // read back as the kernel would print it, by the table parser
              const auto line =
                  lbscrypt::parse_table_params(raw.params.view(), raw.start, raw.length);
              REQUIRE(line.ok());
              CHECK(raw.type == "crypt");
              CHECK(line->start == next);
              CHECK(line->device == "254:7");
              CHECK(line->options.allow_discards);
              const std::uint64_t units = *line->sector_size() / 512;
              CHECK(line->iv_offset % units == 0);
              CHECK(line->length % units == 0);
              CHECK(line->start % (larger / 512) == 0);
              const bool is_new = line->start * 512 < boundary;
              const CryptSide &side = is_new ? state.new_side : state.old_side;
              CHECK(*line->sector_size() == side.sector_size);
              CHECK(line->options.iv_large_sectors == side.iv_large_sectors);
              CHECK(std::get<SecretBuffer>(line->key) == (is_new ? new_key : old_key));
              const std::uint64_t last = line->start + line->length - units;
              for (const std::uint64_t logical :
                   {line->start, line->start + units,
                    last - (last - line->start) / 2 / units * units, last}) {
                const auto got = online_model(*line, logical);
                const auto want = online_whole(state, side, logical);
                CHECK(got.device_sector == want.device_sector);
                CHECK(got.iv == want.iv);
              }
              next += line->length;
            }
            CHECK(next * 512 == state.data_bytes);
          }
        }
      }
    }
  }
}

namespace {

// ---- a live mapping on the fake kernel -----------------------------------------------------

constexpr std::uint64_t kOnlineBytes = 256 * 1024ULL;
constexpr std::uint64_t kOnlineHotzone = 64 * 1024ULL;

CryptTable online_table(const CryptSide &side, const SecretBuffer &key, std::uint64_t bytes) {
  CryptTable table;
  table.length = bytes / 512;
  table.cipher = side.cipher;
  table.key = key;
  table.device = "254:0";
  if (side.sector_size != 512) {
    table.options.sector_size_arg = std::to_string(side.sector_size);
  }
  table.options.iv_large_sectors = side.iv_large_sectors;
  return table;
}

void online_open(FakeKernel &kernel, const std::string &name, const CryptTable &table) {
  lbscrypt::CreateRequest request;
  request.name = name;
  request.uuid = "CRYPT-PLAIN-" + name;
  request.length = table.length;
  request.params = lbscrypt::format_table_params(table);
  REQUIRE(kernel.create(request).ok());
}

}  // namespace

TEST_CASE("reencrypt online: the live table against what the user gave", "[reencrypt][online]") {
  FakeKernel kernel;
  const CryptSide side{"aes-xts-plain64", 64, 4096, false};
  const SecretBuffer key = online_key(0x11);
  online_open(kernel, "vol", online_table(side, key, kOnlineBytes));
  auto live = lbscrypt::read_live_mapping(kernel, "vol", "crypt");
  REQUIRE(live.ok());

  lbscrypt::MappingRequest given;
  given.cipher = "aes-xts-plain64";
  given.key_bytes = 64;
  given.sector_size = 4096;
  REQUIRE(lbscrypt::check_live_parameters(*live, given).ok());
  CHECK(*lbscrypt::check_live_parameters(*live, given) == kOnlineBytes / 512);
  CHECK(lbscrypt::check_live_key(*live, key).ok());

  SECTION("each field that differs is named, with both values") {
    struct Case {
      const char *field;
      const char *live_value;
      const char *given_value;
      void (*change)(lbscrypt::MappingRequest &);
    };
    const std::vector<Case> cases{
        {"cipher", "aes-xts-plain64", "aes-cbc-essiv:sha256",
         [](lbscrypt::MappingRequest &r) { r.cipher = "aes-cbc-essiv:sha256"; }},
        {"key size", "512 bits", "256 bits", [](lbscrypt::MappingRequest &r) { r.key_bytes = 32; }},
        {"sector size", "4096", "512", [](lbscrypt::MappingRequest &r) { r.sector_size = 512; }},
        {"iv_large_sectors", "unset", "set",
         [](lbscrypt::MappingRequest &r) { r.flags.iv_large_sectors = true; }},
        {"offset", "0", "--offset 8", [](lbscrypt::MappingRequest &r) { r.offset = 8; }},
        {"iv_offset", "0", "--skip 8", [](lbscrypt::MappingRequest &r) { r.skip = 8; }},
        {"length", "512 sectors", "--size 256", [](lbscrypt::MappingRequest &r) { r.size = 256; }},
    };
    for (const Case &c : cases) {
      CAPTURE(c.field);
      lbscrypt::MappingRequest wrong = given;
      c.change(wrong);
      const auto r = lbscrypt::check_live_parameters(*live, wrong);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == Errc::refused);
      CHECK_THAT(r.error().message, Catch::Contains(std::string("has ") + c.field + " ") &&
                                        Catch::Contains(c.live_value) &&
                                        Catch::Contains(c.given_value));
    }
  }
  SECTION("another key is refused, however little differs") {
    SecretBuffer other = key;
    other.data()[63] = static_cast<std::uint8_t>(other.data()[63] ^ 1U);
    const auto r = lbscrypt::check_live_key(*live, other);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::key);
    CHECK_FALSE(lbscrypt::check_live_key(*live, online_key(0x11, 32)).ok());
  }
  SECTION("a keyring key cannot be read back") {
    lbscrypt::CreateRequest request;
    request.name = "ring";
    request.length = kOnlineBytes / 512;
    request.params.append("aes-xts-plain64 :64:logon:cryptsetup:ring 0 254:0 0 1 sector_size:4096");
    REQUIRE(kernel.create(request).ok());
    const auto r = lbscrypt::read_live_mapping(kernel, "ring", "crypt");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::refused);
    CHECK_THAT(r.error().message, Catch::Contains("keyring"));
  }
  SECTION("a suspended or two-line mapping is not a new run's") {
    live->info.suspended = true;
    CHECK_THAT(lbscrypt::check_live_parameters(*live, given).error().message,
               Catch::Contains("suspended"));
    live->info.suspended = false;
    live->lines.push_back(live->lines.front());
    CHECK_THAT(lbscrypt::check_live_parameters(*live, given).error().message,
               Catch::Contains("--resume"));
  }
  SECTION("no such mapping") {
    const auto r = lbscrypt::read_live_mapping(kernel, "none", "crypt");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::not_found);
  }
  SECTION("the device held by another mapping too") {
    CHECK(lbscrypt::check_live_holder(*live, "/dev/sdz", "device-mapper mapping vol (dm-0)").ok());
    const auto r = lbscrypt::check_live_holder(
        *live, "/dev/sdz", "device-mapper mapping other (dm-3), device-mapper mapping vol (dm-0)");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::busy);
    // a resume: this run's private mappings (a killed run's too) do not count, another run's do
    const std::string with_ours =
        "device-mapper mapping lbscrypt-reenc-0123456789abcdef-new (dm-2), device-mapper "
        "mapping lbscrypt-reenc-0123456789abcdef-old (dm-1), device-mapper mapping vol (dm-0)";
    CHECK(lbscrypt::check_live_holder(*live, "/dev/sdz", with_ours,
                                      "0123456789abcdef0123456789abcdef")
              .ok());
    CHECK_FALSE(lbscrypt::check_live_holder(*live, "/dev/sdz", with_ours,
                                            "fedcba98765432100123456789abcdef")
                    .ok());
    CHECK_FALSE(lbscrypt::check_live_holder(*live, "/dev/sdz", with_ours).ok());
    CHECK_FALSE(lbscrypt::check_live_holder(*live, "/dev/sdz", std::nullopt).ok());
  }
}

namespace {

// ---- whole runs ---------------------------------------------------------------------------

// The device's bytes go through the fake cipher (fake_cipher.hpp) with skip 0: offset and skip
// are 0 here, and the private mappings see the device from its start.

struct OnlineKilled : std::runtime_error {
  OnlineKilled() : std::runtime_error("kill -9") {}
};

// Where the users' I/O to a byte of NAME goes.
enum class OnlineReach { device, held, eio };

// The line of NAME's parsed table covering byte `at`.
const CryptTable &online_line_at(const std::vector<CryptTable> &lines, std::uint64_t at) {
  const auto line = std::find_if(lines.begin(), lines.end(), [&](const CryptTable &l) {
    return at >= l.start * 512 && at < (l.start + l.length) * 512;
  });
  REQUIRE(line != lines.end());
  return *line;
}

// A line's device as the users' I/O finds it: the device itself ("254:0"), or a mapping of the
// fake kernel (its "253:MINOR"): a suspended one holds the I/O, an error table fails it, a
// linear one passes it to the device one to one.
OnlineReach online_reach(FakeKernel &kernel, const std::string &device) {
  if (device == "254:0") {
    return OnlineReach::device;
  }
  for (const auto &[name, mapping] : kernel.mappings) {
    if (device == "253:" + std::to_string(mapping.info.minor)) {
      if (mapping.info.suspended) {
        return OnlineReach::held;
      }
      if (mapping.line.type == "error") {
        return OnlineReach::eio;
      }
      REQUIRE(mapping.line.type == "linear");
      REQUIRE(mapping.line.params.view() == "254:0 0");
      return OnlineReach::device;
    }
  }
  FAIL("no mapping " << device);
  return OnlineReach::eio;
}

std::vector<CryptTable> online_parsed(FakeKernel &kernel, const std::string &name) {
  std::vector<CryptTable> lines;
  const auto table = kernel.table(name);
  REQUIRE(table.ok());
  for (const auto &line : *table) {
    auto parsed = lbscrypt::parse_table_params(line.params.view(), line.start, line.length);
    REQUIRE(parsed.ok());
    lines.push_back(std::move(parsed).value());
  }
  return lines;
}

struct OnlineVolume {
  Bytes raw = Bytes(kOnlineBytes);
  FakeKernel *kernel = nullptr;
  int touched_live = 0;  // device bytes the engine wrote while the users could reach them
  int name_suspended_in_rewrite = 0;  // write_new calls while NAME was suspended
  int writes = 0;
  std::optional<int> kill_at_write;     // throw (a kill -9) at this write_new
  std::optional<int> fail_writes_from;  // write_new fails (EIO) from this one on

  // Whether the users' I/O reaches any byte of [position, position + size) now.
  [[nodiscard]] bool reachable(std::uint64_t position, std::size_t size) const {
    const auto info = kernel->info("vol");
    if (!info || info->suspended) {
      return false;
    }
    const auto lines = online_parsed(*kernel, "vol");
    for (std::uint64_t at = position; at < position + size; at += 512) {
      if (online_reach(*kernel, online_line_at(lines, at).device) == OnlineReach::device) {
        return true;
      }
    }
    return false;
  }
};

class OnlineMemoryIo final : public lbscrypt::DeviceReencryptIo {
 public:
  OnlineMemoryIo(OnlineVolume &volume, ReencryptState state, std::uint8_t old_key,
                 std::uint8_t new_key)
      : volume_(volume), state_(std::move(state)), old_key_(old_key), new_key_(new_key) {}
  Result<void> read_raw(std::uint64_t position, std::span<std::uint8_t> out) override {
    watch(position, out.size());
    std::copy_n(volume_.raw.begin() + static_cast<std::ptrdiff_t>(position), out.size(),
                out.begin());
    return {};
  }
  Result<void> write_raw(std::uint64_t position, std::span<const std::uint8_t> data) override {
    watch(position, data.size());
    std::copy(data.begin(), data.end(),
              volume_.raw.begin() + static_cast<std::ptrdiff_t>(position));
    return {};
  }
  Result<void> read_old(std::uint64_t position, std::span<std::uint8_t> out) override {
    // the hotzone and the unit after it, which the users may be writing: a read, not watched
    std::copy_n(volume_.raw.begin() + static_cast<std::ptrdiff_t>(position), out.size(),
                out.begin());
    fake_crypt(state_.old_side, old_key_, 0, position, out);
    return {};
  }
  Result<void> write_new(std::uint64_t position, std::span<const std::uint8_t> data) override {
    const auto name = volume_.kernel->info("vol");
    if (name && name->suspended) {
      ++volume_.name_suspended_in_rewrite;
    }
    const int index = volume_.writes++;
    if (volume_.fail_writes_from && index >= *volume_.fail_writes_from) {
      // half of it written, then the device fails
      Bytes half(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(data.size() / 2));
      fake_crypt(state_.new_side, new_key_, 0, position, half);
      static_cast<void>(write_raw(position, half));
      return lbscrypt::make_error(Errc::device, "cannot write through the new parameters: EIO",
                                  EIO);
    }
    if (volume_.kill_at_write && *volume_.kill_at_write == index) {
      volume_.kill_at_write.reset();
      // half the hotzone written, then the process is gone
      Bytes half(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(data.size() / 2));
      fake_crypt(state_.new_side, new_key_, 0, position, half);
      static_cast<void>(write_raw(position, half));
      throw OnlineKilled();
    }
    Bytes cipher(data.begin(), data.end());
    fake_crypt(state_.new_side, new_key_, 0, position, cipher);
    return write_raw(position, cipher);
  }
  Result<void> read_new(std::uint64_t position, std::span<std::uint8_t> out) override {
    std::copy_n(volume_.raw.begin() + static_cast<std::ptrdiff_t>(position), out.size(),
                out.begin());
    fake_crypt(state_.new_side, new_key_, 0, position, out);
    return {};
  }
  Result<void> flush() override { return {}; }
  Result<void> close() override { return {}; }
  [[nodiscard]] std::string old_node() const override { return "/dev/dm-old"; }

 private:
  // The engine writes (or reads the journal's copy of) [position, position + size): no byte of
  // it may be reachable by the users' I/O (NAME's table routes it to a suspended device).
  void watch(std::uint64_t position, std::size_t size) {
    if (!volume_.reachable(position, size)) {
      return;
    }
    ++volume_.touched_live;
  }
  OnlineVolume &volume_;
  ReencryptState state_;
  std::uint8_t old_key_;
  std::uint8_t new_key_;
};

struct OnlineFixture {
  fs::path dir;
  std::string device;
  fs::path state;
  fs::path registry;
  fs::path sysfs;
  fs::path proc;  // mountinfo puts everything on a disk other than vol; no swap, no process
  FakeKernel kernel;
  FakeBlockDevices devices;
  lbscrypt::Environment env;
  OnlineVolume volume;
  Bytes plain = Bytes(kOnlineBytes);
  std::optional<FilesystemProbe> probe = FilesystemProbe{"ext4", 65536};
  std::uint8_t old_key = 0x11;
  std::uint8_t new_key = 0x77;
  std::uint8_t given_old_key = 0x11;
  bool stop_after_first = false;
  int stop_after = 0;  // stop once this many hotzones were converted (0: never)
  int hotzones_seen = 0;
  std::vector<std::string> checks_failed;  // what the kernel's observer saw go wrong
  int user_writes = 0;

  OnlineFixture() {
    dir = fs::current_path() / ("reencrypt-online-test-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "state");
    fs::create_directories(dir / "sys");
    device = fs::weakly_canonical(dir / "sdz").string();
    std::ofstream(device).put('x');
    state = dir / "state" / "run.state";
    registry = dir / "registry";
    sysfs = dir / "sys";
    proc = dir / "proc";
    fs::create_directories(proc / "self");
    mount_on("254:7", "/", "/dev/lbstest-sdq");
    std::ofstream(proc / "self" / "maps").flush();
    devices.sizes[device] = kOnlineBytes;
    devices.kinds[device] = lbscrypt::PathKind::block_device;
    devices.resolved["254:0"] = device;
    devices.users[device] = "device-mapper mapping vol (dm-0)";
    env.kernel = &kernel;
    env.devices = &devices;
    env.reencrypt_registry = registry;
    volume.kernel = &kernel;
    for (std::size_t i = 0; i < plain.size(); ++i) {
      plain[i] = static_cast<std::uint8_t>(i * 7 + i / 4096);
    }
    volume.raw = plain;
    fake_crypt(old_side(), old_key, 0, 0, volume.raw);
    online_open(kernel, "vol", online_table(old_side(), online_key(old_key), kOnlineBytes));
    kernel.observe = [this](const std::string &event) { observe(event); };
  }
  OnlineFixture(const OnlineFixture &) = delete;
  OnlineFixture &operator=(const OnlineFixture &) = delete;
  OnlineFixture(OnlineFixture &&) = delete;
  OnlineFixture &operator=(OnlineFixture &&) = delete;
  ~OnlineFixture() { fs::remove_all(dir); }

  // A line of the fake /proc/self/mountinfo: an ext4 on device `number` at `point`.
  void mount_on(const std::string &number, const fs::path &point, const std::string &source) const {
    std::ofstream(proc / "self" / "mountinfo", std::ios::app)
        << "1 0 " << number << " / " << point.string() << " rw - ext4 " << source << " rw\n";
  }

  [[nodiscard]] static CryptSide old_side() { return {"aes-xts-plain64", 64, 4096, false}; }
  [[nodiscard]] static CryptSide new_side() { return {"aes-xts-plain64", 64, 65536, true}; }

  [[nodiscard]] ReencryptRequest request(bool resume) const {
    ReencryptRequest r;
    r.state = state;
    r.resume = resume;
    r.active_name = "vol";
    r.old_mapping.cipher = old_side().cipher;
    r.old_mapping.key_bytes = old_side().key_bytes;
    r.old_mapping.sector_size = old_side().sector_size;
    r.new_side = new_side();
    r.hotzone_bytes = kOnlineHotzone;
    r.registry_dir = registry;
    r.sysfs = sysfs;
    r.proc = proc;
    return r;
  }

  [[nodiscard]] ReencryptSteps steps() {
    ReencryptSteps s;
    s.old_key = [this](std::uint32_t bytes) -> Result<SecretBuffer> {
      return online_key(given_old_key, bytes);
    };
    s.new_key = [this](std::uint32_t bytes) -> Result<SecretBuffer> {
      return online_key(new_key, bytes);
    };
    s.make_io = [this](
                    const ReencryptState &st, const SecretBuffer &o,
                    const SecretBuffer &n) -> Result<std::unique_ptr<lbscrypt::DeviceReencryptIo>> {
      return std::unique_ptr<lbscrypt::DeviceReencryptIo>(
          std::make_unique<OnlineMemoryIo>(volume, st, o.data()[0], n.data()[0]));
    };
    s.probe = [this](const std::string &node) -> Result<std::optional<FilesystemProbe>> {
      if (node != "/dev/dm-0") {  // the users' mapping, not a private one
        checks_failed.push_back("probed " + node);
      }
      return probe;
    };
    s.now_utc = [] { return std::string("2026-12-05T00:00:00Z"); };
    s.hooks.progress = [this](const lbscrypt::Progress &) { ++hotzones_seen; };
    s.hooks.stop = [this] {
      return (stop_after_first && hotzones_seen >= 1) ||
             (stop_after > 0 && hotzones_seen >= stop_after);
    };
    return s;
  }

  // The live table's lines, parsed.
  [[nodiscard]] std::vector<CryptTable> live_lines() { return online_parsed(kernel, "vol"); }

  // What the users read (or, with `data`, write) through the live table at `position`. Bytes
  // whose I/O would wait (a suspended device under their line) or fail (an error table) are
  // left as they are; `reached` counts them by kind.
  std::map<OnlineReach, std::uint64_t> reached;
  void through_live(std::uint64_t position, std::span<std::uint8_t> bytes, bool writing) {
    const auto lines = live_lines();
    const auto name = kernel.info("vol");
    REQUIRE(name.ok());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const std::uint64_t at = position + i;
      const CryptTable *line = &online_line_at(lines, at);
      const OnlineReach reach =
          name->suspended ? OnlineReach::held : online_reach(kernel, line->device);
      ++reached[reach];
      if (reach != OnlineReach::device) {
        continue;
      }
      const std::uint64_t sector = *line->sector_size();
      const std::uint64_t logical = at / sector * sector / 512;
      const auto model = online_model(*line, logical);
      const std::uint64_t device_at = model.device_sector * 512 + at % sector;
      const std::uint8_t key = std::get<SecretBuffer>(line->key).data()[0];
      if (writing) {
        std::uint8_t byte = bytes[i];
        byte ^= fake_keystream(key, model.iv, at % sector);
        volume.raw.at(device_at) = byte;
      } else {
        std::uint8_t byte = volume.raw.at(device_at);
        byte ^= fake_keystream(key, model.iv, at % sector);
        bytes[i] = byte;
      }
    }
  }

  // What the users read; bytes they cannot reach now read as `plain` has them.
  [[nodiscard]] Bytes users_read() {
    Bytes out = plain;
    through_live(0, out, false);
    return out;
  }
  // The users' reach of [position, position + size) now: the bytes held, failing, reached.
  std::map<OnlineReach, std::uint64_t> reach_of(std::uint64_t position, std::uint64_t size) {
    reached.clear();
    Bytes scratch(size);
    through_live(position, scratch, false);
    return reached;
  }

  // The journal's completed position as a fresh reader finds it (0 when none).
  [[nodiscard]] std::uint64_t durable_position() const {
    const auto st = lbscrypt::read_state(state);
    REQUIRE(st.ok());
    auto auth = lbscrypt::RunAuth::derive(online_key(old_key), online_key(new_key), st->run_id);
    REQUIRE(auth.ok());
    auto journal = lbscrypt::open_journal(lbscrypt::journal_path(state), st->run_id,
                                          st->hotzone_bytes, false, *auth);
    REQUIRE(journal.ok());
    const auto slots = (*journal)->read_slots();
    REQUIRE(slots.ok());
    return slots->completed ? slots->completed->position : 0;
  }

  // NAME's layout now: where its new part on the device ends, and the bytes after it that go
  // through another device (the run's hotzone device).
  [[nodiscard]] lbscrypt::OnlineLayout live_layout_now() {
    lbscrypt::OnlineLayout layout;
    for (const CryptTable &line : live_lines()) {
      if (line.device != "254:0") {
        layout.converted = line.start * 512;
        layout.routed = line.length * 512;
      } else if (std::get<SecretBuffer>(line.key) == online_key(new_key)) {
        layout.converted = (line.start + line.length) * 512;
      }
    }
    return layout;
  }
  std::vector<lbscrypt::OnlineLayout> layouts;  // NAME's, at each resume of it
  // Called with each event (before the checks); a test's way to act between the run's steps.
  // True: the test acted, and the checks are left out for that event.
  std::function<bool(const std::string &event)> on_event;
  bool in_event = false;

  // At every resume of NAME: the table going live ends its new part on the device where the
  // journal's completed record is (durable before), the users read the plaintext wherever
  // their I/O goes through, and they write a sector in the converted part and one in the rest
  // (outside a held hotzone), which the run must keep. At every resume of the hotzone device
  // (its hotzone converted), the same, the hotzone's bytes reached again.
  void observe(const std::string &event) {
    if (in_event) {
      return;
    }
    in_event = true;
    if (on_event && on_event(event)) {
      in_event = false;
      return;
    }
    const bool name_resumed = event == "resume vol";
    const bool hotzone_resumed = event.starts_with("resume lbscrypt-reenc-");
    if (!name_resumed && !hotzone_resumed) {
      in_event = false;
      return;
    }
    const auto layout = live_layout_now();
    const std::uint64_t boundary = layout.converted;
    if (name_resumed) {
      layouts.push_back(layout);
      if (fs::exists(state) && durable_position() != boundary) {
        checks_failed.push_back("resumed at " + std::to_string(boundary) + " with the journal at " +
                                std::to_string(durable_position()));
      }
    }
    if (users_read() != plain) {
      checks_failed.push_back("the users read other data at boundary " + std::to_string(boundary));
    }
    const std::uint64_t routed_end = layout.converted + layout.routed;
    for (const std::uint64_t at :
         {boundary >= 65536 ? boundary - 65536 : kOnlineBytes,
          routed_end < kOnlineBytes ? kOnlineBytes - 65536 : kOnlineBytes,
          hotzone_resumed && layout.routed > 0 &&
                  reach_of(layout.converted, 512)[OnlineReach::device] == 512
              ? layout.converted
              : kOnlineBytes}) {
      if (at >= kOnlineBytes) {
        continue;
      }
      Bytes data(65536);
      for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] =
            static_cast<std::uint8_t>(0xA5 ^ (i + 13 * static_cast<std::size_t>(user_writes)));
      }
      ++user_writes;
      reached.clear();
      through_live(at, data, true);
      if (reached[OnlineReach::device] != data.size()) {
        checks_failed.push_back("a user write at " + std::to_string(at) + " did not go through");
        continue;
      }
      std::copy(data.begin(), data.end(), plain.begin() + static_cast<std::ptrdiff_t>(at));
    }
    in_event = false;
  }

  [[nodiscard]] bool registry_empty() const {
    return !fs::exists(registry) || fs::is_empty(registry);
  }
};

std::vector<std::string> online_vol_events(const FakeKernel &kernel) {
  std::vector<std::string> out;
  for (const auto &e : kernel.events) {
    if (e.ends_with(" vol")) {
      out.push_back(e);
    }
  }
  return out;
}

// The events of NAME and of the run's hotzone device, that one named "HZ".
std::vector<std::string> online_stack_events(const FakeKernel &kernel) {
  std::vector<std::string> out;
  for (const auto &e : kernel.events) {
    if (e.ends_with(" vol")) {
      out.push_back(e);
    } else if (e.find(" lbscrypt-reenc-") != std::string::npos && e.ends_with("-hotzone")) {
      out.push_back(e.substr(0, e.find(' ')) + " HZ");
    }
  }
  return out;
}

// The run's hotzone device, if it exists.
const FakeKernel::Mapping *online_hotzone(const FakeKernel &kernel) {
  for (const auto &[name, mapping] : kernel.mappings) {
    if (name.starts_with("lbscrypt-reenc-") && name.ends_with("-hotzone")) {
      return &mapping;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("reencrypt online: only the hotzone's device is held while it is rewritten",
          "[reencrypt][online][slow]") {
  OnlineFixture f;
  const auto outcome = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE(outcome.ok());
  CHECK(outcome->report.outcome == EngineOutcome::finished);
  CHECK(outcome->active_name == std::optional<std::string>("vol"));
  for (const auto &failure : f.checks_failed) {
    UNSCOPED_INFO(failure);
  }
  CHECK(f.checks_failed.empty());
  // the engine never wrote a byte the users could reach, and NAME was never suspended then
  CHECK(f.volume.touched_live == 0);
  CHECK(f.volume.name_suspended_in_rewrite == 0);
  // while each hotzone was held the users wrote in the converted part (from the second on)
  // and in the rest (up to the third), and once each hotzone's device resumed, into it
  // (1 + 2 + 2 + 1 as NAME's table routed each hotzone, 2 + 3 + 3 + 2 as each hotzone's
  // device resumed, 1 at the end)
  CHECK(f.user_writes == 6 + 10 + 1);
  // NAME suspended only to swap its table, never with its filesystem frozen; per hotzone:
  // NAME's table routes the hotzone to the hotzone device, which is held until it is done
  std::vector<std::string> expected;
  for (int i = 0; i < 4; ++i) {
    expected.insert(expected.end(), {"reload vol", "suspend-noflush vol", "suspend-noflush HZ",
                                     "resume vol", "resume HZ"});
  }
  expected.insert(expected.end(), {"reload vol", "suspend-noflush vol", "resume vol"});
  CHECK(online_stack_events(f.kernel) == expected);
  // at the end: one line with the new parameters and key, under the same name
  const auto lines = f.live_lines();
  REQUIRE(lines.size() == 1);
  CHECK(*lines[0].sector_size() == 65536);
  CHECK(lines[0].options.iv_large_sectors);
  CHECK(std::get<SecretBuffer>(lines[0].key) == online_key(f.new_key));
  CHECK(f.users_read() == f.plain);
  CHECK(online_hotzone(f.kernel) == nullptr);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
}

TEST_CASE("reencrypt online: NAME's tables over a run", "[reencrypt][online][slow]") {
  OnlineFixture f;
  REQUIRE(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()).ok());
  using lbscrypt::OnlineLayout;
  const std::vector<OnlineLayout> expected{{0, kOnlineHotzone},
                                           {kOnlineHotzone, kOnlineHotzone},
                                           {2 * kOnlineHotzone, kOnlineHotzone},
                                           {3 * kOnlineHotzone, kOnlineHotzone},
                                           {kOnlineBytes, 0}};
  REQUIRE(f.layouts.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(f.layouts[i].converted == expected[i].converted);
    CHECK(f.layouts[i].routed == expected[i].routed);
  }
  CHECK(f.checks_failed.empty());
}

TEST_CASE(
    "reencrypt online: a kill -9 in a hotzone holds only that hotzone, and --resume finishes "
    "it",
    "[reencrypt][online][slow]") {
  OnlineFixture f;
  f.volume.kill_at_write = 2;  // mid-way through the third hotzone's conversion
  CHECK_THROWS_AS(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()), OnlineKilled);
  // NAME is live; only the third hotzone's users wait, on the held hotzone device
  REQUIRE_FALSE(f.kernel.mappings.at("vol").info.suspended);
  const auto *hotzone = online_hotzone(f.kernel);
  REQUIRE(hotzone != nullptr);
  REQUIRE(hotzone->info.suspended);
  const auto held = f.reach_of(2 * kOnlineHotzone, kOnlineHotzone);
  CHECK(held.at(OnlineReach::held) == kOnlineHotzone);
  CHECK(f.reach_of(0, 2 * kOnlineHotzone).at(OnlineReach::device) == 2 * kOnlineHotzone);
  CHECK(f.reach_of(3 * kOnlineHotzone, kOnlineHotzone).at(OnlineReach::device) == kOnlineHotzone);
  REQUIRE(fs::exists(f.state));
  f.kernel.events.clear();

  SECTION("--resume") {
    const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
    INFO((resumed.ok() ? std::string{} : resumed.error().message));
    REQUIRE(resumed.ok());
    CHECK(resumed->report.outcome == EngineOutcome::finished);
    // the held hotzone put back and done, its device resumed; then NAME's table without it,
    // and the last hotzone as usual
    const std::vector<std::string> expected{
        "resume HZ",  "reload vol",          "suspend-noflush vol", "resume vol",
        "reload vol", "suspend-noflush vol", "suspend-noflush HZ",  "resume vol",
        "resume HZ",  "reload vol",          "suspend-noflush vol", "resume vol"};
    CHECK(online_stack_events(f.kernel) == expected);
  }
  SECTION("--abort, then --resume") {
    ReencryptRequest abort_request = f.request(true);
    abort_request.abort = true;
    const auto aborted = lbscrypt::reencrypt_offline(abort_request, f.env, f.steps());
    REQUIRE(aborted.ok());
    CHECK(aborted->report.outcome == EngineOutcome::stopped);
    CHECK(aborted->report.progress.done_bytes == 3 * kOnlineHotzone);
    CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
    CHECK(f.live_lines().size() == 2);
    CHECK(online_hotzone(f.kernel) == nullptr);
    CHECK(fs::exists(f.state));
    CHECK_FALSE(f.registry_empty());
    const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(resumed->report.outcome == EngineOutcome::finished);
  }
  SECTION("a user write beside the held hotzone, a power cut, --resume offline") {
    // the users write the first unit after the held hotzone, as they may now
    Bytes data(65536, 0x5A);
    f.through_live(3 * kOnlineHotzone, data, true);
    std::copy(data.begin(), data.end(),
              f.plain.begin() + static_cast<std::ptrdiff_t>(3 * kOnlineHotzone));
    // the power goes: no mapping is left, nothing holds the device
    f.kernel.mappings.clear();
    f.devices.users.erase(f.device);
    ReencryptRequest offline = f.request(true);
    offline.active_name.reset();
    const auto resumed = lbscrypt::reencrypt_offline(offline, f.env, f.steps());
    INFO((resumed.ok() ? std::string{} : resumed.error().message));
    REQUIRE(resumed.ok());
    CHECK(resumed->report.outcome == EngineOutcome::finished);
    Bytes plain_now = f.volume.raw;
    fake_crypt(OnlineFixture::new_side(), f.new_key, 0, 0, plain_now);
    CHECK(plain_now == f.plain);
    CHECK_FALSE(fs::exists(f.state));
    return;
  }
  SECTION("--resume with a wrong old key: refused, the mapping left as it is") {
    f.given_old_key = 0x12;
    const Bytes before = f.volume.raw;
    const auto refused = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::key);
    CHECK(f.volume.raw == before);
    CHECK(f.kernel.events.empty());
    return;
  }
  for (const auto &failure : f.checks_failed) {
    UNSCOPED_INFO(failure);
  }
  CHECK(f.checks_failed.empty());
  CHECK(f.volume.touched_live == 0);
  CHECK(f.users_read() == f.plain);
  CHECK(f.live_lines().size() == 1);
  CHECK(online_hotzone(f.kernel) == nullptr);
  CHECK_FALSE(fs::exists(f.state));
}

TEST_CASE(
    "reencrypt online: an error in a held hotzone fails its I/O, NAME stays usable, "
    "--resume finishes",
    "[reencrypt][online][slow]") {
  OnlineFixture f;
  f.volume.fail_writes_from = 2;  // the third hotzone's write fails, and again when retried
  const auto failed = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == Errc::device);
  const std::string &message = failed.error().message;
  CHECK_THAT(message, Catch::Contains("vol's bytes 131072 to 196608 (the hotzone) fail with EIO"));
  CHECK_THAT(message, Catch::Contains("--resume") && Catch::Contains("--abort"));
  CHECK(message.find('\n') == std::string::npos);
  // Nothing hangs: NAME and the hotzone device are live, the hotzone device on dm-error.
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  const auto *hotzone = online_hotzone(f.kernel);
  REQUIRE(hotzone != nullptr);
  CHECK_FALSE(hotzone->info.suspended);
  CHECK(hotzone->line.type == "error");
  CHECK(hotzone->more.empty());
  // The users get EIO in the hotzone and the data elsewhere.
  const auto in_zone = f.reach_of(2 * kOnlineHotzone, kOnlineHotzone);
  CHECK(in_zone.at(OnlineReach::eio) == kOnlineHotzone);
  CHECK_FALSE(in_zone.contains(OnlineReach::held));
  const auto elsewhere = f.reach_of(0, 2 * kOnlineHotzone);
  CHECK(elsewhere.at(OnlineReach::device) == 2 * kOnlineHotzone);
  CHECK(f.reach_of(3 * kOnlineHotzone, kOnlineHotzone).at(OnlineReach::device) == kOnlineHotzone);
  CHECK(f.users_read() == f.plain);  // where they reach
  CHECK(fs::exists(f.state));

  // The device works again: --resume puts the hotzone back, converts it and finishes.
  f.volume.fail_writes_from.reset();
  f.checks_failed.clear();
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  for (const auto &failure : f.checks_failed) {
    UNSCOPED_INFO(failure);
  }
  CHECK(f.checks_failed.empty());
  CHECK(f.users_read() == f.plain);
  CHECK(f.live_lines().size() == 1);
  CHECK(online_hotzone(f.kernel) == nullptr);
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  CHECK_FALSE(fs::exists(f.state));
}

TEST_CASE("reencrypt online: a table another process loads into NAME stops the run",
          "[reencrypt][online][slow]") {
  OnlineFixture f;
  int hotzones_done = 0;
  // After the second hotzone's device resumed: `dmsetup reload` of NAME's first table (the
  // old parameters over everything) and `dmsetup resume`, as a careless administrator would.
  f.on_event = [&](const std::string &event) {
    if (!event.starts_with("resume lbscrypt-reenc-") || ++hotzones_done != 2) {
      return false;
    }
    const auto table = online_table(OnlineFixture::old_side(), online_key(f.old_key), kOnlineBytes);
    REQUIRE(f.kernel.reload("vol", lbscrypt::online_table_lines({table}, "crypt"), false).ok());
    REQUIRE(f.kernel.suspend("vol", lbscrypt::SuspendMode::queue).ok());
    REQUIRE(f.kernel.resume("vol").ok());
    return true;
  };
  const auto stopped = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.error().code == Errc::refused);
  CHECK_THAT(stopped.error().message,
             Catch::Contains("the table of vol was changed by another process") &&
                 Catch::Contains("given back the table of position 131072"));
  // NAME put right: the two parts of position 131072, live, the hotzone device gone
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  const auto lines = f.live_lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].start * 512 == 2 * kOnlineHotzone);
  CHECK(std::get<SecretBuffer>(lines[0].key) == online_key(f.new_key));
  CHECK(std::get<SecretBuffer>(lines[1].key) == online_key(f.old_key));
  CHECK(online_hotzone(f.kernel) == nullptr);
  CHECK(f.durable_position() == 2 * kOnlineHotzone);
  f.on_event = nullptr;
  f.checks_failed.clear();
  CHECK(f.users_read() == f.plain);
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  CHECK(f.users_read() == f.plain);
  CHECK(f.checks_failed.empty());
}

TEST_CASE("reencrypt online: a stop between hotzones leaves the mapping live",
          "[reencrypt][online]") {
  OnlineFixture f;
  f.stop_after_first = true;
  const auto stopped = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
  REQUIRE(stopped.ok());
  CHECK(stopped->report.outcome == EngineOutcome::stopped);
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  CHECK(f.live_lines().size() == 2);
  CHECK(f.users_read() == f.plain);
  f.stop_after_first = false;
  f.hotzones_seen = 0;
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  CHECK(f.users_read() == f.plain);
  CHECK(f.checks_failed.empty());
}

TEST_CASE("reencrypt online: a journal behind NAME's table is refused",
          "[reencrypt][online][slow]") {
  OnlineFixture f;
  f.stop_after = 1;
  REQUIRE(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()).ok());
  const auto state_copy = lbscrypt::test::file_bytes(f.state);
  const auto journal_copy = lbscrypt::test::file_bytes(lbscrypt::journal_path(f.state));
  f.stop_after = 3;
  const auto further = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(further.ok());
  REQUIRE(further->report.progress.done_bytes == 3 * kOnlineHotzone);
  const auto state_now = lbscrypt::test::file_bytes(f.state);
  const auto journal_now = lbscrypt::test::file_bytes(lbscrypt::journal_path(f.state));
  const auto put = [&](const fs::path &path, const lbscrypt::test::FileBytes &bytes) {
    lbscrypt::test::put_bytes(path, 0, bytes);
  };
  put(f.state, state_copy);  // the same sizes: the copy overwrites the file whole
  put(lbscrypt::journal_path(f.state), journal_copy);
  f.stop_after = 0;
  const Bytes before = f.volume.raw;
  const auto refused = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK_THAT(refused.error().message,
             Catch::StartsWith("the journal is older than the device: vol's table has the new "
                               "parameters up to byte 196608, the journal goes to byte 65536"));
  CHECK(f.volume.raw == before);
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  CHECK(f.users_read() == f.plain);
  // The journal the run last wrote finishes it.
  put(f.state, state_now);
  put(lbscrypt::journal_path(f.state), journal_now);
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  CHECK(f.users_read() == f.plain);
}

TEST_CASE("reencrypt online: refusals before a byte is written", "[reencrypt][online]") {
  OnlineFixture f;
  const Bytes before = f.volume.raw;
  SECTION("the old key is not the mapping's") {
    f.given_old_key = 0x12;
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::key);
    CHECK_THAT(r.error().message, Catch::Contains("vol"));
  }
  SECTION("a sector size other than the mapping's") {
    ReencryptRequest request = f.request(false);
    request.old_mapping.sector_size = 512;
    const auto r = lbscrypt::reencrypt_offline(request, f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("sector size 4096, not the 512"));
  }
  SECTION("a filesystem whose blocks are below the new sector") {
    f.probe = FilesystemProbe{"ext4", 4096};
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::refused);
    CHECK_THAT(r.error().message, Catch::Contains("4096") && Catch::Contains("65536"));
  }
  SECTION("no signature without --force") {
    f.probe.reset();
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("--force"));
  }
  SECTION("the device held by another mapping as well") {
    f.devices.users[f.device] =
        "device-mapper mapping other (dm-5), device-mapper mapping vol "
        "(dm-0)";
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::busy);
  }
  SECTION("the state file on a filesystem on vol (reencrypt_online_checks_test.cpp: the rest)") {
    f.mount_on("253:0", f.dir / "state", "/dev/mapper/vol");
    const auto r = lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::refused);
    CHECK_THAT(r.error().message, Catch::StartsWith("the state file " + f.state.string() +
                                                    " is on vol (ext4 on vol)"));
  }
  SECTION("a device other than the mapping's") {
    ReencryptRequest request = f.request(false);
    request.old_mapping.device = (f.dir / "sdy").string();
    const auto r = lbscrypt::reencrypt_offline(request, f.env, f.steps());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("is on"));
  }
  CHECK(f.volume.raw == before);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
  CHECK(online_vol_events(f.kernel).empty());
  CHECK(f.live_lines().size() == 1);
}

TEST_CASE("reencrypt online: --resume with the state file on vol is refused, vol left live",
          "[reencrypt][online]") {
  OnlineFixture f;
  f.stop_after = 1;
  REQUIRE(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()).ok());
  const Bytes before = f.volume.raw;
  const auto events = f.kernel.events.size();
  const auto state = lbscrypt::test::file_bytes(f.state);
  f.mount_on("253:0", f.dir / "state", "/dev/mapper/vol");
  f.stop_after = 0;
  const auto r = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::refused);
  CHECK_THAT(r.error().message,
             Catch::StartsWith("the state file " + f.state.string() + " is on vol"));
  CHECK(f.kernel.events.size() == events);  // nothing suspended, loaded or resumed
  CHECK_FALSE(f.kernel.mappings.at("vol").info.suspended);
  CHECK(f.volume.raw == before);
  CHECK(lbscrypt::test::file_bytes(f.state) == state);
  CHECK(f.users_read() == f.plain);
}
