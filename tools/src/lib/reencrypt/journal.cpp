// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt journal, STATE.journal: two commit slots and the hotzone's old ciphertext.
//
// The file, 8192 + hotzone_bytes bytes, preallocated with zeros when the run starts:
//   [0, 4096)      slot 0, only ever a "journaled" record
//   [4096, 8192)   slot 1, only ever a "completed" record
//   [8192, ...)    the data area: the old ciphertext of the hotzone being converted
// A slot is one 4096-byte block, written whole with one pwrite and made durable with
// fdatasync; a torn write of one slot never touches the other. Its layout, integers
// little-endian, MACs under the run's key (RunAuth):
//   [0, 8)         magic "LBSRJNL2"
//   [8, 12)        kind: 1 journaled, 2 completed
//   [12, 16)       flags: bit 0, the users' mapping went live after it (completed, online)
//   [16, 32)       the run id (the state file's 32 hex characters as 16 bytes)
//   [32, 40)       sequence: the hotzone's index
//   [40, 48)       position: the hotzone's start (completed: its end), bytes from the data's start
//   [48, 56)       length: bytes of old ciphertext in the data area (0 when completed)
//   [56, 88)       MAC of those bytes (zeros when completed)
//   [88, 120)      MAC of the plaintext of the unit after the hotzone (zeros at the data's end)
//   [120, 124)     how many sampled units follow (journaled; 0 when completed)
//   [124, 128)     zero
//   [128, 2176)    MACs of the plaintext of the hotzone's sampled units, 32 bytes each
//   [2176, 4032)   zero
//   [4032, 4064)   MAC of bytes [0, 4032)
//   [4064, 4096)   SHA-256 of bytes [0, 4064)
// The checksum closes the block, so a block torn at any point (a mix of its old and new
// sectors) does not verify: its head and its checksum come from different writes; such a slot
// is absent. A slot whose checksum verifies and whose MAC does not was not written by this
// run with these keys (forged, edited, or another run's): it is refused, nothing is written.
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "file_descriptor.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/table.hpp"
#include "reencrypt/files.hpp"

