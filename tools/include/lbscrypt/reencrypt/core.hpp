// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt`, offline: a closed plain volume's key, cipher or sector size changed in
// place, one hotzone at a time, safe against a power cut at every write. This header holds
// what the other headers of lbscrypt/reencrypt/ build on: the parameters, the run's
// authentication, the state file, the journal and the engine.
//
// The parts, each in its own file under src/lib/reencrypt/:
// - the run's authentication (auth.cpp): the run key derived from both volume keys, the
//   state's MAC and the switch's, checked before anything the state says is obeyed;
// - the state file (state.cpp): the run's parameters and the key verifiers, JSON,
//   written once before the first byte and replaced atomically;
// - the journal (journal.cpp): STATE.journal beside it, two commit slots and a
//   copy of the hotzone's old ciphertext;
// - the engine (engine.cpp): the hotzone loop and its recovery, on the Io and
//   JournalStore interfaces, so every cut point is tested on the host;
// - the real I/O (io.cpp): two private device-mapper mappings over the device, the
//   old parameters read-only and the new read-write, and the device itself, all O_DIRECT;
// - the registry (registry.cpp): the runs in progress, which open, attach, the
//   generator and the initramfs hook consult;
// - the plan (plan.cpp): every refusal, before a byte is written.
//
// Positions are bytes from the start of the volume's data (the device's offset * 512).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lbscrypt/reencrypt/identity.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

// ---- parameters -------------------------------------------------------------------------

// One side of the conversion: what a crypt table line carries besides the device and offsets.
struct CryptSide {
  std::string cipher;               // kernel spec: aes-xts-plain64, capi:..., ...
  std::uint32_t key_bytes = 0;      // the key's size
  std::uint32_t sector_size = 512;  // bytes
  bool iv_large_sectors = false;
  bool operator==(const CryptSide &) const = default;
};

// A key verifier: PBKDF2-HMAC-SHA256 of the volume key (never the key itself). A mistyped key
// on --resume is refused before a byte is written.
struct KeyVerifier {
  std::vector<std::uint8_t> salt;  // 32 random bytes
  std::uint32_t iterations = 0;
  std::vector<std::uint8_t> digest;  // 32 bytes
  bool operator==(const KeyVerifier &) const = default;
};

inline constexpr std::uint32_t kVerifierIterations = 200000;
// The fewest a state file may hold (--pbkdf-force-iterations; cryptsetup's PBKDF2 minimum).
inline constexpr std::uint32_t kVerifierMinIterations = 1000;

// PBKDF2-HMAC-SHA256 (OpenSSL's libcrypto, which libcryptsetup already links).
[[nodiscard]] Result<std::vector<std::uint8_t>> pbkdf2_sha256(std::span<const std::uint8_t> secret,
                                                              std::span<const std::uint8_t> salt,
                                                              std::uint32_t iterations,
                                                              std::size_t out_bytes);
// A fresh salt from getrandom(2).
[[nodiscard]] Result<KeyVerifier> make_verifier(const SecretBuffer &key,
                                                std::uint32_t iterations = kVerifierIterations);
// Compares in constant time. Errc::key when the key does not match.
[[nodiscard]] Result<void> check_verifier(const KeyVerifier &verifier, const SecretBuffer &key,
                                          std::string_view which /* "old", "new" */);

// ---- authentication ---------------------------------------------------------------------

// An HMAC-SHA256 under the run's key.
inline constexpr std::size_t kRunMacBytes = 32;
using RunMac = std::array<std::uint8_t, kRunMacBytes>;

// HKDF-SHA256 (RFC 5869): extract with `salt`, expand with `info` to `out_bytes` (at most
// 255 blocks of 32). OpenSSL's libcrypto does the HMAC.
[[nodiscard]] Result<SecretBuffer> hkdf_sha256(std::span<const std::uint8_t> ikm,
                                               std::span<const std::uint8_t> salt,
                                               std::span<const std::uint8_t> info,
                                               std::size_t out_bytes);

