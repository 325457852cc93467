// SPDX-License-Identifier: GPL-2.0-only
// One offline run as `lbscrypt reencrypt` drives it (reencrypt/run.hpp): the order of checks,
// keys, state, registry and engine, on a fake kernel and devices, a volume in memory behind
// the fake cipher (fake_cipher.hpp), and real state, journal and registry files in a temporary
// directory. The engine's power cuts are reencrypt_engine_test's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fake_cipher.hpp"
#include "fakes.hpp"
#include "file_bytes.hpp"
#include "lbscrypt/reencrypt/run.hpp"
#include "lbscrypt/reencrypt/tab.hpp"
#include "lbscrypt/sealed.hpp"

using lbscrypt::CryptSide;
using lbscrypt::EngineOutcome;
using lbscrypt::Errc;
using lbscrypt::FilesystemProbe;
using lbscrypt::ReencryptRequest;
using lbscrypt::ReencryptState;
using lbscrypt::ReencryptSteps;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;
using lbscrypt::test::fake_crypt;
using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t kRunTestBytes = 256 * 1024ULL;
constexpr std::uint64_t kRunTestHotzone = 64 * 1024ULL;

// The volume in memory goes through the fake cipher (fake_cipher.hpp) with skip 0 (the runs
// here have none).

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
    fake_crypt(state_.old_side, old_key_, 0, position, out);
    return {};
  }
  Result<void> write_new(std::uint64_t position, std::span<const std::uint8_t> data) override {
    Bytes cipher(data.begin(), data.end());
    fake_crypt(state_.new_side, new_key_, 0, position, cipher);
    return write_raw(position, cipher);
  }
  Result<void> read_new(std::uint64_t position, std::span<std::uint8_t> out) override {
    static_cast<void>(read_raw(position, out));
    fake_crypt(state_.new_side, new_key_, 0, position, out);
    return {};
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
  int stop_after = 0;  // stop once this many hotzones were converted (0: never)
  int hotzones_seen = 0;

  explicit RunFixture(const std::string &name = "run") {
    dir = fs::current_path() / ("reencrypt-" + name + "-test-" + std::to_string(getpid()));
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
    fake_crypt(old_side(), old_key, 0, 0, volume.raw);
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
    s.hooks.stop = [this] {
      return (stop_after_first && hotzones_seen >= 1) ||
             (stop_after > 0 && hotzones_seen >= stop_after);
    };
    return s;
  }

  // The plaintext as the new side reads it.
  [[nodiscard]] Bytes read_new() const {
    Bytes out = volume.raw;
    fake_crypt(new_side(), new_key, 0, 0, out);
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

TEST_CASE("reencrypt run: the key verifiers take the iterations asked for, 1000 or more",
          "[reencrypt]") {
  RunFixture f;
  f.stop_after_first = true;
  ReencryptRequest request = f.request(false);
  request.verifier_iterations = 1000;
  const auto stopped = lbscrypt::reencrypt_offline(request, f.env, f.steps());
  REQUIRE(stopped.ok());
  const auto state = lbscrypt::read_state(f.state);
  REQUIRE(state.ok());
  CHECK(state->old_verifier.iterations == 1000);
  CHECK(state->new_verifier.iterations == 1000);
  // --resume checks the keys with the state's count (a wrong key is still refused)
  f.stop_after_first = false;
  f.given_new_key = 0x78;
  const auto wrong = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == Errc::key);
  f.given_new_key = f.new_key;
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(f.read_new() == f.plain);

  // below 1000: refused before a key is asked for or a file is made
  RunFixture g;
  ReencryptRequest few = g.request(false);
  few.verifier_iterations = 999;
  const auto refused = lbscrypt::reencrypt_offline(few, g.env, g.steps());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK_THAT(refused.error().message, Catch::Contains("999") && Catch::Contains("1000"));
  CHECK(g.keys_asked == 0);
  CHECK_FALSE(fs::exists(g.state));
  CHECK(g.registry_empty());
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

// ---- --update-tab ---------------------------------------------------------------------------

namespace {

std::string run_read_text(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// lbscrypttab in the fixture's directory: the volume's line (a key file) between two others.
struct TabFixture {
  RunFixture &f;
  fs::path tab;
  fs::path keys;
  fs::path key_file;
  fs::path new_key_file;
  std::string before;
  std::string after;  // written here by hand: the line with the new sector size, all else kept

  explicit TabFixture(RunFixture &fixture) : f(fixture) {
    tab = f.dir / "lbscrypttab";
    keys = f.dir / "keys";
    fs::create_directories(keys);
    key_file = keys / "data.key";
    new_key_file = keys / "data.key.new";
    std::ofstream(key_file, std::ios::binary) << std::string(64, static_cast<char>(f.old_key));
    std::ofstream(new_key_file, std::ios::binary) << std::string(64, static_cast<char>(f.new_key));
    before =
        "# lbscrypttab\nother /dev/vdq none cipher=aes-xts-plain64,size=256,hash=sha256\n"
        "data " +
        f.device + " " + key_file.string() +
        "\tcipher=aes-xts-plain64,size=512,discard,sector-size=512  # the data\n"
        "last /dev/vdr /k cipher=aes-xts-plain64,size=512\n";
    after =
        "# lbscrypttab\nother /dev/vdq none cipher=aes-xts-plain64,size=256,hash=sha256\n"
        "data " +
        f.device + " " + key_file.string() +
        "\tcipher=aes-xts-plain64,size=512,discard,sector-size=4096  # the data\n"
        "last /dev/vdr /k cipher=aes-xts-plain64,size=512\n";
    std::ofstream(tab, std::ios::binary) << before;
    fs::permissions(tab, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  }

  [[nodiscard]] ReencryptRequest request(bool resume) const {
    ReencryptRequest r = f.request(resume);
    r.tab_text = run_read_text(tab);
    r.tab_path = tab.string();
    lbscrypt::TabUpdate update;
    update.new_key = lbscrypt::TabUpdate::NewKey::file;
    update.new_key_file = new_key_file.string();
    r.update_tab = update;
    return r;
  }
};

}  // namespace

TEST_CASE("reencrypt run: --update-tab rewrites the line and replaces the key file at the end",
          "[reencrypt]") {
  RunFixture f;
  TabFixture t(f);
  const auto outcome = lbscrypt::reencrypt_offline(t.request(false), f.env, f.steps());
  REQUIRE(outcome.ok());
  CHECK(f.read_new() == f.plain);
  CHECK(run_read_text(t.tab) == t.after);
  CHECK(fs::status(t.tab).permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.new_key)));
  CHECK_FALSE(fs::exists(t.new_key_file));
  REQUIRE(outcome->tab.has_value());
  CHECK(outcome->tab->name == "data");
  CHECK(outcome->tab->line == 3);
  CHECK(outcome->tab->rewritten);
  CHECK(outcome->tab->key_replaced);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
}

TEST_CASE("reencrypt run: --update-tab after a cut between the rewrite and the removal",
          "[reencrypt]") {
  RunFixture f;
  TabFixture t(f);
  const fs::path away = f.dir / "new.key.away";
  ReencryptSteps steps = f.steps();
  // After the last hotzone, the new key file goes away: the switch rewrites the line, then
  // cannot show a key file holds the new key, and stops there with the state and entry kept,
  // as a power cut after the rewrite leaves them.
  steps.hooks.progress = [&](const lbscrypt::Progress &p) {
    if (p.done_bytes == kRunTestBytes) {
      fs::rename(t.new_key_file, away);
    }
  };
  const auto cut = lbscrypt::reencrypt_offline(t.request(false), f.env, steps);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().code == Errc::key);
  CHECK_THAT(cut.error().message, Catch::Contains("--resume"));
  CHECK(run_read_text(t.tab) == t.after);
  CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.old_key)));
  CHECK(fs::exists(f.state));
  CHECK_FALSE(f.registry_empty());
  CHECK(f.read_new() == f.plain);

  SECTION("the key file not replaced yet: --resume replaces it and asks for no key") {
    fs::rename(away, t.new_key_file);
    f.keys_asked = 0;
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 0);
    REQUIRE(resumed->tab.has_value());
    CHECK_FALSE(resumed->tab->rewritten);  // it saw the line rewritten already
    CHECK(resumed->tab->key_replaced);
    CHECK(run_read_text(t.tab) == t.after);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.new_key)));
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
  }
  SECTION("the key file replaced before the cut: --resume sees it and finishes") {
    fs::rename(away, t.key_file);
    f.keys_asked = 0;
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 0);
    REQUIRE(resumed->tab.has_value());
    CHECK_FALSE(resumed->tab->rewritten);
    CHECK_FALSE(resumed->tab->key_replaced);
    CHECK(run_read_text(t.tab) == t.after);
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
  }
  SECTION("neither file holds the new key: refused, the state kept") {
    std::ofstream(t.new_key_file, std::ios::binary) << std::string(64, 'z');
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE_FALSE(resumed.ok());
    CHECK(resumed.error().code == Errc::key);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.old_key)));
    CHECK(fs::exists(f.state));
  }
}