namespace lbscrypt {

namespace {

using detail::FileDescriptor;

constexpr std::size_t kJfileSlotBytes = 4096;
constexpr std::uint64_t kJfileSlot0 = 0;
constexpr std::uint64_t kJfileSlot1 = kJfileSlotBytes;
constexpr std::uint64_t kJfileDataOffset = 2 * kJfileSlotBytes;
constexpr std::size_t kJfileZeroChunk = std::size_t{1} << 20;

constexpr std::array<std::uint8_t, 8> kJfileMagic = {'L', 'B', 'S', 'R', 'J', 'N', 'L', '2'};
constexpr std::uint32_t kJfileKindJournaled = 1;
constexpr std::uint32_t kJfileKindCompleted = 2;
constexpr std::uint32_t kJfileFlagUsersLive = 1;
constexpr std::size_t kJfileKindAt = 8;
constexpr std::size_t kJfileFlagsAt = 12;
constexpr std::size_t kJfileRunIdAt = 16;
constexpr std::size_t kJfileSequenceAt = 32;
constexpr std::size_t kJfilePositionAt = 40;
constexpr std::size_t kJfileLengthAt = 48;
constexpr std::size_t kJfileDataMacAt = 56;
constexpr std::size_t kJfileNextMacAt = 88;
constexpr std::size_t kJfileSampleCountAt = 120;
constexpr std::size_t kJfileSamplesAt = 128;
constexpr std::size_t kJfileSlotMacAt = kJfileSlotBytes - 64;
constexpr std::size_t kJfileChecksumAt = kJfileSlotBytes - 32;
static_assert(kJfileSamplesAt + kMaxUnitSamples * kRunMacBytes <= kJfileSlotMacAt);
constexpr std::string_view kJfileSlotDomain = "journal slot";

using JfileBlock = std::array<std::uint8_t, kJfileSlotBytes>;
using JfileRunId = std::array<std::uint8_t, 16>;
using JfileDigest = std::array<std::uint8_t, 32>;

void jfile_put_u32(JfileBlock &block, std::size_t at, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i) {
    block[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

void jfile_put_u64(JfileBlock &block, std::size_t at, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) {
    block[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

std::uint32_t jfile_get_u32(const JfileBlock &block, std::size_t at) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    value |= static_cast<std::uint32_t>(block[at + i]) << (8 * i);
  }
  return value;
}

std::uint64_t jfile_get_u64(const JfileBlock &block, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    value |= static_cast<std::uint64_t>(block[at + i]) << (8 * i);
  }
  return value;
}

Result<JfileDigest> jfile_sha256(std::span<const std::uint8_t> bytes) {
  JfileDigest out{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != out.size()) {
    return make_error(Errc::device, "libcrypto could not compute a SHA-256 for the journal");
  }
  return out;
}

// The 32 hex characters of a run id as 16 bytes (either case is refused but lower).
std::optional<JfileRunId> jfile_run_id(std::string_view hex) {
  JfileRunId out{};
  const auto bytes = detail::lower_hex_bytes(hex, out.size());
  if (!bytes) {
    return std::nullopt;
  }
  std::copy(bytes->begin(), bytes->end(), out.begin());
  return out;
}

std::string jfile_hex(std::span<const std::uint8_t> bytes) {
  std::string out;
  for (const std::uint8_t byte : bytes) {
    out += fmt::format("{:02x}", byte);
  }
  return out;
}

// What a slot says when its magic and checksum verify (kind and run id not yet checked).
struct JfileSlot {
  std::uint32_t kind = 0;
  std::uint32_t flags = 0;
  JfileRunId run_id{};
  std::uint64_t sequence = 0;
  std::uint64_t position = 0;
  std::uint64_t length = 0;
  RunMac data_mac{};
  RunMac next_mac{};
  std::vector<RunMac> samples;
  bool mac_verifies = false;
};

Result<JfileBlock> jfile_encode(const JfileSlot &slot, const RunAuth &auth) {
  if (slot.samples.size() > kMaxUnitSamples) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} sampled units do not fit a journal slot ({} at most)",
                                  slot.samples.size(), kMaxUnitSamples));
  }
  JfileBlock block{};
  std::copy(kJfileMagic.begin(), kJfileMagic.end(), block.begin());
  jfile_put_u32(block, kJfileKindAt, slot.kind);
  jfile_put_u32(block, kJfileFlagsAt, slot.flags);
  std::copy(slot.run_id.begin(), slot.run_id.end(), block.begin() + kJfileRunIdAt);
  jfile_put_u64(block, kJfileSequenceAt, slot.sequence);
  jfile_put_u64(block, kJfilePositionAt, slot.position);
  jfile_put_u64(block, kJfileLengthAt, slot.length);
  std::copy(slot.data_mac.begin(), slot.data_mac.end(), block.begin() + kJfileDataMacAt);
  std::copy(slot.next_mac.begin(), slot.next_mac.end(), block.begin() + kJfileNextMacAt);
  jfile_put_u32(block, kJfileSampleCountAt, static_cast<std::uint32_t>(slot.samples.size()));
  for (std::size_t i = 0; i < slot.samples.size(); ++i) {
    std::copy(slot.samples[i].begin(), slot.samples[i].end(),
              block.begin() + static_cast<std::ptrdiff_t>(kJfileSamplesAt + i * kRunMacBytes));
  }
  const auto mac = auth.mac(kJfileSlotDomain, 0, std::span(block).first(kJfileSlotMacAt));
  if (!mac) {
    return mac.error();
  }
  std::copy(mac->begin(), mac->end(), block.begin() + kJfileSlotMacAt);
  const auto checksum = jfile_sha256(std::span(block).first(kJfileChecksumAt));
  if (!checksum) {
    return checksum.error();
  }
  std::copy(checksum->begin(), checksum->end(), block.begin() + kJfileChecksumAt);
  return block;
}