// The run's authentication key: HKDF-SHA256 of both volume keys (each length-prefixed) with
// the label "lbscrypt reencrypt run key v1" as salt and the run id as info. Only who holds
// both keys can make or check the state file's and the journal's MACs, and a MAC of one run
// never verifies in another.
class RunAuth {
 public:
  [[nodiscard]] static Result<RunAuth> derive(const SecretBuffer &old_key,
                                              const SecretBuffer &new_key, std::string_view run_id);
  // The final switch's key, from the new key alone (another label): a --resume that only
  // has the switch left may no longer have the old key (the new key file may have replaced
  // it), yet must not take parameters from a state it cannot check.
  [[nodiscard]] static Result<RunAuth> derive_switch(const SecretBuffer &new_key,
                                                     std::string_view run_id);
  // HMAC-SHA256 of: the domain, a zero byte, the position (8 bytes, little-endian), the bytes.
  [[nodiscard]] Result<RunMac> mac(std::string_view domain, std::uint64_t position,
                                   std::span<const std::uint8_t> bytes) const;

 private:
  explicit RunAuth(SecretBuffer key) : key_(std::move(key)) {}
  SecretBuffer key_;
};

// ---- the state file --------------------------------------------------------------------

// Format 3: the state carries a MAC, and from the final switch on a second one under the new
// key alone (formats 1 and 2, without them, are refused: their runs are finished or aborted
// with the lbscrypt that started them).
inline constexpr std::uint32_t kStateFormat = 3;
// A hotzone is at most 1 GiB, as cryptsetup's LUKS2 hotzone: the journal holds one.
inline constexpr std::uint64_t kMaxHotzoneBytes = std::uint64_t{1} << 30U;

struct ReencryptState {
  std::uint32_t format = kStateFormat;
  std::string run_id;     // 32 lower-case hex characters, random; also in every journal slot
  std::string device;     // the path given (canonical: absolute, links resolved)
  std::string device_id;  // the registry's stable id of the device (reencrypt_registry)
  // What the device is made of (reencrypt/identity.hpp), recorded when the run starts;
  // nullopt where the run's device was no block device (the unit tests' stand-in).
  std::optional<DeviceFingerprint> device_identity;
  std::uint64_t offset = 0;         // 512-byte sectors on the device where the data starts
  std::uint64_t skip = 0;           // iv_offset, 512-byte sectors
  std::uint64_t data_bytes = 0;     // the data's length, a multiple of the larger sector
  std::uint64_t hotzone_bytes = 0;  // a multiple of every alignment (see hotzone_alignment)
  CryptSide old_side;
  CryptSide new_side;
  KeyVerifier old_verifier;
  KeyVerifier new_verifier;
  std::string started;  // UTC, ISO 8601, for people
  // The MAC of the plaintext of the data's first unit (the larger sector) as the run found
  // it: a --resume whose journal has no record yet checks the device against it.
  std::vector<std::uint8_t> first_unit_mac;  // 32 bytes
  // Started online: the users wrote through NAME until the first hotzone, so the first unit
  // was not recorded (first_unit_mac is zeros) and NAME's table is what a --resume checks.
  bool started_online = false;
  // Empty until the final switch (--update-tab) begins; then the MAC of every field but
  // this one and mac (state_switch_text) under RunAuth::derive_switch, written before the
  // first change to lbscrypttab or a key file: a --resume that has only the switch left
  // checks it with the new key alone, and without it asks for both keys.
  std::vector<std::uint8_t> switch_mac;  // empty or 32 bytes
  // The MAC of every other field (state_mac_text), under the run's key (RunAuth).
  std::vector<std::uint8_t> mac;  // 32 bytes
  bool operator==(const ReencryptState &) const = default;
};

// What the state's MAC covers: the state file's JSON without its "mac" field, keys sorted,
// no whitespace, non-ASCII escaped. Every field, present and to come, is covered.
[[nodiscard]] std::string state_mac_text(const ReencryptState &state);
// Sets state.mac.
[[nodiscard]] Result<void> seal_state(ReencryptState &state, const RunAuth &auth);
// Errc::invalid_argument when the MAC does not verify (a field was edited, or the state is
// another run's): checked once both keys are proven, before a byte is written.
[[nodiscard]] Result<void> check_state_seal(const ReencryptState &state, const RunAuth &auth,
                                            const std::filesystem::path &origin);
