// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt engine on an in-memory volume: the fake cipher (fake_cipher.hpp), a fake device
// whose writes are volatile until flush() (a power cut loses or tears them in 512-byte units), and
// a fake journal whose writes are durable when they return but tear when the cut comes during one.
// The power is cut during every call of a run, in every tear shape, and a second run must then
// finish with the plaintext intact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fake_cipher.hpp"
#include "lbscrypt/reencrypt/core.hpp"

using lbscrypt::CompletedRecord;
using lbscrypt::CryptSide;
using lbscrypt::EngineHooks;
using lbscrypt::EngineOutcome;
using lbscrypt::EngineReport;
using lbscrypt::Errc;
using lbscrypt::JournaledRecord;
using lbscrypt::JournalSlots;
using lbscrypt::Ok;
using lbscrypt::Progress;
using lbscrypt::ReencryptState;
using lbscrypt::Result;
using lbscrypt::test::fake_crypt;
using lbscrypt::test::fake_iv;
using lbscrypt::test::fake_keystream;

namespace {

using Bytes = std::vector<std::uint8_t>;

// ---- a fake MAC: FNV-1a 64 of domain, position and bytes, in each of the MAC's four words ---
lbscrypt::RunMac fake_mac(std::string_view domain, std::uint64_t position,
                          std::span<const std::uint8_t> bytes) {
  std::uint64_t h = 14695981039346656037ULL;
  const auto mix = [&h](std::uint8_t b) { h = (h ^ b) * 1099511628211ULL; };
  for (const char c : domain) {
    mix(static_cast<std::uint8_t>(c));
  }
  for (int i = 0; i < 8; ++i) {
    mix(static_cast<std::uint8_t>(position >> (8 * i)));
  }
  for (const std::uint8_t b : bytes) {
    mix(b);
  }
  lbscrypt::RunMac out{};
  for (std::size_t i = 0; i < out.size(); ++i) {
    out.at(i) = static_cast<std::uint8_t>(h >> (8 * (i % 8)));
  }
  return out;
}

// ---- the power ------------------------------------------------------------------------------
enum class IoTear { lost, landed, front_half, odd_units };  // each unflushed device write
enum class SlotTear { old_kept, new_written, half_each };   // the journal write under way
constexpr std::array kIoTears{IoTear::lost, IoTear::landed, IoTear::front_half, IoTear::odd_units};
constexpr std::array kSlotTears{SlotTear::old_kept, SlotTear::new_written, SlotTear::half_each};

// Counts every call of the device and the journal; cuts the power during one of them, or fails
// one with an I/O error.
struct Power {
  enum class Step { run, cut, dead, fail };
  std::uint64_t calls = 0;
  std::optional<std::uint64_t> cut_at;
  std::optional<std::uint64_t> fail_at;
  IoTear io_tear = IoTear::lost;
  SlotTear slot_tear = SlotTear::old_kept;
  bool dead = false;
  int io_writes = 0;  // write_raw, write_new and flush calls
  int journal_writes = 0;

  Step step() {
    const std::uint64_t call = calls++;
    if (dead) {
      return Step::dead;
    }
    if (cut_at && call == *cut_at) {
      dead = true;
      return Step::cut;
    }
    return fail_at && call == *fail_at ? Step::fail : Step::run;
  }
  [[nodiscard]] lbscrypt::Error error(Step s) const {
    return lbscrypt::make_error(
        Errc::device, s == Step::fail ? "injected I/O error at call " + std::to_string(*fail_at)
                                      : std::string("power cut"));
  }
};

// ---- the device: durable bytes and a volatile cache -----------------------------------------
class FakeIo final : public lbscrypt::ReencryptIo {
 public:
  FakeIo(const ReencryptState &state, std::uint8_t old_key, std::uint8_t new_key, Bytes &disk,
         Power &power)
      : state_(state), old_key_(old_key), new_key_(new_key), disk_(disk), power_(power) {}

  Result<void> read_raw(std::uint64_t position, std::span<std::uint8_t> out) override {
    if (auto r = begin(position, out.size(), nullptr); !r) {
      return r;
    }
    view(position, out);
    return Ok{};
  }
  Result<void> write_raw(std::uint64_t position, std::span<const std::uint8_t> data) override {
    return write(position, Bytes(data.begin(), data.end()));
  }
  Result<void> read_old(std::uint64_t position, std::span<std::uint8_t> out) override {
    return read_through(state_.old_side, old_key_, position, out);
  }
  Result<void> write_new(std::uint64_t position, std::span<const std::uint8_t> data) override {
    Bytes cipher(data.begin(), data.end());
    fake_crypt(state_.new_side, new_key_, state_.skip, position, cipher);
    return write(position, std::move(cipher));
  }
  Result<void> read_new(std::uint64_t position, std::span<std::uint8_t> out) override {
    return read_through(state_.new_side, new_key_, position, out);
  }
  Result<void> flush() override {
    ++power_.io_writes;
    const auto s = power_.step();
    if (s == Power::Step::cut) {
      tear();
    }
    if (s != Power::Step::run) {
      return power_.error(s);
    }
    for (const auto &w : pending_) {
      std::copy(w.bytes.begin(), w.bytes.end(),
                disk_.begin() + static_cast<std::ptrdiff_t>(w.position));
    }
    pending_.clear();
    return Ok{};
  }

  [[nodiscard]] bool clean() const { return pending_.empty(); }