// Only the final switch left, perhaps without the old key: the state's parameters go into
// the line only when its switch MAC verifies with the new key; a state without one (from
// before the switch) takes both keys.
TEST_CASE("reencrypt run: --resume with only the switch left checks the state with the new key",
          "[reencrypt]") {
  RunFixture f;
  TabFixture t(f);
  const fs::path away = f.dir / "new.key.away";
  const fs::path early = f.dir / "state.early";
  ReencryptSteps steps = f.steps();
  // The state as the run wrote it at the start, kept; then the cut after the line's rewrite
  // (the new key file gone, as in the test above).
  steps.hooks.progress = [&](const lbscrypt::Progress &p) {
    if (!fs::exists(early)) {
      fs::copy_file(f.state, early);
    }
    if (p.done_bytes == kRunTestBytes) {
      fs::rename(t.new_key_file, away);
    }
  };
  const auto cut = lbscrypt::reencrypt_offline(t.request(false), f.env, steps);
  REQUIRE_FALSE(cut.ok());
  REQUIRE(fs::exists(early));
  fs::rename(away, t.new_key_file);
  const auto sealed = lbscrypt::read_state(f.state);
  REQUIRE(sealed.ok());
  CHECK(sealed->switch_mac.size() == 32);
  const auto started = lbscrypt::read_state(early);
  REQUIRE(started.ok());
  CHECK(started->switch_mac.empty());
  const std::string genuine = run_read_text(f.state);
  const auto edit_state = [&](const std::function<void(nlohmann::ordered_json &)> &edit) {
    auto doc = nlohmann::ordered_json::parse(genuine);
    edit(doc);
    std::ofstream(f.state, std::ios::binary | std::ios::trunc) << doc.dump(2) << "\n";
  };
  f.keys_asked = 0;

  SECTION("a parameter edited after the switch began: refused, no file changed, no key asked") {
    edit_state([](nlohmann::ordered_json &d) { d["new_side"]["sector_size"] = 512; });
    const auto refused = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK_THAT(refused.error().message,
               Catch::Contains("the state's final-switch MAC does not verify with the new key"));
    CHECK(f.keys_asked == 0);
    CHECK(run_read_text(t.tab) == t.after);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.old_key)));
    CHECK(fs::exists(t.new_key_file));
    CHECK(fs::exists(f.state));
    CHECK_FALSE(f.registry_empty());
  }
  SECTION("the switch MAC taken out: the keyed resume refuses the state's own MAC") {
    edit_state([](nlohmann::ordered_json &d) { d["switch_mac"] = ""; });
    const auto refused = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK_THAT(refused.error().message,
               Catch::Contains("the state's MAC does not verify with both keys"));
    CHECK(f.keys_asked == 2);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.old_key)));
    CHECK(fs::exists(t.new_key_file));
    CHECK(fs::exists(f.state));
  }
  SECTION("the state from before the switch: both keys asked, and the run finishes") {
    fs::copy_file(early, f.state, fs::copy_options::overwrite_existing);
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 2);
    CHECK(run_read_text(t.tab) == t.after);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.new_key)));
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
    CHECK(f.read_new() == f.plain);
  }
  SECTION("as the run left it: the switch finishes with the new key file, no key asked") {
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 0);
    CHECK(run_read_text(t.key_file) == std::string(64, static_cast<char>(f.new_key)));
    CHECK_FALSE(fs::exists(f.state));
  }
}