// What the switch's MAC covers: state_mac_text without "switch_mac" either.
[[nodiscard]] std::string state_switch_text(const ReencryptState &state);
// Sets state.switch_mac (switch_auth: RunAuth::derive_switch); the state's own MAC, which
// covers switch_mac, is sealed again after it.
[[nodiscard]] Result<void> seal_switch(ReencryptState &state, const RunAuth &switch_auth);
// Errc::invalid_argument when switch_mac is absent or does not verify with the new key.
[[nodiscard]] Result<void> check_switch_seal(const ReencryptState &state,
                                             const RunAuth &switch_auth,
                                             const std::filesystem::path &origin);

// Strict JSON: unknown or missing keys, a wrong type or format, and inconsistent sizes are
// Errc::invalid_argument naming the field and the file.
[[nodiscard]] std::string state_to_json(const ReencryptState &state);
[[nodiscard]] Result<ReencryptState> state_from_json(std::string_view text,
                                                     const std::string &origin);

// The journal's path for a state file: STATE.journal.
[[nodiscard]] std::filesystem::path journal_path(const std::filesystem::path &state);

// Files on the state filesystem. The state path must not be a symlink, FIFO, device or
// directory (Errc::invalid_argument naming what it is). write_state replaces atomically
// (a temporary beside it, fsync, rename, fsync of the directory) with mode 0600.
[[nodiscard]] Result<void> write_state(const std::filesystem::path &path,
                                       const ReencryptState &state);
[[nodiscard]] Result<ReencryptState> read_state(const std::filesystem::path &path);
// Removes the state file: renamed to STATE.ended (durable), wiped there and removed, then its
// journal wiped and removed, each step durable. A power cut anywhere leaves either the state
// with its whole journal (--resume finishes) or no state (STATE.ended and the journal are
// leftovers of a run that ended, which finish_ended_state removes).
[[nodiscard]] Result<void> remove_state(const std::filesystem::path &path);
[[nodiscard]] std::filesystem::path ended_state_path(const std::filesystem::path &state);
// Where STATE is absent and STATE.ended is there (a stop came while a finished run removed its
// state): the removal finished (remove_state), true. false when there is nothing of the kind.
[[nodiscard]] Result<bool> finish_ended_state(const std::filesystem::path &path);

// An exclusive flock on the state file for the whole run: a second reencrypt of the same run
// is Errc::busy. Released by destruction.
class StateLock {
 public:
  StateLock() = default;
  ~StateLock();
  StateLock(const StateLock &) = delete;
  StateLock &operator=(const StateLock &) = delete;
  StateLock(StateLock &&other) noexcept;
  StateLock &operator=(StateLock &&other) noexcept;
  [[nodiscard]] static Result<StateLock> acquire(const std::filesystem::path &state);

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// ---- the journal ------------------------------------------------------------------------

// Two commit slots, each in its own 4096-byte block so a torn write of one never touches the
// other: slot 0 only ever holds "journaled", slot 1 only "completed". Each carries the run id,
// a MAC under the run's key and a SHA-256 of itself: a slot whose SHA-256 does not verify was
// torn and is absent; one whose SHA-256 verifies and whose MAC does not is refused.
//
// The records also say what the device must hold at the journal's position (a "unit" is the
// larger sector size; its MAC is of its plaintext): a journal older than the device (a state
// disk that lost its last writes, a snapshot or a copy put back) is refused, never converted
// twice.
inline constexpr std::size_t kMaxUnitSamples = 64;
struct JournaledRecord {
  std::uint64_t sequence = 0;  // the hotzone's index
  std::uint64_t position = 0;  // the hotzone's start
  std::uint64_t length = 0;    // bytes of old ciphertext in the data area
  RunMac data_mac{};           // of the old ciphertext in the data area
  RunMac next_mac{};           // the next hotzone's first unit (zeros for the last hotzone)
  // The hotzone's units at unit_samples(): a --resume finds each the old ciphertext, its
  // conversion, or a mix of the two a cut tore.
  std::vector<RunMac> samples;
  bool operator==(const JournaledRecord &) const = default;
};

struct CompletedRecord {
  std::uint64_t sequence = 0;
  std::uint64_t position = 0;  // everything before it is in the new parameters
  RunMac next_mac{};           // the unit at position before conversion (zeros at the end)
  // Written online: the users' mapping went live after it, so the unit at position may
  // hold their writes (only its conversion is refused then).
  bool users_live = false;
  bool operator==(const CompletedRecord &) const = default;
};

// The units of a hotzone of `length` bytes whose plaintext a journaled record keeps: offsets
// in the hotzone, evenly spread from its first unit to its last, at most kMaxUnitSamples and
// few enough that a --resume reads at most 1 MiB of the device.
[[nodiscard]] std::vector<std::uint64_t> unit_samples(std::uint64_t length, std::uint64_t unit);
// The bytes a --resume reads from the device at most to check the journal's position.
inline constexpr std::uint64_t kResumeCheckBytes = std::uint64_t{1} << 20U;

struct JournalSlots {
  std::optional<JournaledRecord> journaled;
  std::optional<CompletedRecord> completed;
  // Slot 1 is all zeros: no hotzone was ever completed. A slot 1 that neither verifies nor is
  // blank was torn while written: then the journaled record says where the run is.
  bool completed_blank = true;
};

// What the engine needs of the journal. Each write returns only once it is durable
// (fdatasync), so the engine's order is the order a power cut sees.
class JournalStore {
 public:
  JournalStore() = default;
  JournalStore(const JournalStore &) = delete;
  JournalStore &operator=(const JournalStore &) = delete;
  JournalStore(JournalStore &&) = delete;
  JournalStore &operator=(JournalStore &&) = delete;
  virtual ~JournalStore() = default;