 private:
  struct Pending {
    std::uint64_t position = 0;
    Bytes bytes;
  };

  // The plaintext of one side: the device's bytes (cached writes included) decrypted.
  Result<void> read_through(const CryptSide &side, std::uint8_t key, std::uint64_t position,
                            std::span<std::uint8_t> out) {
    if (auto r = read_raw(position, out); !r) {
      return r;
    }
    fake_crypt(side, key, state_.skip, position, out);
    return Ok{};
  }

  Result<void> write(std::uint64_t position, Bytes bytes) {
    ++power_.io_writes;
    Pending w{position, std::move(bytes)};
    const std::size_t size = w.bytes.size();
    return begin(position, size, &w);
  }

  // Every call covers whole sectors of both sides inside the data; then the power decides.
  Result<void> begin(std::uint64_t position, std::size_t size, Pending *write) {
    for (const CryptSide *side : {&state_.old_side, &state_.new_side}) {
      if (position % side->sector_size != 0 || size % side->sector_size != 0 || size == 0 ||
          position + size > disk_.size()) {
        return lbscrypt::make_error(Errc::invalid_argument, "fake device: not whole sectors");
      }
    }
    const auto s = power_.step();
    if (s == Power::Step::cut) {
      if (write != nullptr) {
        pending_.push_back(std::move(*write));  // in flight: as unflushed as the others
      }
      tear();
    }
    if (s != Power::Step::run) {
      return power_.error(s);
    }
    if (write != nullptr) {
      pending_.push_back(std::move(*write));
    }
    return Ok{};
  }

  void view(std::uint64_t position, std::span<std::uint8_t> out) const {
    std::copy_n(disk_.begin() + static_cast<std::ptrdiff_t>(position), out.size(), out.begin());
    for (const auto &w : pending_) {
      for (std::size_t i = 0; i < w.bytes.size(); ++i) {
        const std::uint64_t at = w.position + i;
        if (at >= position && at < position + out.size()) {
          out[at - position] = w.bytes[i];
        }
      }
    }
  }

  // The cut: each unflushed write lands whole, in part (some of its 512-byte units), or not.
  void tear() {
    for (const auto &w : pending_) {
      const std::size_t units = w.bytes.size() / 512;
      for (std::size_t u = 0; u < units; ++u) {
        const bool lands = power_.io_tear == IoTear::landed ||
                           (power_.io_tear == IoTear::front_half && u < units / 2) ||
                           (power_.io_tear == IoTear::odd_units && u % 2 == 1);
        if (lands) {
          std::copy_n(w.bytes.begin() + static_cast<std::ptrdiff_t>(u * 512), 512,
                      disk_.begin() + static_cast<std::ptrdiff_t>(w.position + u * 512));
        }
      }
    }
    pending_.clear();
  }

  const ReencryptState &state_;
  std::uint8_t old_key_;
  std::uint8_t new_key_;
  Bytes &disk_;
  Power &power_;
  std::vector<Pending> pending_;
};

// ---- the journal: durable writes that tear at a cut -----------------------------------------
struct JournalDisk {
  std::optional<JournaledRecord> journaled;
  bool journaled_torn = false;
  std::optional<CompletedRecord> completed;
  bool completed_torn = false;
  Bytes data;
};

class FakeJournal final : public lbscrypt::JournalStore {
 public:
  FakeJournal(JournalDisk &disk, Power &power) : disk_(disk), power_(power) {}

  // Every journaled record written whole.
  [[nodiscard]] const std::vector<JournaledRecord> &history() const { return history_; }

  Result<JournalSlots> read_slots() override {
    if (const auto s = power_.step(); s != Power::Step::run) {
      return power_.error(s);
    }
    JournalSlots slots;
    slots.journaled = disk_.journaled_torn ? std::nullopt : disk_.journaled;
    slots.completed = disk_.completed_torn ? std::nullopt : disk_.completed;
    slots.completed_blank = !disk_.completed && !disk_.completed_torn;
    return slots;
  }
  Result<void> write_data(std::span<const std::uint8_t> data) override {
    return write_area(Bytes(data.begin(), data.end()));
  }
  Result<void> read_data(std::span<std::uint8_t> data) override {
    if (const auto s = power_.step(); s != Power::Step::run) {
      return power_.error(s);
    }
    if (data.size() > disk_.data.size()) {
      return lbscrypt::make_error(Errc::invalid_argument, "fake journal: beyond the data area");
    }
    std::copy_n(disk_.data.begin(), data.size(), data.begin());
    return Ok{};
  }
  Result<void> write_journaled(const JournaledRecord &record) override {
    ++power_.journal_writes;
    const auto s = power_.step();
    if (s == Power::Step::run ||
        (s == Power::Step::cut && power_.slot_tear == SlotTear::new_written)) {
      disk_.journaled = record;
      disk_.journaled_torn = false;
      if (s == Power::Step::run) {
        history_.push_back(record);
      }
    } else if (s == Power::Step::cut && power_.slot_tear == SlotTear::half_each) {
      disk_.journaled_torn = true;
    }
    return s == Power::Step::run ? Result<void>(Ok{}) : Result<void>(power_.error(s));
  }
  Result<void> write_completed(const CompletedRecord &record) override {
    ++power_.journal_writes;
    const auto s = power_.step();
    if (s == Power::Step::run ||
        (s == Power::Step::cut && power_.slot_tear == SlotTear::new_written)) {
      disk_.completed = record;
      disk_.completed_torn = false;
    } else if (s == Power::Step::cut && power_.slot_tear == SlotTear::half_each) {
      disk_.completed_torn = true;
    }
    return s == Power::Step::run ? Result<void>(Ok{}) : Result<void>(power_.error(s));
  }
  Result<void> wipe_data() override { return write_area(Bytes(disk_.data.size(), 0)); }
  // Not a call of the power: a computation, no I/O.
  Result<lbscrypt::RunMac> mac(std::string_view domain, std::uint64_t position,
                               std::span<const std::uint8_t> bytes) override {
    return fake_mac(domain, position, bytes);
  }

