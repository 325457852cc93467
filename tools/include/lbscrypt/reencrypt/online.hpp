// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt --active-name NAME`: the online mode. The users' mapping NAME (opened by
// lbscrypt or cryptsetup plain) stays live over the device while the offline engine converts
// it. Only the hotzone's I/O waits: per hotzone NAME's table is swapped (NAME suspended for the
// swap alone, its filesystem not frozen) to one that reaches the hotzone, with the new
// parameters, through the run's private hotzone device (lbscrypt-reenc-<id>-hotzone, linear
// over the device), and that device is suspended while the engine journals and converts the
// hotzone; once its completed record is durable the hotzone device resumes and the I/O it
// held goes on, through the new parameters, to the converted bytes. An error that leaves the
// hotzone unconverted puts an error table into the hotzone device: its users get EIO there,
// never a hang, and the rest of NAME goes on. These are the pieces: the live table read and
// compared with what the user gave, the tables NAME carries during the run, and the switch
// the engine's hooks drive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/kernel.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/reencrypt/core.hpp"
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

// Where NAME's table says the run is: [0, converted) has the new side on the device,
// [converted, converted + routed) the new side through the run's hotzone device (a hotzone in
// flight, or the last one converted), the rest the old side on the device.
struct OnlineLayout {
  std::uint64_t converted = 0;  // bytes
  std::uint64_t routed = 0;     // bytes
  bool operator==(const OnlineLayout &) const = default;
};

// The table NAME carries for `layout` (bytes, multiples of the larger sector): each line with
// the offset and iv_offset one whole-device table gives its first sector, so every sector
// reads as it would through one table of its side (iv_large_sectors included: the kernel
// counts the IV from iv_offset + the sector's place in the line, then shifts). The routed line
// is on `hotzone_device`, which maps the device one to one, so its offset is the same. One line
// when the layout is all old or all new. `device` is the word for the device (NAME's
// "MAJOR:MINOR"); `flags` the live table's flags, kept on every line (iv_large_sectors is each
// side's own).
[[nodiscard]] std::vector<CryptTable> online_segments(
    const ReencryptState &state, OnlineLayout layout, const SecretBuffer &old_key,
    const SecretBuffer &new_key, const std::string &device, const std::string &hotzone_device,
    const CryptFlags &flags);
// The same with nothing routed: everything before `boundary` converted.
[[nodiscard]] std::vector<CryptTable> online_segments(
    const ReencryptState &state, std::uint64_t boundary, const SecretBuffer &old_key,
    const SecretBuffer &new_key, const std::string &device, const CryptFlags &flags);
[[nodiscard]] std::vector<TargetLine> online_table_lines(const std::vector<CryptTable> &segments,
                                                         std::string_view target_type);

// The run's hotzone device: its name (reencrypt_mapping_name_prefix + "hotzone") and, when it
// exists with the run's uuid, its "MAJOR:MINOR"; nullopt when there is none. Errc::exists
// when a mapping of that name is not the run's.
[[nodiscard]] std::string online_hotzone_name(std::string_view run_id);
[[nodiscard]] Result<std::optional<std::string>> online_hotzone_device(Kernel &kernel,
                                                                       std::string_view run_id);

// Where NAME's live table says the run is, after checking that it is one of this run's tables:
// online_segments' lines for some layout, with the run's keys, the routed line (if any) on
// `hotzone_device`. Errc::refused naming what does not fit.
[[nodiscard]] Result<OnlineLayout> live_layout(const LiveMapping &live, const ReencryptState &state,
                                               const SecretBuffer &old_key,
                                               const SecretBuffer &new_key,
                                               std::string_view hotzone_device = {});
// The bytes converted for sure (live_layout's `converted`).
[[nodiscard]] Result<std::uint64_t> live_boundary(const LiveMapping &live,
                                                  const ReencryptState &state,
                                                  const SecretBuffer &old_key,
                                                  const SecretBuffer &new_key,
                                                  std::string_view hotzone_device = {});
// The device word of NAME's lines that are not on `hotzone_device`; nullopt when every line is.
[[nodiscard]] std::optional<std::string> live_device(const LiveMapping &live,
                                                     std::string_view hotzone_device);