// nullopt when the block's magic or checksum does not verify (torn, or never written); else
// the slot, and whether its MAC verifies.
// Without `auth` (the final switch, which asks for no key) the MAC is taken as it is.
Result<std::optional<JfileSlot>> jfile_decode(const JfileBlock &block, const RunAuth *auth) {
  if (!std::equal(kJfileMagic.begin(), kJfileMagic.end(), block.begin())) {
    return std::optional<JfileSlot>();
  }
  const auto checksum = jfile_sha256(std::span(block).first(kJfileChecksumAt));
  if (!checksum) {
    return checksum.error();
  }
  if (!std::equal(checksum->begin(), checksum->end(), block.begin() + kJfileChecksumAt)) {
    return std::optional<JfileSlot>();
  }
  JfileSlot slot;
  slot.mac_verifies = true;
  if (auth != nullptr) {
    const auto mac = auth->mac(kJfileSlotDomain, 0, std::span(block).first(kJfileSlotMacAt));
    if (!mac) {
      return mac.error();
    }
    slot.mac_verifies =
        CRYPTO_memcmp(mac->data(), block.data() + kJfileSlotMacAt, mac->size()) == 0;
  }
  slot.kind = jfile_get_u32(block, kJfileKindAt);
  slot.flags = jfile_get_u32(block, kJfileFlagsAt);
  std::copy_n(block.begin() + kJfileRunIdAt, slot.run_id.size(), slot.run_id.begin());
  slot.sequence = jfile_get_u64(block, kJfileSequenceAt);
  slot.position = jfile_get_u64(block, kJfilePositionAt);
  slot.length = jfile_get_u64(block, kJfileLengthAt);
  std::copy_n(block.begin() + kJfileDataMacAt, slot.data_mac.size(), slot.data_mac.begin());
  std::copy_n(block.begin() + kJfileNextMacAt, slot.next_mac.size(), slot.next_mac.begin());
  const std::uint32_t samples = jfile_get_u32(block, kJfileSampleCountAt);
  if (slot.mac_verifies && samples <= kMaxUnitSamples) {
    slot.samples.resize(samples);
    for (std::size_t i = 0; i < samples; ++i) {
      std::copy_n(block.begin() + static_cast<std::ptrdiff_t>(kJfileSamplesAt + i * kRunMacBytes),
                  kRunMacBytes, slot.samples[i].begin());
    }
  }
  return std::optional<JfileSlot>(slot);
}

Error jfile_no_key(const std::filesystem::path &path) {
  return make_error(Errc::key, fmt::format("{} was opened without the run's keys: it is only "
                                           "read",
                                           printable(path.string())));
}

// A slot whose checksum verifies and whose MAC does not: refused.
Error jfile_forged(const std::filesystem::path &path, std::string_view which) {
  return make_error(Errc::invalid_argument,
                    fmt::format("{}: its {} slot does not verify with both keys of this run (it "
                                "was forged or edited, or copied from another run): nothing was "
                                "written; give the journal this run wrote, unchanged",
                                printable(path.string()), which));
}

class JfileStore final : public JournalStore {
 public:
  JfileStore(FileDescriptor fd, std::filesystem::path path, const JfileRunId &run_id,
             std::uint64_t hotzone_bytes, std::optional<RunAuth> auth)
      : fd_(std::move(fd)),
        path_(std::move(path)),
        run_id_(run_id),
        hotzone_(hotzone_bytes),
        auth_(std::move(auth)) {}

  Result<JournalSlots> read_slots() override {
    JournalSlots slots;
    const auto journaled = read_slot(kJfileSlot0);
    if (!journaled) {
      return journaled.error();
    }
    if (const auto &slot = *journaled; slot && slot->run_id == run_id_) {
      if (!slot->mac_verifies || slot->kind != kJfileKindJournaled) {
        return jfile_forged(path_, "journaled");
      }
      slots.journaled = JournaledRecord{slot->sequence, slot->position, slot->length,
                                        slot->data_mac, slot->next_mac, slot->samples};
    }
    JfileBlock block{};
    if (const int err = detail::pread_full(fd_.get(), block, kJfileSlot1); err != 0) {
      return detail::state_file_error("read the journal", path_, err);
    }
    slots.completed_blank =
        std::all_of(block.begin(), block.end(), [](std::uint8_t b) { return b == 0; });
    const auto completed = jfile_decode(block, auth_ ? &*auth_ : nullptr);
    if (!completed) {
      return completed.error();
    }
    if (const auto &slot = *completed; slot && slot->run_id == run_id_) {
      if (!slot->mac_verifies || slot->kind != kJfileKindCompleted) {
        return jfile_forged(path_, "completed");
      }
      slots.completed = CompletedRecord{slot->sequence, slot->position, slot->next_mac,
                                        (slot->flags & kJfileFlagUsersLive) != 0};
    }
    return slots;
  }