 private:
  // A torn area write: its first half of 512-byte units new, the rest old.
  Result<void> write_area(const Bytes &bytes) {
    ++power_.journal_writes;
    if (bytes.size() > disk_.data.size()) {
      return lbscrypt::make_error(Errc::invalid_argument, "fake journal: beyond the data area");
    }
    const auto s = power_.step();
    std::size_t landed = 0;
    if (s == Power::Step::run ||
        (s == Power::Step::cut && power_.slot_tear == SlotTear::new_written)) {
      landed = bytes.size();
    } else if (s == Power::Step::cut && power_.slot_tear == SlotTear::half_each) {
      landed = bytes.size() / 512 / 2 * 512;
    }
    std::copy_n(bytes.begin(), landed, disk_.data.begin());
    return s == Power::Step::run ? Result<void>(Ok{}) : Result<void>(power_.error(s));
  }

  JournalDisk &disk_;
  Power &power_;
  std::vector<JournaledRecord> history_;
};

// ---- volumes --------------------------------------------------------------------------------
struct Case {
  const char *name = "";
  CryptSide old_side;
  CryptSide new_side;
  std::uint8_t old_key = 0;
  std::uint8_t new_key = 0;
  std::uint64_t skip = 0;
  std::uint64_t data_bytes = 0;
  std::uint64_t hotzone_bytes = 0;

  [[nodiscard]] std::uint64_t hotzones() const {
    return (data_bytes + hotzone_bytes - 1) / hotzone_bytes;
  }
};

CryptSide side(std::uint32_t sector_size, bool large = false) {
  CryptSide s;
  s.cipher = "aes-xts-plain64";
  s.key_bytes = 64;
  s.sector_size = sector_size;
  s.iv_large_sectors = large;
  return s;
}

Bytes plaintext(std::uint64_t bytes) {
  std::mt19937 random(36);  // NOLINT(cert-msc32-c, cert-msc51-cpp): the same bytes each run
  Bytes out(bytes);
  std::generate(out.begin(), out.end(), [&] { return static_cast<std::uint8_t>(random()); });
  return out;
}

// The engine's MAC domain of a unit's plaintext (the larger sector).
constexpr std::string_view kUnitDomain = "unit plaintext";

// The run's state; its first unit's MAC is of `plain`'s first unit (plaintext() by default,
// the plaintext the volumes hold).
ReencryptState state_of(const Case &c, const std::optional<Bytes> &plain = std::nullopt) {
  ReencryptState state;
  state.run_id = "0123456789abcdef0123456789abcdef";
  state.device = "/dev/fake";
  state.skip = c.skip;
  state.data_bytes = c.data_bytes;
  state.hotzone_bytes = c.hotzone_bytes;
  state.old_side = c.old_side;
  state.new_side = c.new_side;
  const std::uint64_t unit = std::max(c.old_side.sector_size, c.new_side.sector_size);
  const Bytes bytes = plain ? *plain : plaintext(c.data_bytes);
  if (bytes.size() >= unit) {
    const auto mac = fake_mac(kUnitDomain, 0, std::span(bytes).first(unit));
    state.first_unit_mac.assign(mac.begin(), mac.end());
  }
  return state;
}

struct Volume {
  Bytes disk;  // the device's durable bytes
  JournalDisk journal;
};

Volume volume_of(const Case &c, const Bytes &plain) {
  Volume v;
  v.disk = plain;
  fake_crypt(c.old_side, c.old_key, c.skip, 0, v.disk);
  v.journal.data.assign(c.hotzone_bytes, 0);
  return v;
}

// The disk read through the new cipher.
Bytes through_new(const Case &c, const Volume &v) {
  Bytes bytes = v.disk;
  fake_crypt(c.new_side, c.new_key, c.skip, 0, bytes);
  return bytes;
}

bool wiped(const Volume &v) {
  return std::all_of(v.journal.data.begin(), v.journal.data.end(),
                     [](std::uint8_t b) { return b == 0; });
}

Result<EngineReport> run(const Case &c, Volume &v, Power &power, const EngineHooks &hooks = {}) {
  const ReencryptState state = state_of(c);
  FakeIo io(state, c.old_key, c.new_key, v.disk, power);
  FakeJournal journal(v.journal, power);
  return lbscrypt::run_engine(state, io, journal, hooks);
}

const Case k512to4096{"512->4096", side(512), side(4096), 0x21, 0x21, 0, 12288, 8192};
const Case k4096to65536{"4096->65536", side(4096), side(65536, true), 0x33, 0x33, 128,
                        196608,        131072};
const Case kKeyAt65536{
    "key at 65536", side(65536, true), side(65536, true), 0x44, 0x9a, 256, 131072, 65536};

}  // namespace

