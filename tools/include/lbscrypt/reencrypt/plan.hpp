// SPDX-License-Identifier: GPL-2.0-only
// The refusals of `lbscrypt reencrypt`, before a byte is written: pure functions over facts
// (PlanFacts), which the command gathers through the functions and interfaces below (the
// filesystem probe, the state file's place, the device's relatives in sysfs), so every
// refusal is tested on the host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/operations.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

// ---- the facts, and how they are gathered ------------------------------------------------

// What blkid recognises on the plaintext (through the old parameters).
struct FilesystemProbe {
  std::string type;  // blkid's TYPE (ext4, xfs, swap, LVM2_member, ...), or "partition table
                     // gpt" (PTTYPE), or "more than one signature" (ambiguous)
  std::optional<std::uint32_t> block_size;  // blkid's BLOCK_SIZE: the smallest write unit
};

class FilesystemProber {
 public:
  FilesystemProber() = default;
  FilesystemProber(const FilesystemProber &) = delete;
  FilesystemProber &operator=(const FilesystemProber &) = delete;
  FilesystemProber(FilesystemProber &&) = delete;
  FilesystemProber &operator=(FilesystemProber &&) = delete;
  virtual ~FilesystemProber() = default;

  // nullopt when no signature is recognised; Errc::device when `path` cannot be read.
  [[nodiscard]] virtual Result<std::optional<FilesystemProbe>> probe(const std::string &path) = 0;
};

// libblkid (superblocks and partition tables, as `blkid -p`), read-only.
[[nodiscard]] std::unique_ptr<FilesystemProber> make_blkid_prober();

// A block device that shares storage with the one converted.
struct RelatedDevice {
  DevNumber number;
  std::string name;      // sdb, sdb1, dm-3 (its sysfs name)
  std::string relation;  // "its disk", "a partition of it", "a device it is built on",
                         // "a device built on it"
};

// The device and every block device whose storage overlaps it: its disk (for a partition),
// its partitions (for a disk), the devices under it (slaves/, their disks) and over it
// (holders/, their partitions), each followed on in its own direction (a sibling partition
// or a mapping beside it on the same disk is not related).
struct DeviceFamily {
  std::optional<DevNumber> device;  // none for a regular file
  std::vector<RelatedDevice> related;
};

// From <sysfs>/dev/block (normally /sys). A device sysfs does not know has no relatives.
[[nodiscard]] DeviceFamily device_family(const std::filesystem::path &sysfs, DevNumber device);
// For a path: stat, then device_family() for a block device. Errc::device when it cannot be
// looked at.
[[nodiscard]] Result<DeviceFamily> device_family_of(const std::string &device,
                                                    const std::filesystem::path &sysfs = "/sys");

// Where the state file's directory is (the file itself need not exist yet).
struct StatePlace {
  std::string state;                   // the state file's path, for messages
  std::uint64_t fs_magic = 0;          // statfs's f_type of its directory
  std::optional<DevNumber> fs_device;  // st_dev of its directory
};

inline constexpr std::uint64_t kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC
inline constexpr std::uint64_t kRamfsMagic = 0x858458f6;  // RAMFS_MAGIC

// stat and statfs of the state file's directory; Errc::invalid_argument when it does not
// exist or is no directory.
[[nodiscard]] Result<StatePlace> state_place(const std::filesystem::path &state);

struct PlanFacts {
  std::string device;  // as given, for messages
  std::uint64_t device_bytes = 0;
  std::uint64_t offset = 0;           // 512-byte sectors on the device where the data starts
  std::uint64_t skip = 0;             // iv_offset, 512-byte sectors
  std::optional<std::uint64_t> size;  // --size in 512-byte sectors; absent or 0: the rest
  CryptSide old_side;
  CryptSide new_side;
  KnownCapabilities known;          // capabilities() of the running kernel
  std::optional<std::string> user;  // BlockDevices::user_of(device)
  DeviceFamily family;
  StatePlace state;
  // The lbscrypttab name of an x-initrd.attach line (not noauto) for the device: the
  // initramfs opens it and cannot resume a run.
  std::optional<std::string> initrd_volume;
  // With initrd_volume: what the boot needs it for (boot_use(), "holds / (fstab)"), when it
  // does; the initramfs opens it with or without x-initrd.attach.
  std::optional<std::string> boot_use;
  std::optional<FilesystemProbe> probe;  // through a private read-only old mapping
  bool old_key_checked = false;          // the lbscrypttab line's check= passed on it
  bool force = false;
};

struct ReencryptPlan {
  std::uint64_t data_bytes = 0;    // the data's length, a multiple of the larger sector
  std::vector<std::string> notes;  // what --force let through, one line each
};

// ---- the refusals --------------------------------------------------------------------------

// Each sector size a power of two the running target takes (gating.hpp's rule; no target
// loaded is no version above 4096); offset and skip multiples of both sector sizes; the data
// inside the device, not empty and a multiple of the larger sector. Returns the data's length
// in bytes. Errc::refused or Errc::invalid_argument.
[[nodiscard]] Result<std::uint64_t> check_reencrypt_geometry(const PlanFacts &facts);
// Errc::busy naming the holder.
[[nodiscard]] Result<void> check_reencrypt_device_free(const PlanFacts &facts);
// The state not on a tmpfs or ramfs (a reboot empties them) and not on the device or any
// device sharing its storage. Errc::refused.
[[nodiscard]] Result<void> check_reencrypt_state_place(const PlanFacts &facts);
// A volume the initramfs opens (x-initrd.attach, or behind /, /usr or the resume device) is
// refused; the advice keeps the machine bootable (a volume the boot needs keeps its line).
// Errc::refused.
[[nodiscard]] Result<void> check_reencrypt_boot(const PlanFacts &facts);
// The old key shown right: a signature found through it, or check= passed; else --force.
// Errc::key. With --force a note.
[[nodiscard]] Result<void> check_reencrypt_old_key(const PlanFacts &facts,
                                                   std::vector<std::string> &notes);
// The users' smallest write (BLOCK_SIZE) at least the new sector: below it always refused;
// unknown (no signature, or one without BLOCK_SIZE: swap, an LVM PV, a raw database) with a
// growing sector refused without --force. Errc::refused. With --force a note.
[[nodiscard]] Result<void> check_reencrypt_write_unit(const PlanFacts &facts,
                                                      std::vector<std::string> &notes);

// All of the above in that order: the first refusal, or the plan.
[[nodiscard]] Result<ReencryptPlan> plan_reencrypt(const PlanFacts &facts);

}  // namespace lbscrypt