TEST_CASE("reencrypt run: --update-tab refusals before a byte is written", "[reencrypt]") {
  RunFixture f;
  TabFixture t(f);
  const Bytes before = f.volume.raw;
  ReencryptRequest request = t.request(false);
  std::string message;

  SECTION("a listed volume without --update-tab") {
    request.update_tab.reset();
    message = "--update-tab";
  }
  SECTION("an x-initrd.attach line") {
    std::string text = t.before;
    const std::string plain_opts = "discard,sector-size=512";
    text.replace(text.find(plain_opts), plain_opts.size(), "discard,x-initrd.attach");
    request.tab_text = text;
    message = "x-initrd.attach";
  }
  SECTION("a line the boot needs, without x-initrd.attach: its line kept, another system") {
    request.boot.uses["data"].push_back({"/", "fstab"});
    message =
        "is data in lbscrypttab, which holds / (fstab): the initramfs opens it at boot and "
        "cannot resume a run, so a reboot mid-way would not boot; keep its line as it is "
        "and reencrypt it from a rescue or live system";
  }
  SECTION("a line the boot needs, without --update-tab: not told to comment it out") {
    request.update_tab.reset();
    request.boot.uses["data"].push_back({"the resume device",
                                         "resume= on the kernel command "
                                         "line"});
    message = "which holds the resume device (resume= on the kernel command line)";
  }
  SECTION("a new passphrase for a line that reads a key file") {
    request.update_tab->new_key = lbscrypt::TabUpdate::NewKey::passphrase;
    message = "--new-key-file";
  }
  SECTION("a new key file in another directory") {
    request.update_tab->new_key_file = (f.dir / "elsewhere.key").string();
    message = "move it into " + t.keys.string();
  }
  SECTION("a new key read at another offset") {
    request.update_tab->new_keyfile_offset = 64;
    message = "--new-keyfile-offset 0";
  }
  SECTION("a new iv_large_sectors") {
    request.new_side.iv_large_sectors = true;
    message = "iv_large_sectors";
  }
  const auto r = lbscrypt::reencrypt_offline(request, f.env, f.steps());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::refused);
  CHECK_THAT(r.error().message, Catch::Contains(message));
  CHECK(f.keys_asked == 0);
  CHECK(f.volume.raw == before);
  CHECK(run_read_text(t.tab) == t.before);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
}

TEST_CASE("reencrypt run: --resume refuses a device without the run's identity, asking no key",
          "[reencrypt]") {
  RunFixture f;
  f.stop_after_first = true;
  REQUIRE(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()).ok());
  // The state as a run on a loop device would have recorded it: the stand-in device (a file
  // here) is no block device, and no device in the fixture's empty sysfs has that file.
  auto state = lbscrypt::read_state(f.state);
  REQUIRE(state.ok());
  lbscrypt::DeviceFingerprint loop;
  loop.size_bytes = kRunTestBytes;
  loop.loop = lbscrypt::LoopBacking{"/srv/a.img", {8, 1}, 99, 0, 0};
  state->device_identity = loop;
  REQUIRE(lbscrypt::write_state(f.state, *state).ok());
  const Bytes before = f.volume.raw;
  f.keys_asked = 0;
  f.stop_after_first = false;
  const auto refused = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::refused);
  CHECK(refused.error().message ==
        f.device +
            " is no block device now, and no device is the run's (a loop device over "
            "/srv/a.img, inode 99 on 8:1): attach or connect it and resume");
  CHECK(f.keys_asked == 0);
  CHECK(f.volume.made == 1);  // the first run's only
  CHECK(f.volume.raw == before);
  CHECK(fs::exists(f.state));
}

