// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt --active-name NAME`: the online mode. The users' mapping NAME (opened by
// lbscrypt or cryptsetup plain) stays live over the device while the offline engine converts
// it; per hotzone NAME is suspended (its filesystem frozen), the hotzone journaled and
// converted through the private mappings, its completed record made durable, and only then
// NAME's table switched to one where the hotzone reads through the new parameters, and NAME
// resumed. These are the pieces: the live table read and compared with what the user gave,
// the tables NAME carries during the run, and the switch the engine's hooks drive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/kernel.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/reencrypt.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

// NAME as the kernel has it: every line a crypt line (of `target_type`) carrying its key.
struct LiveMapping {
  std::string name;
  DeviceInfo info;
  std::vector<CryptTable> lines;
};

// Errc::not_found when NAME is not active; Errc::refused for a line that is not crypt, a key
// in the kernel keyring (the table does not carry it, so it cannot be compared or loaded
// again), or an integrity option.
[[nodiscard]] Result<LiveMapping> read_live_mapping(Kernel &kernel, std::string_view name,
                                                    std::string_view target_type);

// A new run: NAME is one crypt line, not suspended, and has the parameters the user gave for
// the old side: cipher, key size, sector size, iv_large_sectors, offset, skip (iv_offset) and,
// when given, size. Errc::refused naming the first field that differs and both values; nothing
// is written. Returns the data's length in 512-byte sectors (NAME's length).
[[nodiscard]] Result<std::uint64_t> check_live_parameters(const LiveMapping &live,
                                                          const MappingRequest &given);
// The old key the user gave is NAME's key (compared in constant time). Errc::key.
[[nodiscard]] Result<void> check_live_key(const LiveMapping &live, const SecretBuffer &old_key);
// The device is held by NAME alone: `user` is BlockDevices::user_of(device). The private
// mappings of the run `run_id` (when given: a resume, or what a killed run left) do not count.
// Errc::busy naming the other holders.
[[nodiscard]] Result<void> check_live_holder(const LiveMapping &live, const std::string &device,
                                             const std::optional<std::string> &user,
                                             std::string_view run_id = {});

// The table NAME carries when everything before `boundary` (bytes, a multiple of the larger
// sector) is converted: [0, boundary) with the new side and key, [boundary, end) with the old,
// each line with the offset and iv_offset one whole-device table gives its first sector, so
// every sector reads as it would through one table of its side (iv_large_sectors included:
// the kernel counts the IV from iv_offset + the sector's place in the line, then shifts).
// One line when boundary is 0 (the old table) or the end (the new one). `device` is the word
// for the device (NAME's "MAJOR:MINOR"); `flags` the live table's flags, kept on every line
// (iv_large_sectors is each side's own).
[[nodiscard]] std::vector<CryptTable> online_segments(
    const ReencryptState &state, std::uint64_t boundary, const SecretBuffer &old_key,
    const SecretBuffer &new_key, const std::string &device, const CryptFlags &flags);
[[nodiscard]] std::vector<TargetLine> online_table_lines(const std::vector<CryptTable> &segments,
                                                         std::string_view target_type);

// Where NAME's live table says the run is (bytes converted), after checking that it is one of
// this run's tables: the old table, the new one, or the two lines online_segments gives, with
// the run's keys. Errc::refused naming what does not fit.
[[nodiscard]] Result<std::uint64_t> live_boundary(const LiveMapping &live,
                                                  const ReencryptState &state,
                                                  const SecretBuffer &old_key,
                                                  const SecretBuffer &new_key);

// The switch of NAME's table, driven by the engine's hooks.
class OnlineSwitch {
 public:
  OnlineSwitch(Kernel &kernel, const LiveMapping &live, const ReencryptState &state,
               SecretBuffer old_key, SecretBuffer new_key, std::string target_type);

  // Suspends NAME with its filesystem frozen (nothing when it is suspended already).
  [[nodiscard]] Result<void> suspend();
  // Loads the table of `boundary` and resumes NAME with it.
  [[nodiscard]] Result<void> switch_to(std::uint64_t boundary);
  // `base` with before_hotzone (suspend) and after_completed (switch_to) set.
  [[nodiscard]] EngineHooks hooks(EngineHooks base);
  [[nodiscard]] bool suspended() const { return suspended_; }
  // The boundary of the table NAME has live, when known (live_boundary, or the last switch).
  [[nodiscard]] std::optional<std::uint64_t> boundary() const { return boundary_; }
  void set_boundary(std::uint64_t boundary) { boundary_ = boundary; }
  [[nodiscard]] const std::string &name() const { return name_; }

 private:
  Kernel *kernel_;
  std::string name_;
  ReencryptState state_;
  SecretBuffer old_key_;
  SecretBuffer new_key_;
  std::string device_;
  CryptFlags flags_;
  bool read_only_;
  std::string target_type_;
  bool suspended_;
  std::optional<std::uint64_t> boundary_;
};

// Puts NAME right after a stop, an error or a kill: a hotzone the journal has in flight is
// put back and converted again (NAME suspended for it), then NAME is resumed with the table
// of the journal's position (loaded unless it is live already). Returns that position.
[[nodiscard]] Result<std::uint64_t> settle_online(OnlineSwitch &live_switch,
                                                  const ReencryptState &state, ReencryptIo &io,
                                                  JournalStore &journal);

}  // namespace lbscrypt
