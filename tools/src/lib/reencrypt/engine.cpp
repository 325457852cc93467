// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt engine: where the journal says the run is, the recovery of a hotzone a power
// cut interrupted, and the hotzone loop (reencrypt/core.hpp gives the order of the writes).
#include "lbscrypt/reencrypt/core.hpp"

#include <sys/mman.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace lbscrypt {

namespace {

// The hotzone's buffer: aligned for O_DIRECT at any logical block size up to 64 KiB, so the
// real I/O reads and writes it without a bounce copy. It holds old ciphertext and plaintext:
// locked in memory when mlock allows it (else the run goes on, and says so), wiped before it
// is freed.
constexpr std::size_t kEngineBufferAlign = 65536;

class EngineBuffer {
 public:
  EngineBuffer() = default;
  EngineBuffer(const EngineBuffer &) = delete;
  EngineBuffer &operator=(const EngineBuffer &) = delete;
  EngineBuffer(EngineBuffer &&) = delete;
  EngineBuffer &operator=(EngineBuffer &&) = delete;
  ~EngineBuffer() {
    if (data_ != nullptr) {
      secure_wipe(data_, bytes_);
      if (locked_) {
        munlock(data_, bytes_);
      }
      ::operator delete (data_, std::align_val_t{kEngineBufferAlign});
    }
  }

  [[nodiscard]] Result<void> allocate(std::uint64_t bytes) {
    const std::uint64_t rounded =
        (bytes + kEngineBufferAlign - 1) / kEngineBufferAlign * kEngineBufferAlign;
    if (rounded < bytes || !std::in_range<std::size_t>(rounded)) {
      return alloc_failure(bytes);
    }
    data_ = static_cast<std::uint8_t *>(::operator new (
        static_cast<std::size_t>(rounded), std::align_val_t{kEngineBufferAlign}, std::nothrow));
    if (data_ == nullptr) {
      return alloc_failure(bytes);
    }
    bytes_ = static_cast<std::size_t>(rounded);
    locked_ = mlock(data_, bytes_) == 0;
    return Ok{};
  }

  [[nodiscard]] std::span<std::uint8_t> first(std::uint64_t bytes) const {
    return {data_, static_cast<std::size_t>(bytes)};
  }
  [[nodiscard]] std::span<std::uint8_t> at(std::uint64_t offset, std::uint64_t bytes) const {
    return {data_ + offset, static_cast<std::size_t>(bytes)};
  }
  [[nodiscard]] bool locked() const { return locked_; }

 private:
  static Error alloc_failure(std::uint64_t bytes) {
    return make_error(Errc::refused,
                      fmt::format("cannot allocate the hotzone's buffer of {} bytes: free memory, "
                                  "or start the run with a smaller hotzone",
                                  bytes));
  }