  Result<void> write_data(std::span<const std::uint8_t> data) override {
    if (auto fits = check_fits(data.size()); !fits) {
      return fits;
    }
    if (const int err = detail::pwrite_full(fd_.get(), data, kJfileDataOffset); err != 0) {
      return detail::state_file_error("write the journal", path_, err);
    }
    return sync();
  }

  Result<void> read_data(std::span<std::uint8_t> data) override {
    if (auto fits = check_fits(data.size()); !fits) {
      return fits;
    }
    if (const int err = detail::pread_full(fd_.get(), data, kJfileDataOffset); err != 0) {
      return detail::state_file_error("read the journal", path_, err);
    }
    return {};
  }

  Result<void> write_journaled(const JournaledRecord &record) override {
    JfileSlot slot;
    slot.kind = kJfileKindJournaled;
    slot.run_id = run_id_;
    slot.sequence = record.sequence;
    slot.position = record.position;
    slot.length = record.length;
    slot.data_mac = record.data_mac;
    slot.next_mac = record.next_mac;
    slot.samples = record.samples;
    return write_slot(kJfileSlot0, slot);
  }

  Result<void> write_completed(const CompletedRecord &record) override {
    JfileSlot slot;
    slot.kind = kJfileKindCompleted;
    slot.flags = record.users_live ? kJfileFlagUsersLive : 0;
    slot.run_id = run_id_;
    slot.sequence = record.sequence;
    slot.position = record.position;
    slot.next_mac = record.next_mac;
    return write_slot(kJfileSlot1, slot);
  }

  Result<void> wipe_data() override {
    const std::vector<std::uint8_t> zeros(std::min<std::size_t>(hotzone_, kJfileZeroChunk));
    for (std::uint64_t at = 0; at < hotzone_; at += zeros.size()) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), hotzone_ - at));
      if (const int err = detail::pwrite_full(fd_.get(), {zeros.data(), n}, kJfileDataOffset + at);
          err != 0) {
        return detail::state_file_error("wipe the journal", path_, err);
      }
    }
    return sync();
  }

  Result<RunMac> mac(std::string_view domain, std::uint64_t position,
                     std::span<const std::uint8_t> bytes) override {
    if (!auth_) {
      return jfile_no_key(path_);
    }
    return auth_->mac(domain, position, bytes);
  }

  // A slot whose checksum verifies but that another run wrote: the run id, else nullopt.
  Result<std::optional<JfileRunId>> foreign_run() {
    for (const std::uint64_t offset : {kJfileSlot0, kJfileSlot1}) {
      const auto slot = read_slot(offset);
      if (!slot) {
        return slot.error();
      }
      if (*slot && (*slot)->run_id != run_id_) {
        return std::optional<JfileRunId>((*slot)->run_id);
      }
    }
    return std::optional<JfileRunId>();
  }

 private:
  Result<std::optional<JfileSlot>> read_slot(std::uint64_t offset) {
    JfileBlock block{};
    if (const int err = detail::pread_full(fd_.get(), block, offset); err != 0) {
      return detail::state_file_error("read the journal", path_, err);
    }
    return jfile_decode(block, auth_ ? &*auth_ : nullptr);
  }

  Result<void> write_slot(std::uint64_t offset, const JfileSlot &slot) {
    if (!auth_) {
      return jfile_no_key(path_);
    }
    const auto block = jfile_encode(slot, *auth_);
    if (!block) {
      return block.error();
    }
    if (const int err = detail::pwrite_full(fd_.get(), *block, offset); err != 0) {
      return detail::state_file_error("write the journal", path_, err);
    }
    return sync();
  }

  [[nodiscard]] Result<void> check_fits(std::size_t bytes) const {
    if (bytes > hotzone_) {
      return make_error(Errc::invalid_argument,
                        fmt::format("{} bytes do not fit the journal's data area of {} bytes ({})",
                                    bytes, hotzone_, printable(path_.string())));
    }
    return {};
  }

  Result<void> sync() {
    if (fdatasync(fd_.get()) != 0) {
      return detail::state_file_error("write the journal", path_, errno);
    }
    return {};
  }

  FileDescriptor fd_;
  std::filesystem::path path_;
  JfileRunId run_id_;
  std::uint64_t hotzone_;
  std::optional<RunAuth> auth_;  // nullopt: the slots are read without their MACs
};