  [[nodiscard]] virtual Result<JournalSlots> read_slots() = 0;
  [[nodiscard]] virtual Result<void> write_data(std::span<const std::uint8_t> data) = 0;
  [[nodiscard]] virtual Result<void> read_data(std::span<std::uint8_t> data) = 0;
  [[nodiscard]] virtual Result<void> write_journaled(const JournaledRecord &record) = 0;
  [[nodiscard]] virtual Result<void> write_completed(const CompletedRecord &record) = 0;
  // Overwrites the data area with zeros (the old ciphertext of a rotated key must not stay
  // on another disk).
  [[nodiscard]] virtual Result<void> wipe_data() = 0;
  // A MAC under the run's key, for the data area's copy and the units of the records.
  [[nodiscard]] virtual Result<RunMac> mac(std::string_view domain, std::uint64_t position,
                                           std::span<const std::uint8_t> bytes) = 0;
};

// The journal file: created (preallocated to 8192 + hotzone_bytes, zero-filled, fsynced, mode
// 0600) when `create`, else opened and its size and run id checked (a slot of another run is
// refused). A run creates it before its state file, so a state file that exists always has its
// whole journal beside it. `auth` makes and checks the slots' MACs; without it (only the final
// switch of --update-tab, which asks for no key and writes nothing to the device) the slots
// are read unchecked and every write and MAC is Errc::key.
[[nodiscard]] Result<std::unique_ptr<JournalStore>> open_journal(const std::filesystem::path &path,
                                                                 const std::string &run_id,
                                                                 std::uint64_t hotzone_bytes,
                                                                 bool create,
                                                                 std::optional<RunAuth> auth);

// ---- the engine -------------------------------------------------------------------------

// The volume as the engine sees it. Every call covers whole sectors of both sides; writes are
// durable only after flush().
class ReencryptIo {
 public:
  ReencryptIo() = default;
  ReencryptIo(const ReencryptIo &) = delete;
  ReencryptIo &operator=(const ReencryptIo &) = delete;
  ReencryptIo(ReencryptIo &&) = delete;
  ReencryptIo &operator=(ReencryptIo &&) = delete;
  virtual ~ReencryptIo() = default;