TEST_CASE("reencrypt run: --resume removes what a killed run left, unless it is open",
          "[reencrypt]") {
  RunFixture f;
  f.stop_after_first = true;
  REQUIRE(lbscrypt::reencrypt_offline(f.request(false), f.env, f.steps()).ok());
  const auto state = lbscrypt::read_state(f.state);
  REQUIRE(state.ok());
  // What a kill -9 leaves: the run's two private mappings (names and uuids written out here
  // as reencrypt/io.hpp describes them), beside a mapping that is not the run's.
  const std::string prefix = "lbscrypt-reenc-" + state->run_id.substr(0, 16) + "-";
  for (const std::string side : {"old", "new"}) {
    lbscrypt::CreateRequest request;
    request.name = prefix + side;
    request.uuid = "LBSCRYPT-REENC-" + state->run_id + "-" + side;
    request.length = kRunTestBytes / 512;
    request.params.append("aes-xts-plain64 00 0 7:0 0");
    REQUIRE(f.kernel.create(request).ok());
  }
  lbscrypt::CreateRequest other;
  other.name = "vol";
  other.uuid = "CRYPT-PLAIN-vol";
  other.length = 8;
  other.params.append("aes-xts-plain64 00 0 7:1 0");
  REQUIRE(f.kernel.create(other).ok());
  f.stop_after_first = false;

  SECTION("one open: refused, nothing removed or written, no key asked") {
    f.kernel.mappings.at(prefix + "new").info.open_count = 1;
    const Bytes before = f.volume.raw;
    f.keys_asked = 0;
    const auto refused = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::busy);
    CHECK_THAT(refused.error().message,
               Catch::StartsWith("the run's private mapping " + prefix + "new (dm-1) is open"));
    CHECK(f.kernel.mappings.size() == 3);
    CHECK(f.keys_asked == 0);
    CHECK(f.volume.raw == before);
  }
  SECTION("closed: removed, and the run finishes") {
    const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
    REQUIRE(resumed.ok());
    CHECK(resumed->report.outcome == EngineOutcome::finished);
    CHECK(f.read_new() == f.plain);
    REQUIRE(f.kernel.mappings.size() == 1);
    CHECK(f.kernel.mappings.contains("vol"));
  }
}

// ---- a state that cannot be trusted: refused before a byte is written ------------------------