// A new journal: zeros over its whole size (written, not sparse, so a full state filesystem
// shows now and not in the middle of the run), durable with its directory entry.
Result<FileDescriptor> jfile_create(const std::filesystem::path &path, std::uint64_t size) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return detail::not_regular_file_error(path, st.st_mode);
    }
    return make_error(Errc::exists,
                      fmt::format("{} already exists without its state file: a run cut "
                                  "before its first write or after its last left it; remove "
                                  "it, or name another state file",
                                  printable(path.string())),
                      EEXIST);
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  FileDescriptor fd(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    return detail::state_file_error("create the journal", path, errno);
  }
  detail::UnlinkOnFailure created(path);
  if (fchmod(fd.get(), 0600) != 0) {  // whatever the umask
    return detail::state_file_error("set the mode of the journal", path, errno);
  }
  const std::vector<std::uint8_t> zeros(kJfileZeroChunk);
  for (std::uint64_t at = 0; at < size; at += zeros.size()) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), size - at));
    if (const int err = detail::pwrite_full(fd.get(), {zeros.data(), n}, at); err != 0) {
      return detail::state_file_error("create the journal", path, err);
    }
  }
  if (fsync(fd.get()) != 0) {
    return detail::state_file_error("create the journal", path, errno);
  }
  if (const int err = detail::fsync_parent_directory(path); err != 0) {
    return detail::state_file_error("make durable the directory of", path, err);
  }
  created.keep();
  return fd;
}

// An existing journal: a regular file of exactly `size` bytes.
Result<FileDescriptor> jfile_open(const std::filesystem::path &path, std::uint64_t size) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return make_error(Errc::not_found,
                        fmt::format("{}: the journal of this state file is missing: it is "
                                    "written beside the state file (STATE.journal)",
                                    printable(path.string())),
                        ENOENT);
    }
    return detail::state_file_error("open the journal", path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return detail::not_regular_file_error(path, st.st_mode);
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  FileDescriptor fd(open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ELOOP) {
      return detail::not_regular_file_error(path, S_IFLNK);
    }
    return detail::state_file_error("open the journal", path, errno);
  }
  if (fstat(fd.get(), &st) != 0) {
    return detail::state_file_error("open the journal", path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return detail::not_regular_file_error(path, st.st_mode);
  }
  if (static_cast<std::uint64_t>(st.st_size) != size) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("{} is {} bytes, not the {} (8192 + the hotzone's {}) of this "
                    "state's journal: it is another run's journal, or it was "
                    "changed",
                    printable(path.string()), st.st_size, size, size - kJfileDataOffset));
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<JournalStore>> open_journal(const std::filesystem::path &path,
                                                   const std::string &run_id,
                                                   std::uint64_t hotzone_bytes, bool create,
                                                   std::optional<RunAuth> auth) {
  const auto id = jfile_run_id(run_id);
  if (!id) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("the run id '{}' is not 32 lower-case hex characters", printable(run_id)));
  }
  if (hotzone_bytes == 0 || hotzone_bytes > kMaxHotzoneBytes) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("a hotzone of {} bytes: give 1 to {} bytes", hotzone_bytes, kMaxHotzoneBytes));
  }
  const std::uint64_t size = kJfileDataOffset + hotzone_bytes;
  auto fd = create ? jfile_create(path, size) : jfile_open(path, size);
  if (!fd) {
    return fd.error();
  }
  auto store = std::make_unique<JfileStore>(std::move(fd).value(), path, *id, hotzone_bytes,
                                            std::move(auth));
  if (!create) {
    const auto foreign = store->foreign_run();
    if (!foreign) {
      return foreign.error();
    }
    if (*foreign) {
      return make_error(Errc::invalid_argument,
                        fmt::format("{} is the journal of run {}, not of this state's run {}: "
                                    "give the state file that goes with it",
                                    printable(path.string()), jfile_hex(**foreign), run_id));
    }
  }
  return std::unique_ptr<JournalStore>(std::move(store));
}

}  // namespace lbscrypt