// The switch of NAME's table and the hotzone device, driven by the engine's hooks. NAME's
// table is read again at every step and compared with the one the switch loaded last: a table
// another process loaded (dmsetup reload, cryptsetup refresh or resize) stops the run, NAME
// given back the table of the converted position.
class OnlineSwitch {
 public:
  // `hotzone_device`: the run's hotzone device's "MAJOR:MINOR" when it exists (a resume
  // finds the one a killed or failed run left in NAME's table).
  OnlineSwitch(Kernel &kernel, const LiveMapping &live, const ReencryptState &state,
               SecretBuffer old_key, SecretBuffer new_key, std::string target_type,
               std::string hotzone_device = {});

  // NAME's live layout, when known (live_layout; a new run's is {0, 0}).
  void set_layout(OnlineLayout layout);
  void set_boundary(std::uint64_t boundary) { set_layout({boundary, 0}); }
  // Reads the state of the hotzone device given to the constructor (held, on an error table):
  // a hotzone NAME routes to it is pending until converted. Nothing without one.
  [[nodiscard]] Result<void> adopt();

  // Before a hotzone: NAME's table gets [position, position + length) through the hotzone
  // device (NAME suspended for the swap only, without a freeze), and the hotzone device is
  // suspended: the hotzone's users wait, nobody else does. Nothing is held on an error.
  [[nodiscard]] Result<void> route(std::uint64_t position, std::uint64_t length);
  // After a hotzone's completed record: the hotzone device resumes, its held I/O goes on
  // through the new parameters.
  [[nodiscard]] Result<void> complete(std::uint64_t position);
  // At a stop or the end: NAME gets the table of `position` with nothing routed and the
  // hotzone device goes. Errc::invalid_argument when a routed hotzone is not converted.
  [[nodiscard]] Result<void> finish(std::uint64_t position);
  // After an error that could not be undone: a suspended hotzone device gets an error table
  // and resumes (its users get EIO), NAME is resumed. Returns what the users see, in words
  // (empty when nothing was held); an error only when that could not be done.
  [[nodiscard]] Result<std::string> fail_safe();

  // `base` with before_hotzone (route) and after_completed (complete) set.
  [[nodiscard]] EngineHooks hooks(EngineHooks base);
  // A hotzone is routed through the suspended hotzone device and not yet converted.
  [[nodiscard]] bool hotzone_pending() const { return pending_; }
  // The bytes NAME's table has converted, when known.
  [[nodiscard]] std::optional<std::uint64_t> boundary() const { return boundary_; }
  [[nodiscard]] const std::string &name() const { return name_; }

 private:
  [[nodiscard]] std::vector<CryptTable> segments(OnlineLayout layout) const;
  [[nodiscard]] Result<void> load_name(const std::vector<CryptTable> &segments);
  [[nodiscard]] Result<void> swap_name(OnlineLayout layout);
  [[nodiscard]] Result<void> hotzone_device();
  [[nodiscard]] Result<void> hold_hotzone();
  [[nodiscard]] Result<void> release_hotzone();
  [[nodiscard]] Result<void> check_table();
  [[nodiscard]] Error foreign(const std::string &what);

  Kernel *kernel_;
  std::string name_;
  ReencryptState state_;
  SecretBuffer old_key_;
  SecretBuffer new_key_;
  std::string device_;
  CryptFlags flags_;
  bool read_only_;
  std::string target_type_;
  bool name_suspended_;
  std::optional<std::uint64_t> boundary_;
  OnlineLayout layout_;
  std::vector<CryptTable> expected_;  // NAME's table as the switch loaded it (or found it)
  std::string hz_name_;
  std::string hz_device_;  // "MAJOR:MINOR" once made or found
  bool hz_known_ = false;  // its state read (adopt) or made by the switch
  bool hz_suspended_ = false;
  bool hz_error_ = false;            // its live table fails I/O
  bool hz_inactive_linear_ = false;  // its linear table waits in the inactive slot
  bool pending_ = false;
};

// Puts NAME right after a stop, an error or a kill: a hotzone the journal has in flight, or one
// NAME routes through the suspended hotzone device, is put back and converted (only its I/O
// waits), then NAME gets the table of the journal's position and the hotzone device goes.
// When that fails, OnlineSwitch::fail_safe: the error says what the users see. Returns the
// position.
[[nodiscard]] Result<std::uint64_t> settle_online(OnlineSwitch &live_switch,
                                                  const ReencryptState &state, ReencryptIo &io,
                                                  JournalStore &journal);

}  // namespace lbscrypt
