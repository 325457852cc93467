// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt engine: where the journal says the run is, the recovery of a hotzone a power
// cut interrupted, and the hotzone loop (reencrypt.hpp gives the order of the writes).
#include "lbscrypt/reencrypt.hpp"

#include <openssl/evp.h>

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
// wiped before it is freed.
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
    return Ok{};
  }

  [[nodiscard]] std::span<std::uint8_t> first(std::uint64_t bytes) const {
    return {data_, static_cast<std::size_t>(bytes)};
  }

 private:
  static Error alloc_failure(std::uint64_t bytes) {
    return make_error(Errc::refused,
                      fmt::format("cannot allocate the hotzone's buffer of {} bytes: free memory, "
                                  "or start the run with a smaller hotzone",
                                  bytes));
  }

  std::uint8_t *data_ = nullptr;
  std::size_t bytes_ = 0;
};

using EngineDigest = std::array<std::uint8_t, 32>;

Result<EngineDigest> engine_sha256(std::span<const std::uint8_t> data) {
  EngineDigest digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    return make_error(Errc::refused,
                      "libcrypto cannot compute a SHA-256 here: check the OpenSSL installation");
  }
  return digest;
}

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
    "the reencrypt journal is damaged: nothing was written; keep the device as it is and "
    "restore the journal from a copy";

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
  EngineBuffer buffer;
  if (auto allocated = buffer.allocate(state.hotzone_bytes); !allocated) {
    return allocated.error();
  }
  const std::uint64_t hotzone = state.hotzone_bytes;
  const std::uint64_t data = state.data_bytes;
  std::uint64_t position = start->position;
  EngineReport report;
  report.progress.start_bytes = position;
  report.progress.done_bytes = position;
  report.progress.total_bytes = data;

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
    const auto digest = engine_sha256(old_bytes);
    if (!digest) {
      return digest.error();
    }
    if (*digest != zone.data_sha256) {
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
    const auto zone = buffer.first(length);
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
      if (auto r = io.read_raw(position, zone); !r) {
        return r.error();
      }
      if (auto r = journal.write_data(zone); !r) {
        return r.error();
      }
      const auto digest = engine_sha256(zone);
      if (!digest) {
        return digest.error();
      }
      if (auto r = journal.write_journaled(JournaledRecord{sequence, position, length, *digest});
          !r) {
        return r.error();
      }
    }
    journaled = false;
    if (auto r = io.read_old(position, zone); !r) {
      return r.error();
    }
    if (auto r = io.write_new(position, zone); !r) {
      return r.error();
    }
    if (auto r = io.flush(); !r) {
      return r.error();
    }
    if (auto r = journal.write_completed(CompletedRecord{sequence, position + length}); !r) {
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