TEST_CASE("reencrypt engine: the fake cipher by hand", "[reencrypt]") {
  // key 0x10, IV 3: byte 0 is 16 + 87 = 103; byte 300 is 16 + 87 + 2100 + 1 = 2204 = 156 mod 256
  CHECK(fake_keystream(0x10, 3, 0) == 103);
  CHECK(fake_keystream(0x10, 3, 300) == 156);
  // skip 8, the 4096-byte sector at 8192: IV 8 + 16 = 24 in 512-byte units, 24 / 8 = 3 in
  // sectors
  CHECK(fake_iv(side(4096), 8, 8192) == 24);
  CHECK(fake_iv(side(4096, true), 8, 8192) == 3);
  Bytes zeros(4096, 0);
  fake_crypt(side(4096, true), 0x10, 8, 8192, zeros);
  CHECK(zeros[0] == 103);
  CHECK(zeros[300] == 156);
  // the second 512-byte sector of a volume at 512 (IV 1) against byte 512 of its first 4096 one
  CHECK(fake_keystream(0x21, 1, 0) == 0x21 + 29);
  CHECK(fake_keystream(0x21, 0, 512) == (0x21 + 3584 + 2) % 256);
}

TEST_CASE("reencrypt engine: hotzone alignment is the largest unit", "[reencrypt]") {
  CHECK(lbscrypt::hotzone_alignment(side(512), side(4096), 512) == 4096);
  CHECK(lbscrypt::hotzone_alignment(side(65536), side(4096), 4096) == 65536);
  CHECK(lbscrypt::hotzone_alignment(side(512), side(512), 4096) == 4096);
}

TEST_CASE("reencrypt engine: a full run converts the volume", "[reencrypt]") {
  const std::array cases{
      Case{"512->4096, hotzones divide", side(512), side(4096), 0x21, 0x21, 0, 40960, 8192},
      Case{"512->4096, last hotzone short", side(512), side(4096), 0x21, 0x21, 0, 40960, 12288},
      Case{"4096->65536, hotzones divide", side(4096), side(65536, true), 0x33, 0x33, 128, 262144,
           65536},
      Case{"4096->65536, last hotzone short", side(4096), side(65536, true), 0x33, 0x33, 128,
           262144, 196608},
      Case{"key at 65536, hotzones divide", side(65536, true), side(65536, true), 0x44, 0x9a, 256,
           327680, 65536},
      Case{"key at 65536, last hotzone short", side(65536), side(65536), 0x44, 0x9a, 256, 327680,
           131072},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    const Bytes plain = plaintext(c.data_bytes);
    Volume v = volume_of(c, plain);
    REQUIRE(through_new(c, v) != plain);  // the two ciphers differ
    const ReencryptState state = state_of(c);
    Power power;
    FakeIo io(state, c.old_key, c.new_key, v.disk, power);
    FakeJournal journal(v.journal, power);
    std::vector<Progress> seen;
    EngineHooks hooks;
    hooks.progress = [&](const Progress &p) { seen.push_back(p); };
    const auto report = lbscrypt::run_engine(state, io, journal, hooks);
    REQUIRE(report);
    CHECK(report->outcome == EngineOutcome::finished);
    CHECK_FALSE(report->recovered);
    CHECK(report->progress.done_bytes == c.data_bytes);
    CHECK(report->progress.total_bytes == c.data_bytes);
    CHECK(report->progress.hotzones == c.hotzones());
    CHECK(io.clean());
    CHECK(through_new(c, v) == plain);
    CHECK(wiped(v));
    CHECK(power.calls == 2 + 8 * c.hotzones());
    REQUIRE(seen.size() == c.hotzones());
    REQUIRE(journal.history().size() == c.hotzones());
    for (std::uint64_t i = 0; i < c.hotzones(); ++i) {
      const std::uint64_t start = i * c.hotzone_bytes;
      const std::uint64_t end = std::min(start + c.hotzone_bytes, c.data_bytes);
      CHECK(seen[i].done_bytes == end);
      CHECK(seen[i].hotzones == i + 1);
      CHECK(journal.history()[i].sequence == i);
      CHECK(journal.history()[i].position == start);
      CHECK(journal.history()[i].length == end - start);
    }
    REQUIRE(v.journal.completed);
    CHECK(v.journal.completed->position == c.data_bytes);
    CHECK(v.journal.completed->sequence == c.hotzones() - 1);
  }
}

TEST_CASE("reencrypt engine: the records carry the journal's MACs of the copy and the units",
          "[reencrypt]") {
  // The device's bytes all zero: the old ciphertext of each hotzone is 4096 zero bytes, its
  // plaintext the old keystream (fake_crypt of zeros). One unit (4096) a hotzone: one sample.
  const Case c{"zeros", side(512), side(4096), 0x21, 0x5e, 0, 8192, 4096};
  Volume v;
  v.disk.assign(c.data_bytes, 0);
  v.journal.data.assign(c.hotzone_bytes, 0xff);
  Bytes plain = v.disk;
  fake_crypt(c.old_side, c.old_key, c.skip, 0, plain);
  const ReencryptState state = state_of(c, plain);
  Power power;
  FakeIo io(state, c.old_key, c.new_key, v.disk, power);
  FakeJournal journal(v.journal, power);
  REQUIRE(lbscrypt::run_engine(state, io, journal, {}));
  REQUIRE(journal.history().size() == 2);
  const Bytes zeros(4096, 0);
  const auto unit_mac = [&](std::uint64_t at) {
    return fake_mac(kUnitDomain, at, std::span(plain).subspan(at, 4096));
  };
  CHECK(journal.history()[0].data_mac == fake_mac("hotzone copy", 0, zeros));
  CHECK(journal.history()[1].data_mac == fake_mac("hotzone copy", 4096, zeros));
  CHECK(journal.history()[0].samples == std::vector{unit_mac(0)});
  CHECK(journal.history()[1].samples == std::vector{unit_mac(4096)});
  CHECK(journal.history()[0].next_mac == unit_mac(4096));
  CHECK(journal.history()[1].next_mac == lbscrypt::RunMac{});  // the data's end
  REQUIRE(v.journal.completed);
  CHECK(v.journal.completed->position == 8192);
  CHECK(v.journal.completed->next_mac == lbscrypt::RunMac{});
  CHECK_FALSE(v.journal.completed->users_live);
  CHECK(through_new(c, v) == plain);
  CHECK(wiped(v));
}