  std::uint8_t *data_ = nullptr;
  std::size_t bytes_ = 0;
  bool locked_ = false;
};

// The MAC domains of the journal's copy and of a unit's plaintext.
constexpr std::string_view kEngineDataDomain = "hotzone copy";
constexpr std::string_view kEngineUnitDomain = "unit plaintext";
// The smallest part of a write a cut may tear off (a torn unit mixes old and new in these).
constexpr std::uint64_t kEngineTearBytes = 512;

Error engine_bad(std::string message) {
  return make_error(Errc::invalid_argument, std::move(message));
}

Result<void> engine_check_geometry(const ReencryptState &state) {
  if (state.hotzone_bytes == 0 || state.data_bytes == 0) {
    return engine_bad(
        fmt::format("the run's data ({} bytes) and hotzone ({} bytes) must not be "
                    "empty: the state file is damaged",
                    state.data_bytes, state.hotzone_bytes));
  }
  for (const CryptSide *side : {&state.old_side, &state.new_side}) {
    const std::uint32_t sector = side->sector_size;
    const char *which = side == &state.old_side ? "old" : "new";
    if (sector == 0 || sector % 512 != 0) {
      return engine_bad(
          fmt::format("the {} sector size {} is not a multiple of 512", which, sector));
    }
    if (state.hotzone_bytes % sector != 0) {
      return engine_bad(
          fmt::format("the hotzone of {} bytes is not a multiple of the {} sector "
                      "size {}: give a hotzone that is",
                      state.hotzone_bytes, which, sector));
    }
    if (state.data_bytes % sector != 0) {
      return engine_bad(
          fmt::format("the data's {} bytes are not a multiple of the {} sector "
                      "size {}: the volume cannot be converted whole",
                      state.data_bytes, which, sector));
    }
  }
  return Ok{};
}

// Where the run is, and the hotzone to put back first (a journaled record at that position).
struct EngineStart {
  std::uint64_t position = 0;
  std::optional<JournaledRecord> recover;
};

constexpr const char *kEngineDamaged =
    "the reencrypt journal is damaged: nothing was written; keep the device and the journal "
    "as they are (a journal copied from another time is refused: it would convert hotzones "
    "twice); the volume reads with the new parameters up to the last completed hotzone and "
    "with the old after it";

Result<EngineStart> engine_find_start(const ReencryptState &state, const JournalSlots &slots) {
  const std::uint64_t hotzone = state.hotzone_bytes;
  const std::uint64_t data = state.data_bytes;
  EngineStart start;
  if (slots.completed) {
    const CompletedRecord &done = *slots.completed;
    if (done.position > data) {
      return engine_bad(
          fmt::format("the journal's completed position {} is beyond the data's {} "
                      "bytes: {}",
                      done.position, data, kEngineDamaged));
    }
    if (done.position == 0 || (done.position % hotzone != 0 && done.position != data)) {
      return engine_bad(
          fmt::format("the journal's completed position {} is not the end of a "
                      "hotzone of {} bytes: {}",
                      done.position, hotzone, kEngineDamaged));
    }
    if (done.sequence != (done.position - 1) / hotzone) {
      return engine_bad(
          fmt::format("the journal's completed hotzone {} does not end at position "
                      "{}: {}",
                      done.sequence, done.position, kEngineDamaged));
    }
    start.position = done.position;
  } else if (slots.completed_blank) {
    start.position = 0;
  } else if (slots.journaled) {
    // The completed slot was torn while written: the journaled hotzone was reached.
    start.position = slots.journaled->position;
  } else {
    return engine_bad(
        fmt::format("neither of the journal's slots verifies, and its completed "
                    "slot is not blank: {}",
                    kEngineDamaged));
  }
  if (!slots.journaled || slots.journaled->position < start.position) {
    return start;  // none, or stale: that hotzone was completed
  }
  const JournaledRecord &zone = *slots.journaled;
  if (zone.position > start.position) {
    return engine_bad(
        fmt::format("the journal's hotzone at {} is ahead of the run's position "
                    "{}: {}",
                    zone.position, start.position, kEngineDamaged));
  }
  if (zone.position >= data || zone.position % hotzone != 0 ||
      zone.sequence != zone.position / hotzone ||
      zone.length != std::min(hotzone, data - zone.position)) {
    return engine_bad(
        fmt::format("the journal's hotzone {} at {} of {} bytes is not a hotzone "
                    "of this run ({} bytes of data, hotzones of {}): {}",
                    zone.sequence, zone.position, zone.length, data, hotzone, kEngineDamaged));
  }
  start.recover = zone;
  return start;
}

}  // namespace

std::uint64_t hotzone_alignment(const CryptSide &old_side, const CryptSide &new_side,
                                std::uint32_t logical_block) {
  return std::max({std::uint64_t{old_side.sector_size}, std::uint64_t{new_side.sector_size},
                   std::uint64_t{logical_block}});
}

namespace {

Error engine_older(std::uint64_t position, std::string_view what) {
  return make_error(
      Errc::invalid_argument,
      fmt::format("the journal is older than the device: at byte {} {}: nothing was written; "
                  "a journal or state disk put back from another time cannot finish this run "
                  "(it would convert hotzones twice): give the journal the run last wrote, or "
                  "keep the device as it is",
                  position, what));
}

// The device at the journal's position, checked before anything is written; at most
// kResumeCheckBytes read. `scratch` holds a unit.
class EngineCheck {
 public:
  EngineCheck(ReencryptIo &io, JournalStore &journal, std::span<std::uint8_t> scratch)
      : io_(io), journal_(journal), scratch_(scratch) {}