namespace {

// The whole in-memory device, hashed: a refusal leaves it as it was.
std::string device_hash(const RunFixture &f) {
  const auto digest = lbscrypt::test::sha256_of(f.volume.raw);
  return {digest.begin(), digest.end()};
}

// The run stopped after `hotzones` hotzones (of 4), its state and journal left.
void stop_after(RunFixture &f, int hotzones) {
  f.stop_after = hotzones;
  const auto stopped =
      lbscrypt::reencrypt_offline(f.request(f.hotzones_seen > 0), f.env, f.steps());
  REQUIRE(stopped.ok());
  REQUIRE(stopped->report.outcome == EngineOutcome::stopped);
  REQUIRE(stopped->report.progress.done_bytes ==
          static_cast<std::uint64_t>(hotzones) * kRunTestHotzone);
  f.stop_after = 0;
}

// A --resume with the run's keys is refused with `needle` in its one line, the device's hash
// unchanged.
void resume_refused(RunFixture &f, const std::string &needle) {
  const std::string before = device_hash(f);
  const auto refused = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK_THAT(refused.error().message, Catch::Contains(needle));
  CHECK(refused.error().message.find('\n') == std::string::npos);
  CHECK(device_hash(f) == before);
  CHECK(fs::exists(f.state));  // the run is kept
}

// The positive control: with the files the run wrote, --resume finishes and reads back.
void resume_finishes(RunFixture &f) {
  const auto resumed = lbscrypt::reencrypt_offline(f.request(true), f.env, f.steps());
  REQUIRE(resumed.ok());
  CHECK(resumed->report.outcome == EngineOutcome::finished);
  CHECK(f.read_new() == f.plain);
  CHECK_FALSE(fs::exists(f.state));
}

using lbscrypt::test::file_bytes;
using lbscrypt::test::FileBytes;
using lbscrypt::test::put_bytes;

void write_file(const fs::path &path, const FileBytes &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void put_u64(FileBytes &slot, std::size_t at, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) {
    slot[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

}  // namespace

TEST_CASE("reencrypt run: a forged journaled slot and data area are refused", "[reencrypt]") {
  RunFixture f;
  stop_after(f, 1);
  const fs::path journal = lbscrypt::journal_path(f.state);
  const FileBytes genuine = file_bytes(journal);
  // Slot 0 made to say "hotzone 1 (at 65536) is in flight", its copy 64 KiB of 0x5a: the
  // copy's digest (bytes 56-88) its SHA-256, the slot's own SHA-256 made right again. Only
  // the run's keys could make the MACs.
  const FileBytes forged_data(kRunTestHotzone, 0x5a);
  FileBytes slot0(genuine.begin(), genuine.begin() + 4096);
  put_u64(slot0, 32, 1);
  put_u64(slot0, 40, kRunTestHotzone);
  put_u64(slot0, 48, kRunTestHotzone);
  const auto data_digest = lbscrypt::test::sha256_of(forged_data);
  std::copy(data_digest.begin(), data_digest.end(), slot0.begin() + 56);
  lbscrypt::test::reseal_slot_checksum(slot0);
  put_bytes(journal, 0, slot0);
  put_bytes(journal, 8192, forged_data);
  resume_refused(f, "its journaled slot does not verify with both keys of this run");

  write_file(journal, genuine);
  resume_finishes(f);
}

TEST_CASE("reencrypt run: an edited parameter in the state file is refused", "[reencrypt]") {
  std::function<void(nlohmann::ordered_json &)> edit;
  SECTION("cipher") {
    edit = [](auto &d) { d["old_side"]["cipher"] = "aes-xts-plain"; };
  }
  SECTION("sector size") {
    edit = [](auto &d) { d["new_side"]["sector_size"] = 8192; };
  }
  SECTION("offset") {
    edit = [](auto &d) { d["offset"] = 8; };
  }
  SECTION("skip") {
    edit = [](auto &d) { d["skip"] = 8; };
  }
  SECTION("size") {
    edit = [](auto &d) { d["data_bytes"] = 3 * kRunTestHotzone; };
  }
  RunFixture f;
  // A device larger than the run's data, so an offset moved on still fits it.
  f.devices.sizes[f.device] = kRunTestBytes + kRunTestHotzone;
  ReencryptRequest start = f.request(false);
  start.old_mapping.size = kRunTestBytes / 512;
  f.stop_after = 1;
  const auto stopped = lbscrypt::reencrypt_offline(start, f.env, f.steps());
  REQUIRE(stopped.ok());
  REQUIRE(stopped->report.outcome == EngineOutcome::stopped);
  f.stop_after = 0;
  const FileBytes genuine = file_bytes(f.state);
  auto doc = nlohmann::ordered_json::parse(genuine.begin(), genuine.end());
  edit(doc);
  const std::string text = doc.dump(2) + "\n";
  write_file(f.state, FileBytes(text.begin(), text.end()));
  resume_refused(f, "the state's MAC does not verify with both keys");

  write_file(f.state, genuine);
  resume_finishes(f);
}

TEST_CASE("reencrypt run: a slot from another run is refused", "[reencrypt]") {
  RunFixture f;
  stop_after(f, 1);
  // Another run, same keys, another device: stopped after 2 hotzones. Its completed slot
  // (position 131072) copied into this run's journal, the run id rewritten to this run's and
  // the slot's SHA-256 made right again.
  RunFixture g("other");
  stop_after(g, 2);
  const fs::path journal = lbscrypt::journal_path(f.state);
  const FileBytes genuine = file_bytes(journal);
  FileBytes theirs = lbscrypt::test::file_range(lbscrypt::journal_path(g.state), 4096, 4096);
  std::copy(genuine.begin() + 16, genuine.begin() + 32, theirs.begin() + 16);
  lbscrypt::test::reseal_slot_checksum(theirs);
  put_bytes(journal, 4096, theirs);
  resume_refused(f, "its completed slot does not verify with both keys of this run");

  write_file(journal, genuine);
  resume_finishes(f);
}

TEST_CASE("reencrypt run: a journal rolled back in time is refused, never converted twice",
          "[reencrypt]") {
  RunFixture f;
  stop_after(f, 1);
  // A copy of the state and journal after hotzone 1, as a snapshot or a backup keeps them.
  const FileBytes state_copy = file_bytes(f.state);
  const FileBytes journal_copy = file_bytes(lbscrypt::journal_path(f.state));
  stop_after(f, 3);  // two hotzones more
  const FileBytes state_now = file_bytes(f.state);
  const FileBytes journal_now = file_bytes(lbscrypt::journal_path(f.state));
  write_file(f.state, state_copy);
  write_file(lbscrypt::journal_path(f.state), journal_copy);
  resume_refused(f,
                 "the journal is older than the device: at byte 65536 the data is already "
                 "in the new parameters");

  // The journal the run last wrote finishes it.
  write_file(f.state, state_now);
  write_file(lbscrypt::journal_path(f.state), journal_now);
  resume_finishes(f);
}

TEST_CASE("reencrypt run: a journal rolled back to before the first hotzone is refused",
          "[reencrypt]") {
  RunFixture f;
  stop_after(f, 1);
  // The journal as it was made, before any record: the run's position would be 0.
  const fs::path journal = lbscrypt::journal_path(f.state);
  const FileBytes journal_now = file_bytes(journal);
  write_file(journal, FileBytes(journal_now.size(), 0));
  resume_refused(f,
                 "the journal is older than the device: at byte 0 the data is already in "
                 "the new parameters");
  write_file(journal, journal_now);
  resume_finishes(f);
}

TEST_CASE("reencrypt run: --update-tab keeps a sealed line's credential or refuses",
          "[reencrypt][sealed]") {
  const auto tab = lbscrypt::parse_lbscrypttab(
      "data /dev/vdb /etc/lbscrypt/data.cred cipher=aes-xts-plain64,size=256,tpm2-device=auto\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.entries.size() == 1);
  const lbscrypt::CryptSide side{"aes-xts-plain64", 32, 4096, false};
  lbscrypt::TabUpdate update;
  update.new_key = lbscrypt::TabUpdate::NewKey::kept;
  const auto kept = lbscrypt::plan_tab_change(tab.entries[0], side, update, "/etc/lbscrypttab");
  REQUIRE(kept.ok());
  CHECK(kept->options == "cipher=aes-xts-plain64,size=256,tpm2-device=auto,sector-size=4096");
  CHECK_FALSE(kept->key_file);
  update.new_key = lbscrypt::TabUpdate::NewKey::file;
  update.new_key_file = "/etc/lbscrypt/new.key";
  const auto file = lbscrypt::plan_tab_change(tab.entries[0], side, update, "/etc/lbscrypttab");
  REQUIRE_FALSE(file.ok());
  CHECK(file.error().code == lbscrypt::Errc::refused);
  CHECK_THAT(file.error().message,
             Catch::Contains("opens with the key sealed in /etc/lbscrypt/data.cred "
                             "(tpm2-device=), and --update-tab would put a clear key in its "
                             "place: seal the new key under that credential's name (lbscrypt "
                             "seal --name data --random BYTES /etc/lbscrypt/data.new.cred) and "
                             "give it with --new-tpm2-credential, or give --keep-key"));
  update.new_key = lbscrypt::TabUpdate::NewKey::passphrase;
  CHECK_FALSE(lbscrypt::plan_tab_change(tab.entries[0], side, update, "/etc/lbscrypttab").ok());
}

// ---- --update-tab with a new key sealed to the TPM2 ----------------------------------------

namespace {

// systemd-creds over a TPM2 that lives in this memory: encrypt keeps the secret under the name
// it is sealed with and writes the credential file as a token that holds neither; decrypt
// gives it back through the output pipe only under that name, as systemd checks it. Reached
// through the library's own seal_secret and sealed_secret, so their argv is what it reads.
struct FakeCreds {
  struct Sealed {
    std::string name;
    std::string secret;
  };
  std::map<std::string, Sealed> tpm;  // by the token in the credential file
  std::vector<std::vector<std::string>> calls;

  [[nodiscard]] lbscrypt::ChildRunner runner() {
    return [this](const std::vector<std::string> &argv, const SecretBuffer *input,
                  SecretBuffer *output) -> Result<lbscrypt::ChildOutcome> {
      calls.push_back(argv);
      std::string name;
      for (const std::string &word : argv) {
        if (word.starts_with("--name=")) {
          name = word.substr(std::string_view("--name=").size());
        }
      }
      if (argv.at(1) == "encrypt") {
        const std::string token = "fake-tpm2-credential-" + std::to_string(tpm.size());
        tpm[token] = Sealed{name, std::string(input->view())};
        std::ofstream(argv.back(), std::ios::binary) << token;
        return lbscrypt::ChildOutcome{0, ""};
      }
      std::ifstream in(argv.at(argv.size() - 2), std::ios::binary);
      std::string token;
      in >> token;
      const auto found = tpm.find(token);
      if (found == tpm.end()) {
        return lbscrypt::ChildOutcome{1, "Failed to decrypt: not a credential"};
      }
      if (found->second.name != name) {
        return lbscrypt::ChildOutcome{1, "Embedded credential name '" + found->second.name +
                                             "' does not match filename '" + name + "', refusing."};
      }
      output->append(found->second.secret);
      return lbscrypt::ChildOutcome{0, ""};
    };
  }

  [[nodiscard]] std::function<Result<SecretBuffer>(const lbscrypt::SealedKey &)> unseal() {
    return [this](const lbscrypt::SealedKey &key) {
      return lbscrypt::sealed_secret(key, std::nullopt, runner());
    };
  }

  void seal(const fs::path &file, const std::string &name, const std::string &secret) {
    const lbscrypt::SealRequest request{file.string(), {7}, name};
    REQUIRE(
        lbscrypt::seal_secret(request, SecretBuffer(secret.data(), secret.size()), runner()).ok());
  }

  // Whether a decrypt of `file` under `name` was asked for.
  [[nodiscard]] bool unsealed(const fs::path &file, const std::string &name) const {
    const std::vector<std::string> argv{"systemd-creds", "decrypt", "--name=" + name, file.string(),
                                        "-"};
    return std::find(calls.begin(), calls.end(), argv) != calls.end();
  }
};

// The files under `dir` that hold `bytes` anywhere.
std::vector<fs::path> files_holding(const fs::path &dir, const std::string &bytes) {
  std::vector<fs::path> found;
  for (const auto &entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && run_read_text(entry.path()).find(bytes) != std::string::npos) {
      found.push_back(entry.path());
    }
  }
  return found;
}

// lbscrypttab with the volume's line sealed (tpm2-device=auto): its credential data.cred holds
// the old key, and data.new.cred, sealed under the name "data" beside it, the new one. The new
// key's first byte is the fixture's new key (the fake cipher's); the rest tell it from any
// other bytes.
struct SealedTabFixture {
  RunFixture &f;
  FakeCreds creds;
  fs::path tab;
  fs::path keys;
  fs::path credential;
  fs::path new_credential;
  std::string new_secret;
  std::string new_token;  // what the new credential file holds
  std::string before;
  std::string after;  // written here by hand: the new sector size, all else kept

  explicit SealedTabFixture(RunFixture &fixture) : f(fixture) {
    tab = f.dir / "lbscrypttab";
    keys = f.dir / "keys";
    fs::create_directories(keys);
    credential = keys / "data.cred";
    new_credential = keys / "data.new.cred";
    new_secret.push_back(static_cast<char>(f.new_key));
    for (int i = 1; i < 64; ++i) {
      new_secret.push_back(static_cast<char>(0x80 + i * 3));
    }
    creds.seal(credential, "data", std::string(64, static_cast<char>(f.old_key)));
    creds.seal(new_credential, "data", new_secret);
    new_token = run_read_text(new_credential);
    const std::string line = "data " + f.device + " " + credential.string() +
                             " cipher=aes-xts-plain64,size=512,tpm2-device=auto,sector-size=";
    before = "# lbscrypttab\n" + line + "512\n";
    after = "# lbscrypttab\n" + line + "4096\n";
    std::ofstream(tab, std::ios::binary) << before;
  }

  [[nodiscard]] ReencryptRequest request(bool resume) {
    ReencryptRequest r = f.request(resume);
    r.tab_text = run_read_text(tab);
    r.tab_path = tab.string();
    lbscrypt::TabUpdate update;
    update.new_key = lbscrypt::TabUpdate::NewKey::sealed;
    update.new_key_file = new_credential.string();
    update.unseal = creds.unseal();
    r.update_tab = update;
    return r;
  }

  // The steps: the old key given (as --tpm2-credential would unseal it); the new key never
  // asked for, the run unseals it.
  [[nodiscard]] ReencryptSteps steps() {
    ReencryptSteps s = f.steps();
    s.new_key = [this](std::uint32_t) -> Result<SecretBuffer> {
      ++f.keys_asked;
      return lbscrypt::make_error(Errc::key, "the new key was asked for");
    };
    return s;
  }
};

}  // namespace

TEST_CASE("reencrypt run: --update-tab seals the new key at the switch, no clear copy left",
          "[reencrypt][sealed]") {
  RunFixture f;
  SealedTabFixture t(f);
  REQUIRE(files_holding(f.dir, t.new_secret).empty());
  ReencryptSteps steps = t.steps();
  // While the run goes, the state, its journal and every other file are searched for the new
  // key's bytes.
  std::vector<fs::path> seen;
  int searched = 0;
  steps.hooks.progress = [&](const lbscrypt::Progress &) {
    ++f.hotzones_seen;
    CHECK(fs::exists(f.state));
    const auto found = files_holding(f.dir, t.new_secret);
    seen.insert(seen.end(), found.begin(), found.end());
    ++searched;
  };
  const auto outcome = lbscrypt::reencrypt_offline(t.request(false), f.env, steps);
  REQUIRE(outcome.ok());
  CHECK(f.read_new() == f.plain);
  CHECK(f.keys_asked == 1);  // the old key; the new one came from the new credential
  CHECK(t.creds.unsealed(t.new_credential, "data"));
  CHECK(run_read_text(t.tab) == t.after);
  // The new credential is now the line's; the old one is gone.
  CHECK(run_read_text(t.credential) == t.new_token);
  CHECK_FALSE(fs::exists(t.new_credential));
  REQUIRE(outcome->tab.has_value());
  CHECK(outcome->tab->key_replaced);
  CHECK(outcome->tab->rewritten);
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
  // The line's credential opens the volume with the new key: unsealed as the line unseals it.
  const auto line_key =
      t.creds.unseal()(lbscrypt::SealedKey{t.credential.string(), std::nullopt, std::nullopt});
  REQUIRE(line_key.ok());
  CHECK(line_key->view() == t.new_secret);
  // No file held the new key in the clear, during the run or after it.
  CHECK(searched == 4);
  CHECK(seen.empty());
  CHECK(files_holding(f.dir, t.new_secret).empty());
  // The search finds the bytes where they are.
  std::ofstream(f.dir / "control", std::ios::binary) << "x" << t.new_secret << "y";
  CHECK(files_holding(f.dir, t.new_secret) == std::vector<fs::path>{f.dir / "control"});
}

TEST_CASE("reencrypt run: a cut in a sealed switch, before and after the rename",
          "[reencrypt][sealed]") {
  RunFixture f;
  SealedTabFixture t(f);
  const fs::path away = f.dir / "new.cred.away";
  ReencryptSteps steps = t.steps();
  // After the last hotzone the new credential goes away: the switch rewrites the line, then
  // cannot show a credential holds the new key, and stops as a cut after the rewrite leaves it.
  steps.hooks.progress = [&](const lbscrypt::Progress &p) {
    if (p.done_bytes == kRunTestBytes) {
      fs::rename(t.new_credential, away);
    }
  };
  const std::string old_token = run_read_text(t.credential);
  const auto cut = lbscrypt::reencrypt_offline(t.request(false), f.env, steps);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().code == Errc::key);
  CHECK_THAT(cut.error().message,
             Catch::Contains("the new credential " + t.new_credential.string() + " is gone"));
  CHECK_THAT(cut.error().message, Catch::Contains("--resume"));
  CHECK(run_read_text(t.tab) == t.after);
  CHECK(run_read_text(t.credential) == old_token);
  CHECK(fs::exists(f.state));
  CHECK_FALSE(f.registry_empty());
  CHECK(f.read_new() == f.plain);
  f.keys_asked = 0;
  t.creds.calls.clear();

  SECTION("not renamed yet: --resume unseals the new credential, renames it, asks no key") {
    fs::rename(away, t.new_credential);
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, t.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 0);
    CHECK(t.creds.unsealed(t.new_credential, "data"));
    REQUIRE(resumed->tab.has_value());
    CHECK_FALSE(resumed->tab->rewritten);
    CHECK(resumed->tab->key_replaced);
    CHECK(run_read_text(t.credential) == t.new_token);
    CHECK_FALSE(fs::exists(t.new_credential));
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
  }
  SECTION("renamed before the cut: --resume unseals the line's credential and finishes") {
    fs::rename(away, t.credential);
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, t.steps());
    REQUIRE(resumed.ok());
    CHECK(f.keys_asked == 0);
    CHECK(t.creds.unsealed(t.credential, "data"));
    REQUIRE(resumed->tab.has_value());
    CHECK_FALSE(resumed->tab->rewritten);
    CHECK_FALSE(resumed->tab->key_replaced);
    CHECK(run_read_text(t.credential) == t.new_token);
    CHECK_FALSE(fs::exists(f.state));
    CHECK(f.registry_empty());
  }
  SECTION("another key sealed in the new credential: refused, nothing renamed, state kept") {
    t.creds.seal(t.new_credential, "data", std::string(64, 'z'));
    const auto resumed = lbscrypt::reencrypt_offline(t.request(true), f.env, t.steps());
    REQUIRE_FALSE(resumed.ok());
    CHECK(resumed.error().code == Errc::key);
    CHECK(run_read_text(t.credential) == old_token);
    CHECK(fs::exists(t.new_credential));
    CHECK(fs::exists(f.state));
  }
  CHECK(files_holding(f.dir, t.new_secret).empty());
}