TEST_CASE("reencrypt engine: unit samples spread over the hotzone within the read budget",
          "[reencrypt]") {
  using lbscrypt::unit_samples;
  CHECK(unit_samples(4096, 4096) == std::vector<std::uint64_t>{0});
  CHECK(unit_samples(std::uint64_t{3} * 4096, 4096) == std::vector<std::uint64_t>{0, 4096, 8192});
  // 1 GiB at 65536: 1 MiB / (2 * 65536) - 1 = 7 units, first to last
  const auto big = unit_samples(std::uint64_t{1} << 30U, 65536);
  REQUIRE(big.size() == 7);
  CHECK(big.front() == 0);
  CHECK(big.back() == (std::uint64_t{1} << 30U) - 65536);
  // 64 MiB at 512: at most 64
  const auto small = unit_samples(std::uint64_t{64} << 20U, 512);
  CHECK(small.size() == 64);
  CHECK(small.back() == (std::uint64_t{64} << 20U) - 512);
  for (const auto &[length, unit] : {std::pair<std::uint64_t, std::uint64_t>{1ULL << 30U, 65536},
                                     {1ULL << 30U, 4096},
                                     {1ULL << 30U, 512},
                                     {65536, 65536}}) {
    // a --resume reads each sample at most twice, and the next unit twice
    CHECK(2 * unit * (unit_samples(length, unit).size() + 1) <= lbscrypt::kResumeCheckBytes);
  }
}

namespace {

struct CutTally {
  std::uint64_t calls = 0;  // of a run without a cut
  std::uint64_t cuts = 0;
  std::uint64_t recovered = 0;  // resumes that put a hotzone back
  std::uint64_t failures = 0;
  std::string first_failure;
};

std::string cut_name(std::uint64_t at, IoTear io, SlotTear slot) {
  return "cut during call " + std::to_string(at) + ", device tear " +
         std::to_string(static_cast<int>(io)) + ", journal tear " +
         std::to_string(static_cast<int>(slot));
}

void note_failure(CutTally &tally, const std::string &what) {
  if (tally.failures++ == 0) {
    tally.first_failure = what;
  }
}

// After the cuts so far, a run to the end: it must finish with the plaintext intact.
bool resumes(const Case &c, Volume &v, const Bytes &plain, CutTally &tally,
             const std::string &what) {
  Power steady;
  const auto resumed = run(c, v, steady);
  if (!resumed) {
    note_failure(tally, what + ": the resume failed: " + resumed.error().message);
    return false;
  }
  if (resumed->outcome != EngineOutcome::finished || through_new(c, v) != plain || !wiped(v)) {
    note_failure(tally, what +
                            ": the resume did not leave the plaintext intact and the "
                            "journal wiped");
    return false;
  }
  if (resumed->recovered) {
    ++tally.recovered;
  }
  return true;
}

// Cuts the power during each call of a run in each tear shape, then resumes.
CutTally cut_everywhere(const Case &c) {
  const Bytes plain = plaintext(c.data_bytes);
  CutTally tally;
  {
    Volume v = volume_of(c, plain);
    Power power;
    REQUIRE(run(c, v, power));
    tally.calls = power.calls;
  }
  for (std::uint64_t at = 0; at < tally.calls; ++at) {
    for (const IoTear io : kIoTears) {
      for (const SlotTear slot : kSlotTears) {
        Volume v = volume_of(c, plain);
        Power cut;
        cut.cut_at = at;
        cut.io_tear = io;
        cut.slot_tear = slot;
        ++tally.cuts;
        const std::string what = cut_name(at, io, slot);
        if (run(c, v, cut)) {
          note_failure(tally, what + ": the run did not stop at the cut");
          continue;
        }
        static_cast<void>(resumes(c, v, plain, tally, what));
      }
    }
  }
  return tally;
}

}  // namespace

TEST_CASE("reencrypt engine: a power cut during any call, then a resume", "[reencrypt]") {
  for (const Case *c : {&k512to4096, &k4096to65536, &kKeyAt65536}) {
    INFO(c->name);
    REQUIRE(c->hotzones() == 2);
    const CutTally tally = cut_everywhere(*c);
    INFO(tally.first_failure);
    CHECK(tally.failures == 0);
    // read_slots, the first unit's check (read_old), then 8 calls a hotzone: read_raw
    // write_data read_old write_journaled write_new flush write_completed wipe_data
    CHECK(tally.calls == 2 + 8 * 2);
    CHECK(tally.cuts == tally.calls * kIoTears.size() * kSlotTears.size());
    // A resume puts a hotzone back where the journaled record is at the run's position: a cut
    // during write_journaled that wrote it (4 device tears x 1), during write_new or flush
    // (2 x 12), during write_completed that left the old or a torn slot (4 x 2): 36 a hotzone
    // (read_old comes before write_journaled: a cut there leaves no record of the hotzone).
    CHECK(tally.recovered == std::uint64_t{36} * 2);
  }
}