  // The unit at `position` holds what the record made before its conversion: its plaintext
  // through the old parameters is the recorded one. Its conversion (the recorded plaintext
  // through the new parameters) is a journal older than the device. Anything else is refused
  // too unless the users may have written there (online).
  Result<void> next_unit(std::uint64_t position, const RunMac &recorded, bool users_may_write) {
    auto as_old = unit_mac(&ReencryptIo::read_old, position);
    if (!as_old) {
      return as_old.error();
    }
    if (*as_old == recorded) {
      return Ok{};
    }
    auto as_new = unit_mac(&ReencryptIo::read_new, position);
    if (!as_new) {
      return as_new.error();
    }
    if (*as_new == recorded) {
      return engine_older(position,
                          "the data is already in the new parameters, and the "
                          "journal says it is not");
    }
    if (users_may_write) {
      return Ok{};
    }
    return engine_older(position,
                        "the data is neither what the journal recorded there nor "
                        "its conversion");
  }

  // An in-flight hotzone: each sampled unit is its old ciphertext (the journal's copy), its
  // conversion, or a mix of the two a cut tore (some of its 512-byte parts the copy's).
  Result<void> in_flight(const JournaledRecord &zone, std::span<const std::uint8_t> copy) {
    const std::uint64_t unit = scratch_.size();
    const auto offsets = unit_samples(zone.length, unit);
    if (offsets.size() != zone.samples.size()) {
      return engine_bad(
          fmt::format("the journal's hotzone at {} records {} sampled units, not "
                      "the {} of its length: {}",
                      zone.position, zone.samples.size(), offsets.size(), kEngineDamaged));
    }
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      const std::uint64_t at = zone.position + offsets[i];
      const auto old = copy.subspan(static_cast<std::size_t>(offsets[i]), scratch_.size());
      if (auto r = io_.read_raw(at, scratch_); !r) {
        return r;
      }
      bool some_old = false;
      for (std::size_t part = 0; part < scratch_.size() && !some_old; part += kEngineTearBytes) {
        some_old = std::equal(old.begin() + static_cast<std::ptrdiff_t>(part),
                              old.begin() + static_cast<std::ptrdiff_t>(part + kEngineTearBytes),
                              scratch_.begin() + static_cast<std::ptrdiff_t>(part));
      }
      if (some_old) {
        continue;
      }
      auto as_new = unit_mac(&ReencryptIo::read_new, at);
      if (!as_new) {
        return as_new.error();
      }
      if (*as_new != zone.samples[i]) {
        return engine_older(at,
                            "the hotzone the journal has in flight holds data that is "
                            "neither its copy nor its conversion (written after it was "
                            "converted)");
      }
    }
    return Ok{};
  }

 private:
  // The MAC of the unit at `position` read as `read` reads it (plaintext of one side).
  Result<RunMac> unit_mac(Result<void> (ReencryptIo::*read)(std::uint64_t, std::span<std::uint8_t>),
                          std::uint64_t position) {
    if (auto r = (io_.*read)(position, scratch_); !r) {
      return r.error();
    }
    return journal_.mac(kEngineUnitDomain, position, scratch_);
  }

  ReencryptIo &io_;
  JournalStore &journal_;
  std::span<std::uint8_t> scratch_;
};

// The MACs of a hotzone's plaintext at `position`: its sampled units, and the unit after it
// (zeros when it ends the data). `plain` holds the hotzone and, when there is one, that unit.
struct EngineUnitMacs {
  std::vector<RunMac> samples;
  RunMac next{};
};