TEST_CASE("reencrypt run: a sealed line's new key refused before a byte is written",
          "[reencrypt][sealed]") {
  RunFixture f;
  SealedTabFixture t(f);
  const Bytes before = f.volume.raw;
  ReencryptRequest request = t.request(false);
  std::string message;
  Errc code = Errc::refused;
  int keys = 0;

  SECTION("the new credential sealed under its own name: seal it with --name") {
    t.creds.seal(t.new_credential, "data.new", t.new_secret);
    code = Errc::key;
    keys = 1;  // the old key, asked for first
    message = t.tab.string() + "): the new credential " + t.new_credential.string() + " replaces " +
              t.credential.string() +
              " at the end, so it must unseal under that credential's name, data: the TPM2 did "
              "not unseal " +
              t.new_credential.string() +
              " (credential data): systemd-creds: Embedded credential name 'data.new' does not "
              "match filename 'data', refusing.; seal the new key under it (lbscrypt seal --name "
              "data ... " +
              t.new_credential.string() + ") and run the command again";
  }
  SECTION("the new credential in another directory") {
    const fs::path elsewhere = f.dir / "data.new.cred";
    t.creds.seal(elsewhere, "data", t.new_secret);
    request.update_tab->new_key_file = elsewhere.string();
    message = "reads its key from " + t.credential.string() + ", and the new credential " +
              elsewhere.string() + " is in another directory: move it into " + t.keys.string();
  }
  SECTION("a new key file for a sealed line: seal it and give --new-tpm2-credential") {
    request.update_tab->new_key = lbscrypt::TabUpdate::NewKey::file;
    message =
        "would put a clear key in its place: seal the new key under that credential's "
        "name (lbscrypt seal --name data --random BYTES " +
        (t.keys / "data.new.cred").string() + ") and give it with --new-tpm2-credential";
  }
  SECTION("a new passphrase for a sealed line") {
    request.update_tab->new_key = lbscrypt::TabUpdate::NewKey::passphrase;
    message = "--new-tpm2-credential";
  }
  SECTION("a passphrase sealed for a line that unseals a key") {
    request.update_tab->sealed_passphrase = true;
    message = "unseals a key, and " + t.new_credential.string() +
              " is given as a passphrase (--new-sealed-passphrase)";
  }
  SECTION("a new credential for a line that reads a key file") {
    std::string text = t.before;
    const std::string sealed = ",tpm2-device=auto";
    text.replace(text.find(sealed), sealed.size(), "");
    text.replace(text.find(t.credential.string()), t.credential.string().size(),
                 (t.keys / "data.key").string());
    std::ofstream(t.tab, std::ios::binary | std::ios::trunc) << text;
    request.tab_text = text;
    t.before = text;
    message = "reads its key from the key file " + (t.keys / "data.key").string() +
              ", and the new key is sealed in " + t.new_credential.string() +
              ": give the new key in a key file with --new-key-file";
  }
  const auto r = lbscrypt::reencrypt_offline(request, f.env, t.steps());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == code);
  CHECK_THAT(r.error().message, Catch::Contains(message));
  CHECK(f.keys_asked == keys);
  CHECK(f.volume.raw == before);
  CHECK(run_read_text(t.tab) == t.before);
  CHECK(fs::exists(t.credential));
  CHECK_FALSE(fs::exists(f.state));
  CHECK(f.registry_empty());
}
