// SPDX-License-Identifier: GPL-2.0-only
// Questions about the backing block device: its size, whether it holds a LUKS header, and
// the path behind a major:minor. An interface so the commands are tested with a fake.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/result.hpp"

namespace lbscrypt {

// A loop device attached to a regular file. It is attached with autoclear: once `hold` (the
// descriptor that keeps it) is released and no mapping uses it, the kernel detaches it.
struct LoopDevice {
  std::string path;           // /dev/loopN
  std::shared_ptr<int> hold;  // the open descriptor; releasing it closes it
};

// What a path names (stat, links followed).
enum class PathKind { missing, block_device, regular_file, directory, character_device, other };

// "a block device", "a directory", ... for messages.
[[nodiscard]] std::string_view describe(PathKind kind);

// What a block device tells of the writes it makes whole, in bytes, from its queue in sysfs
// (a partition's are its disk's). The atomic limits are 0 where the device or the kernel
// (before 6.11, whose sysfs has no such files) has no atomic writes.
struct WriteGeometry {
  std::uint64_t physical_block = 0;   // queue/physical_block_size
  std::uint64_t atomic_unit_min = 0;  // queue/atomic_write_unit_min_bytes
  std::uint64_t atomic_unit_max = 0;  // queue/atomic_write_unit_max_bytes
  std::uint64_t atomic_max = 0;       // queue/atomic_write_max_bytes
  std::uint64_t atomic_boundary = 0;  // queue/atomic_write_boundary_bytes; 0: none
  // What one write's segments hold of the bounce pages it is made of: max_segments times
  // the smaller of a page and max_segment_size. 0: not known (no limit is assumed).
  std::uint64_t segment_bytes = 0;
  std::uint64_t start = 0;  // a partition's first 512-byte sector on its disk; 0 for a disk
  bool zoned = false;       // queue/zoned is not "none"
};

class BlockDevices {
 public:
  BlockDevices() = default;
  BlockDevices(const BlockDevices &) = delete;
  BlockDevices &operator=(const BlockDevices &) = delete;
  BlockDevices(BlockDevices &&) = delete;
  BlockDevices &operator=(BlockDevices &&) = delete;
  virtual ~BlockDevices() = default;

  // What the path is: PathKind::missing when it does not exist (ENOENT, ENOTDIR);
  // Errc::device naming the path and the OS reason when it cannot be looked at.
  [[nodiscard]] virtual Result<PathKind> path_kind(const std::string &path) = 0;
  // Size in bytes of a block device or regular file. Errc::device when it cannot be opened.
  [[nodiscard]] virtual Result<std::uint64_t> size_bytes(const std::string &path) = 0;
  // True when libcryptsetup finds a LUKS1 or LUKS2 header.
  [[nodiscard]] virtual Result<bool> has_luks_header(const std::string &path) = 0;
  // "/dev/NAME" for "MAJOR:MINOR" when sysfs knows it, else the argument unchanged.
  [[nodiscard]] virtual std::string resolve(std::string_view major_minor) = 0;
  // True for a regular file (which needs a loop device before device-mapper can use it).
  [[nodiscard]] virtual bool is_regular_file(const std::string &path) = 0;
  // Attaches a free loop device to a regular file, as cryptsetup does (autoclear).
  [[nodiscard]] virtual Result<LoopDevice> attach_loop(const std::string &file, bool read_only) = 0;
  // Who holds a block device: a device-mapper mapping or another holder (sysfs holders/), or
  // a mounted filesystem or a program that opened it exclusively (O_EXCL gives EBUSY).
  // nullopt when nothing does, or the path is not a block device.
  [[nodiscard]] virtual std::optional<std::string> user_of(const std::string &path) = 0;
  // The file behind /dev/loopN, when the device is a loop device with one.
  [[nodiscard]] virtual std::optional<std::string> loop_backing_file(const std::string &device) = 0;
  // The write geometry of a block device, named by path or as "MAJOR:MINOR"; nullopt when
  // it is not a block device or sysfs does not know it.
  [[nodiscard]] virtual std::optional<WriteGeometry> write_geometry(const std::string &device) = 0;
};

[[nodiscard]] std::unique_ptr<BlockDevices> make_system_block_devices();

// The write geometry of block device MAJOR:MINOR under `sysfs` (normally /sys), read from
// <sysfs>/dev/block/MAJOR:MINOR: its queue/ (a partition's, which has a start file, is its
// disk's, one directory up) and a partition's start. `page_size` is the bounce page
// segment_bytes counts in. nullopt when there is no physical_block_size to read.
[[nodiscard]] std::optional<WriteGeometry> read_write_geometry(const std::filesystem::path &sysfs,
                                                               std::uint32_t major,
                                                               std::uint32_t minor,
                                                               std::uint64_t page_size);

// The holders of block device MAJOR:MINOR under `sysfs` (normally /sys): one entry per
// <sysfs>/dev/block/MAJOR:MINOR/holders/<dev>, "device-mapper mapping NAME (dm-N)" where the
// holder is a mapping (its dm/name), else the holder's name (md0, ...). Sorted; empty when
// there are none or sysfs does not know the device.
[[nodiscard]] std::vector<std::string> block_device_holders(const std::filesystem::path &sysfs,
                                                            std::uint32_t major,
                                                            std::uint32_t minor);

}  // namespace lbscrypt