Result<EngineUnitMacs> engine_unit_macs(JournalStore &journal, std::uint64_t position,
                                        std::uint64_t length, std::uint64_t unit, bool has_next,
                                        std::span<const std::uint8_t> plain) {
  EngineUnitMacs out;
  for (const std::uint64_t offset : unit_samples(length, unit)) {
    auto mac = journal.mac(
        kEngineUnitDomain, position + offset,
        plain.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(unit)));
    if (!mac) {
      return mac.error();
    }
    out.samples.push_back(*mac);
  }
  if (has_next) {
    auto mac = journal.mac(
        kEngineUnitDomain, position + length,
        plain.subspan(static_cast<std::size_t>(length), static_cast<std::size_t>(unit)));
    if (!mac) {
      return mac.error();
    }
    out.next = *mac;
  }
  return out;
}

}  // namespace

std::uint64_t check_unit_bytes(const ReencryptState &state) {
  return std::max(state.old_side.sector_size, state.new_side.sector_size);
}

Result<RunMac> first_unit_mac(const ReencryptState &state, ReencryptIo &io, JournalStore &journal) {
  const std::uint64_t unit = check_unit_bytes(state);
  EngineBuffer buffer;
  if (auto allocated = buffer.allocate(unit); !allocated) {
    return allocated.error();
  }
  if (auto r = io.read_old(0, buffer.first(unit)); !r) {
    return r.error();
  }
  return journal.mac(kEngineUnitDomain, 0, buffer.first(unit));
}