TEST_CASE("reencrypt engine: a second cut during the resume, then another resume", "[reencrypt]") {
  const Case &c = k512to4096;
  const Bytes plain = plaintext(c.data_bytes);
  CutTally tally;
  std::uint64_t second_cuts = 0;
  // The second cut in four shapes: each device tear beside one journal tear.
  constexpr std::array<std::pair<IoTear, SlotTear>, 4> kSecondTears{
      {{IoTear::lost, SlotTear::old_kept},
       {IoTear::landed, SlotTear::new_written},
       {IoTear::front_half, SlotTear::half_each},
       {IoTear::odd_units, SlotTear::half_each}}};
  for (std::uint64_t at = 0; at < 2 + 8 * 2; ++at) {
    for (const IoTear io : kIoTears) {
      for (const SlotTear slot : kSlotTears) {
        Volume first = volume_of(c, plain);
        Power cut;
        cut.cut_at = at;
        cut.io_tear = io;
        cut.slot_tear = slot;
        REQUIRE_FALSE(run(c, first, cut));
        std::uint64_t resume_calls = 0;
        {
          Volume dry = first;
          Power count;
          REQUIRE(run(c, dry, count));
          resume_calls = count.calls;
        }
        for (std::uint64_t again = 0; again < resume_calls; ++again) {
          for (const auto &[io2, slot2] : kSecondTears) {
            Volume v = first;
            Power cut2;
            cut2.cut_at = again;
            cut2.io_tear = io2;
            cut2.slot_tear = slot2;
            ++second_cuts;
            const std::string what =
                cut_name(at, io, slot) + ", then " + cut_name(again, io2, slot2);
            if (run(c, v, cut2)) {
              note_failure(tally, what + ": the resume did not stop at the cut");
              continue;
            }
            static_cast<void>(resumes(c, v, plain, tally, what));
          }
        }
      }
    }
  }
  INFO(tally.first_failure);
  CHECK(tally.failures == 0);
  // Each resume makes at least read_slots and a wipe (a finished run) or a whole hotzone.
  CHECK(second_cuts >= std::uint64_t{2 + 8 * 2} * 12 * 2 * 4);
}

TEST_CASE("reencrypt engine: the stop hook stops between hotzones", "[reencrypt]") {
  const Case c{"512->4096", side(512), side(4096), 0x21, 0x5e, 0, 40960, 8192};
  const Bytes plain = plaintext(c.data_bytes);

  SECTION("after two hotzones, then a resume finishes") {
    Volume v = volume_of(c, plain);
    int polls = 0;
    EngineHooks hooks;
    hooks.stop = [&] { return ++polls == 3; };
    const ReencryptState state = state_of(c);
    Power power;
    FakeIo io(state, c.old_key, c.new_key, v.disk, power);
    FakeJournal journal(v.journal, power);
    const auto report = lbscrypt::run_engine(state, io, journal, hooks);
    REQUIRE(report);
    CHECK(report->outcome == EngineOutcome::stopped);
    CHECK(report->progress.done_bytes == 16384);
    CHECK(report->progress.hotzones == 2);
    CHECK(polls == 3);
    CHECK(io.clean());  // a safe point: nothing unflushed
    CHECK(wiped(v));
    const Bytes now = through_new(c, v);
    CHECK(std::equal(plain.begin(), plain.begin() + 16384, now.begin()));
    CHECK(std::equal(plain.begin() + 16384, plain.end(), now.begin() + 16384) == false);

    Power again;
    const auto resumed = run(c, v, again);
    REQUIRE(resumed);
    CHECK(resumed->outcome == EngineOutcome::finished);
    CHECK(resumed->progress.hotzones == 3);
    CHECK_FALSE(resumed->recovered);
    CHECK(through_new(c, v) == plain);
    CHECK(wiped(v));
  }
  SECTION("before the first hotzone: nothing written") {
    Volume v = volume_of(c, plain);
    const Volume before = v;
    EngineHooks hooks;
    hooks.stop = [] { return true; };
    Power power;
    const auto report = run(c, v, power, hooks);
    REQUIRE(report);
    CHECK(report->outcome == EngineOutcome::stopped);
    CHECK(report->progress.done_bytes == 0);
    CHECK(power.io_writes == 0);
    CHECK(power.journal_writes == 0);
    CHECK(v.disk == before.disk);
  }
}

namespace {

// A run over a journal in this state must be refused with nothing written.
void refused_untouched(const Case &c, JournalDisk journal, const std::string &needle) {
  const Bytes plain = plaintext(c.data_bytes);
  Volume v = volume_of(c, plain);
  journal.data.resize(c.hotzone_bytes);
  v.journal = journal;
  const Bytes disk = v.disk;
  Power power;
  const auto report = run(c, v, power);
  REQUIRE_FALSE(report);
  CHECK(report.error().code == Errc::invalid_argument);
  CHECK_THAT(report.error().message, Catch::Contains(needle));
  CHECK(power.io_writes == 0);
  CHECK(power.journal_writes == 0);
  CHECK(v.disk == disk);
}

}  // namespace