  // The device's bytes (ciphertext) as they are.
  [[nodiscard]] virtual Result<void> read_raw(std::uint64_t position,
                                              std::span<std::uint8_t> out) = 0;
  [[nodiscard]] virtual Result<void> write_raw(std::uint64_t position,
                                               std::span<const std::uint8_t> data) = 0;
  // Plaintext through the old parameters, and written through the new ones.
  [[nodiscard]] virtual Result<void> read_old(std::uint64_t position,
                                              std::span<std::uint8_t> out) = 0;
  [[nodiscard]] virtual Result<void> write_new(std::uint64_t position,
                                               std::span<const std::uint8_t> data) = 0;
  // Plaintext through the new parameters (what a converted part reads as).
  [[nodiscard]] virtual Result<void> read_new(std::uint64_t position,
                                              std::span<std::uint8_t> out) = 0;
  // Every write so far durable on the device (a cache flush).
  [[nodiscard]] virtual Result<void> flush() = 0;
};

struct Progress {
  std::uint64_t start_bytes = 0;  // where this run started
  std::uint64_t done_bytes = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t hotzones = 0;  // completed in this run
};

struct EngineHooks {
  // After each completed hotzone. Optional.
  std::function<void(const Progress &)> progress;
  // Polled between hotzones (after a completed one, before the next is journaled): true stops
  // at that safe point. Optional.
  std::function<bool()> stop;
  // Online mode (the users' mapping is live over the device). Optional, both.
  // Before the engine touches a hotzone [position, position + length) on the device: before
  // it reads the hotzone to journal it, and before it puts back a hotzone a cut left. An error
  // stops the run with it, nothing of that hotzone touched.
  std::function<Result<void>(std::uint64_t position, std::uint64_t length)> before_hotzone;
  // After a hotzone's completed record is durable: everything before `position` is in the
  // new parameters. It runs before the journal's copy is wiped; an error stops the run with it
  // (the record stays: --resume goes on after that hotzone).
  std::function<Result<void>(std::uint64_t position)> after_completed;
  // Online: the users' mapping goes live after each completed hotzone (its record says so).
  bool users_live = false;
};

enum class EngineOutcome { finished, stopped };

struct EngineReport {
  EngineOutcome outcome = EngineOutcome::finished;
  Progress progress;
  bool recovered = false;  // a journaled hotzone was put back before going on
  // The hotzone's buffer (old ciphertext and plaintext) was locked in memory. When mlock is
  // refused (RLIMIT_MEMLOCK without CAP_IPC_LOCK) the run goes on with it unlocked.
  bool buffer_locked = true;
};

// Runs (or resumes: the journal says where) the conversion to the end or to a stop. On an
// I/O error returns it, leaving a journal a later run resumes from.
// Per hotzone [p, p + n): [before_hotzone] -> read_raw -> write_data -> read_old (the
// hotzone and the next hotzone's first unit) -> write_journaled -> write_new -> flush ->
// write_completed -> [after_completed] -> wipe_data.
// Before anything is written, the device is checked at the journal's position (at most
// kResumeCheckBytes read): the unit at the position must read as the record says (with the
// old parameters; online also anything but its conversion), an in-flight hotzone's sampled
// units each its old ciphertext, its conversion or a mix; anything else is
// Errc::invalid_argument "the journal is older than the device".
// Where the run is: the completed record's position; with slot 1 blank, 0; with slot 1 torn,
// the journaled record's position (a journaled hotzone was reached), and with neither slot
// verifying, Errc::invalid_argument (the journal is damaged: nothing is written).
// Recovery: a journaled record at that position whose data verifies is written back with
// write_raw (after before_hotzone) and flushed, then the hotzone is done again; one whose data does
// not verify is Errc::invalid_argument (nothing is written). A journaled record behind the position
// is stale and ignored.
[[nodiscard]] Result<EngineReport> run_engine(const ReencryptState &state, ReencryptIo &io,
                                              JournalStore &journal, const EngineHooks &hooks);

// The unit of the position checks: the larger of the two sector sizes.
[[nodiscard]] std::uint64_t check_unit_bytes(const ReencryptState &state);
// The MAC of the plaintext of the data's first unit (read through the old parameters), for
// a new run's state.first_unit_mac.
[[nodiscard]] Result<RunMac> first_unit_mac(const ReencryptState &state, ReencryptIo &io,
                                            JournalStore &journal);

// The alignment of hotzones: the largest of the two sector sizes and `logical_block`.
[[nodiscard]] std::uint64_t hotzone_alignment(const CryptSide &old_side, const CryptSide &new_side,
                                              std::uint32_t logical_block);

}  // namespace lbscrypt