Result<EngineReport> run_engine(const ReencryptState &state, ReencryptIo &io, JournalStore &journal,
                                const EngineHooks &hooks) {
  if (auto checked = engine_check_geometry(state); !checked) {
    return checked.error();
  }
  const auto slots = journal.read_slots();
  if (!slots) {
    return slots.error();
  }
  const auto start = engine_find_start(state, *slots);
  if (!start) {
    return start.error();
  }
  const std::uint64_t unit = check_unit_bytes(state);
  const std::uint64_t hotzone = state.hotzone_bytes;
  const std::uint64_t data = state.data_bytes;
  // The hotzone, the unit after it (its plaintext is recorded), and a unit to check with.
  EngineBuffer buffer;
  if (auto allocated = buffer.allocate(hotzone + 2 * unit); !allocated) {
    return allocated.error();
  }
  std::uint64_t position = start->position;
  EngineReport report;
  report.buffer_locked = buffer.locked();
  report.progress.start_bytes = position;
  report.progress.done_bytes = position;
  report.progress.total_bytes = data;
  EngineCheck check(io, journal, buffer.at(hotzone + unit, unit));

  // Before anything is written, the device is checked at the journal's position: a journal
  // older than the device is refused with nothing written. Online the check waits for the
  // hotzone's suspension (the users' mapping is never read under them).
  const auto check_position = [&]() -> Result<void> {
    if (slots->completed) {
      const CompletedRecord &done = *slots->completed;
      return check.next_unit(position, done.next_mac, done.users_live);
    }
    if (state.started_online) {
      return Ok{};  // the users wrote the first unit until the first hotzone: NAME's table rules
    }
    RunMac recorded{};
    if (state.first_unit_mac.size() != recorded.size()) {
      return engine_bad(
          fmt::format("the state records no MAC of the data's first unit: {}", kEngineDamaged));
    }
    std::copy(state.first_unit_mac.begin(), state.first_unit_mac.end(), recorded.begin());
    return check.next_unit(0, recorded, false);
  };
  bool position_unchecked = !start->recover && position < data;
  if (position_unchecked && !hooks.users_live) {
    if (auto r = check_position(); !r) {
      return r.error();
    }
    position_unchecked = false;
  }

  // A journaled hotzone the cut interrupted: its old ciphertext goes back before anything
  // else is written, then it is converted again. Its record and data stay as they are (a
  // torn rewrite of the journaled slot, beside a torn completed slot, would lose the run).
  bool journaled = false;
  if (start->recover) {
    const JournaledRecord &zone = *start->recover;
    const auto old_bytes = buffer.first(zone.length);
    if (auto r = journal.read_data(old_bytes); !r) {
      return r.error();
    }
    const auto mac = journal.mac(kEngineDataDomain, zone.position, old_bytes);
    if (!mac) {
      return mac.error();
    }
    if (*mac != zone.data_mac) {
      return engine_bad(
          fmt::format("the journal's copy of the hotzone at {} ({} bytes) does not "
                      "match its checksum, so that hotzone cannot be put back: {}",
                      zone.position, zone.length, kEngineDamaged));
    }
    if (hooks.before_hotzone) {
      if (auto r = hooks.before_hotzone(zone.position, zone.length); !r) {
        return r.error();
      }
    }
    if (zone.position + zone.length < data) {
      // Nothing after the hotzone was written since its record by the run; in a run started
      // online the users may have written on beside the held hotzone (and a power cut then
      // brings an offline --resume here), so only its conversion is refused there.
      if (auto r = check.next_unit(zone.position + zone.length, zone.next_mac,
                                   hooks.users_live || state.started_online);
          !r) {
        return r.error();
      }
    }
    if (auto r = check.in_flight(zone, old_bytes); !r) {
      return r.error();
    }
    if (auto r = io.write_raw(zone.position, old_bytes); !r) {
      return r.error();
    }
    if (auto r = io.flush(); !r) {
      return r.error();
    }
    report.recovered = true;
    journaled = true;
  }

  const std::uint64_t entry_position = position;
  while (position < data) {
    const std::uint64_t length = std::min(hotzone, data - position);
    const std::uint64_t sequence = position / hotzone;
    const bool has_next = position + length < data;
    const auto zone = buffer.first(length);
    RunMac next_mac{};
    if (!journaled) {
      if (hooks.stop && hooks.stop()) {
        report.outcome = EngineOutcome::stopped;
        return report;
      }
      if (hooks.before_hotzone) {
        if (auto r = hooks.before_hotzone(position, length); !r) {
          return r.error();
        }
      }
      if (position_unchecked) {
        if (auto r = check_position(); !r) {
          return r.error();
        }
        position_unchecked = false;
      }
      if (auto r = io.read_raw(position, zone); !r) {
        return r.error();
      }
      if (auto r = journal.write_data(zone); !r) {
        return r.error();
      }
      const auto data_mac = journal.mac(kEngineDataDomain, position, zone);
      if (!data_mac) {
        return data_mac.error();
      }
      // The plaintext, and the next hotzone's first unit with it (one unit more to read).
      if (auto r = io.read_old(position, buffer.first(length + (has_next ? unit : 0))); !r) {
        return r.error();
      }
      const auto macs = engine_unit_macs(journal, position, length, unit, has_next,
                                         buffer.first(length + (has_next ? unit : 0)));
      if (!macs) {
        return macs.error();
      }
      next_mac = macs->next;
      if (auto r = journal.write_journaled(
              JournaledRecord{sequence, position, length, *data_mac, macs->next, macs->samples});
          !r) {
        return r.error();
      }
    } else {
      // Put back: the record's MAC of the next unit goes on to the completed record.
      next_mac = start->recover->next_mac;
      if (auto r = io.read_old(position, zone); !r) {
        return r.error();
      }
    }
    journaled = false;
    if (auto r = io.write_new(position, zone); !r) {
      return r.error();
    }
    if (auto r = io.flush(); !r) {
      return r.error();
    }
    if (auto r = journal.write_completed(
            CompletedRecord{sequence, position + length, next_mac, hooks.users_live});
        !r) {
      return r.error();
    }
    if (hooks.after_completed) {
      if (auto r = hooks.after_completed(position + length); !r) {
        return r.error();
      }
    }
    if (auto r = journal.wipe_data(); !r) {
      return r.error();
    }
    position += length;
    report.progress.done_bytes = position;
    ++report.progress.hotzones;
    if (hooks.progress) {
      hooks.progress(report.progress);
    }
  }
  if (entry_position == data) {
    // Finished before: a cut may have come while the last hotzone's copy was being wiped.
    if (auto r = journal.wipe_data(); !r) {
      return r.error();
    }
  }
  return report;
}

}  // namespace lbscrypt