TEST_CASE("reencrypt engine: a damaged journal is refused with nothing written", "[reencrypt]") {
  const Case c{"512->4096", side(512), side(4096), 0x21, 0x5e, 0, 40960, 8192};
  JournalDisk journal;
  SECTION("the data area does not match its checksum") {
    journal.journaled = JournaledRecord{0, 0, 8192, {}, {}, {}};  // a MAC of all zeros
    journal.data.assign(8192, 0);
    refused_untouched(c, journal, "does not match its checksum");
  }
  SECTION("the data area does not match, a hotzone further on") {
    journal.completed = CompletedRecord{1, 16384, {}, false};
    journal.journaled = JournaledRecord{2, 16384, 8192, {}, {}, {}};
    journal.data.assign(8192, 0x5a);
    refused_untouched(c, journal, "does not match its checksum");
  }
  SECTION("both slots invalid, the completed one not blank") {
    journal.journaled_torn = true;
    journal.completed_torn = true;
    refused_untouched(c, journal, "neither of the journal's slots verifies");
  }
  SECTION("the completed position is beyond the data") {
    journal.completed = CompletedRecord{5, 49152, {}, false};
    refused_untouched(c, journal, "beyond the data's 40960 bytes");
  }
  SECTION("the completed position is not a hotzone's end") {
    journal.completed = CompletedRecord{0, 4096, {}, false};
    refused_untouched(c, journal, "is not the end of a hotzone");
  }
  SECTION("the completed sequence does not match its position") {
    journal.completed = CompletedRecord{3, 16384, {}, false};
    refused_untouched(c, journal, "does not end at position 16384");
  }
  SECTION("the journaled hotzone is ahead of the position") {
    journal.completed = CompletedRecord{0, 8192, {}, false};
    journal.journaled = JournaledRecord{2, 16384, 8192, {}, {}, {}};
    refused_untouched(c, journal, "is ahead of the run's position 8192");
  }
  SECTION("the journaled hotzone has a wrong length") {
    journal.journaled = JournaledRecord{0, 0, 4096, {}, {}, {}};
    refused_untouched(c, journal, "is not a hotzone of this run");
  }
}

TEST_CASE("reencrypt engine: geometry the sector sizes do not divide is refused", "[reencrypt]") {
  Case c{"512->4096", side(512), side(4096), 0x21, 0x5e, 0, 40960, 8192};
  SECTION("hotzone") { c.hotzone_bytes = 6144; }
  SECTION("data") { c.data_bytes = 40960 + 512; }
  SECTION("empty hotzone") { c.hotzone_bytes = 0; }
  Volume v;
  v.disk.assign(c.data_bytes, 0);
  v.journal.data.assign(8192, 0);
  Power power;
  const auto report = run(c, v, power);
  REQUIRE_FALSE(report);
  CHECK(report.error().code == Errc::invalid_argument);
  CHECK(power.calls == 0);
}

TEST_CASE("reencrypt engine: a finished run resumed only wipes the journal", "[reencrypt]") {
  const Case &c = k512to4096;
  const Bytes plain = plaintext(c.data_bytes);
  Volume v = volume_of(c, plain);
  Power first;
  REQUIRE(run(c, v, first));
  std::fill(v.journal.data.begin(), v.journal.data.end(), std::uint8_t{0x77});
  Power again;
  const auto report = run(c, v, again);
  REQUIRE(report);
  CHECK(report->outcome == EngineOutcome::finished);
  CHECK(report->progress.hotzones == 0);
  CHECK(report->progress.done_bytes == c.data_bytes);
  CHECK(again.io_writes == 0);
  CHECK(wiped(v));
  CHECK(through_new(c, v) == plain);
}

TEST_CASE("reencrypt engine: an I/O error is returned and a resume finishes", "[reencrypt]") {
  const Case &c = k4096to65536;
  const Bytes plain = plaintext(c.data_bytes);
  const std::uint64_t calls = 2 + 8 * c.hotzones();
  int checked = 0;
  for (std::uint64_t at = 0; at < calls; ++at) {
    for (const bool same_process : {true, false}) {
      INFO("I/O error at call " << at << (same_process ? ", resumed in the same process" : ""));
      Volume v = volume_of(c, plain);
      const ReencryptState state = state_of(c);
      Power power;
      power.fail_at = at;
      auto io = std::make_unique<FakeIo>(state, c.old_key, c.new_key, v.disk, power);
      FakeJournal journal(v.journal, power);
      const auto failed = lbscrypt::run_engine(state, *io, journal, {});
      REQUIRE_FALSE(failed);
      CHECK(failed.error().code == Errc::device);
      CHECK(failed.error().message == "injected I/O error at call " + std::to_string(at));
      power.fail_at.reset();
      if (!same_process) {
        io = std::make_unique<FakeIo>(state, c.old_key, c.new_key, v.disk, power);  // unflushed
                                                                                    // writes lost
      }
      const auto resumed = lbscrypt::run_engine(state, *io, journal, {});
      REQUIRE(resumed);
      CHECK(resumed->outcome == EngineOutcome::finished);
      CHECK(through_new(c, v) == plain);
      CHECK(wiped(v));
      ++checked;
    }
  }
  CHECK(checked == 2 * 18);
}

// ---- the device at the journal's position --------------------------------------------------

namespace {

// A run cut during the write_new of its first hotzone, the device's writes lost: hotzone 0
// in flight, nothing of it converted.
Volume cut_in_first_hotzone(const Case &c, const Bytes &plain, IoTear tear) {
  Volume v = volume_of(c, plain);
  Power cut;
  // read_slots, the first unit, read_raw, write_data, read_old, write_journaled, write_new
  cut.cut_at = 6;
  cut.io_tear = tear;
  REQUIRE_FALSE(run(c, v, cut));
  REQUIRE(v.journal.journaled);
  REQUIRE_FALSE(v.journal.completed);
  return v;
}

// A resume over this volume must be refused as older than the device, nothing written.
void refused_as_older(const Case &c, Volume &v, const EngineHooks &hooks = {}) {
  const Bytes disk = v.disk;
  Power power;
  const auto report = run(c, v, power, hooks);
  REQUIRE_FALSE(report);
  CHECK(report.error().code == Errc::invalid_argument);
  CHECK_THAT(report.error().message, Catch::StartsWith("the journal is older than the device"));
  CHECK(power.io_writes == 0);
  CHECK(power.journal_writes == 0);
  CHECK(v.disk == disk);
}

}  // namespace

TEST_CASE("reencrypt engine: an in-flight hotzone holding other data is refused", "[reencrypt]") {
  const Case &c = k4096to65536;  // one unit of 65536 a hotzone of 131072: two samples
  const Bytes plain = plaintext(c.data_bytes);
  SECTION("written after its conversion (the users, a journal put back)") {
    Volume v = cut_in_first_hotzone(c, plain, IoTear::lost);
    // The hotzone converted, then other data written with the new key over its last unit.
    Volume converted = volume_of(c, plain);
    Power full;
    REQUIRE(run(c, converted, full));
    std::copy_n(converted.disk.begin(), c.hotzone_bytes, v.disk.begin());
    Bytes other(65536, 0x3c);
    fake_crypt(c.new_side, c.new_key, c.skip, 65536, other);
    std::copy(other.begin(), other.end(), v.disk.begin() + 65536);
    refused_as_older(c, v);
  }
  SECTION("its conversion, then the next hotzone's too (a journal rolled back)") {
    Volume v = cut_in_first_hotzone(c, plain, IoTear::lost);
    Volume converted = volume_of(c, plain);
    Power full;
    REQUIRE(run(c, converted, full));
    v.disk = converted.disk;
    refused_as_older(c, v);
  }
  SECTION("a torn conversion of it resumes (the control)") {
    Volume v = cut_in_first_hotzone(c, plain, IoTear::odd_units);
    Power steady;
    const auto resumed = run(c, v, steady);
    REQUIRE(resumed);
    CHECK(resumed->recovered);
    CHECK(through_new(c, v) == plain);
  }
}

TEST_CASE("reencrypt engine: the unit at the position, offline and online", "[reencrypt]") {
  const Case c{"512->4096", side(512), side(4096), 0x21, 0x5e, 0, 40960, 8192};
  const Bytes plain = plaintext(c.data_bytes);
  // Stopped after hotzone 1 (16384 bytes done); the completed record says users_live when
  // the run was online.
  const auto stopped = [&](bool online) {
    Volume v = volume_of(c, plain);
    EngineHooks hooks;
    int polls = 0;
    hooks.stop = [&] { return ++polls == 3; };
    hooks.users_live = online;
    Power power;
    REQUIRE(run(c, v, power, hooks));
    REQUIRE(v.journal.completed);
    REQUIRE(v.journal.completed->position == 16384);
    CHECK(v.journal.completed->users_live == online);
    return v;
  };
  // Data the users wrote at 16384 (old side), and its conversion.
  Bytes users(4096, 0x6b);
  Bytes as_old = users;
  fake_crypt(c.old_side, c.old_key, c.skip, 16384, as_old);
  Bytes converted(plain.begin() + 16384, plain.begin() + 16384 + 4096);
  fake_crypt(c.new_side, c.new_key, c.skip, 16384, converted);

  SECTION("offline: other data at the position is refused") {
    Volume v = stopped(false);
    std::copy(as_old.begin(), as_old.end(), v.disk.begin() + 16384);
    refused_as_older(c, v);
  }
  SECTION("online: the users' data at the position goes on") {
    Volume v = stopped(true);
    std::copy(as_old.begin(), as_old.end(), v.disk.begin() + 16384);
    Power power;
    const auto resumed = run(c, v, power);
    REQUIRE(resumed);
    CHECK(resumed->outcome == EngineOutcome::finished);
    const Bytes now = through_new(c, v);
    CHECK(std::equal(users.begin(), users.end(), now.begin() + 16384));
  }
  SECTION("offline or online: the position's unit converted already is refused") {
    for (const bool online : {false, true}) {
      INFO("online " << online);
      Volume v = stopped(online);
      std::copy(converted.begin(), converted.end(), v.disk.begin() + 16384);
      refused_as_older(c, v);
    }
  }
  SECTION("no record yet: the first unit converted already is refused") {
    Volume v = volume_of(c, plain);
    Bytes first(plain.begin(), plain.begin() + 4096);
    fake_crypt(c.new_side, c.new_key, c.skip, 0, first);
    std::copy(first.begin(), first.end(), v.disk.begin());
    refused_as_older(c, v);
  }
}
