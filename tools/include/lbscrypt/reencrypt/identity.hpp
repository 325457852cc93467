// SPDX-License-Identifier: GPL-2.0-only
// The identity of a reencrypt run's device: what the state file records when the run starts,
// and what --resume compares before a byte is written. A path or a device number is no
// identity (a loop device re-attached to another file, a dm name reused by another mapping, a
// renamed node keep them), so the record is what the device is made of, read from sysfs:
// - every device: its exact size in bytes (`size`, 512-byte sectors, times 512);
// - a loop device: the file it reads, as st_dev and st_ino of loop/backing_file, with
//   loop/offset and loop/sizelimit (the file name is kept for messages only: a renamed file is
//   the same file);
// - a disk: its serial, the first of `serial` (virtio), `device/serial` (NVMe, MMC),
//   `device/vpd_pg80` (SCSI's unit serial number page) and the USB device it hangs off
//   (`serial` beside `idVendor`, with the SCSI LUN, so two disks behind one bridge differ);
// - a partition: its number and start, and its disk's identity;
// - a device-mapper device: its uuid (its name when it has none) and the identities of the
//   devices its table is built on (`slaves/`).
// All of it comes from sysfs alone: it works without udev, in an initramfs, and against a
// fake tree in the unit tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

// The file behind a loop device.
struct LoopBacking {
  std::string file;              // loop/backing_file when recorded (messages only)
  DevNumber file_device;         // st_dev of the file
  std::uint64_t inode = 0;       // st_ino of the file
  std::uint64_t offset = 0;      // loop/offset, bytes
  std::uint64_t size_limit = 0;  // loop/sizelimit, bytes; 0: up to the file's end
  bool operator==(const LoopBacking &) const = default;  // the file name too (as recorded)
};

struct DeviceFingerprint {
  std::uint64_t size_bytes = 0;
  std::optional<LoopBacking> loop;
  std::optional<std::string> serial;  // "virtio:...", "device:...", "vpd80:...", "usb:..."
  std::optional<std::string> dm_uuid;
  std::optional<std::string> dm_name;            // a device-mapper device without a uuid
  std::optional<std::uint32_t> partition;        // a partition's number
  std::optional<std::uint64_t> partition_start;  // its first 512-byte sector on the disk
  // What it is built on: a partition's disk, a device-mapper device's slaves (in the order
  // fingerprint_to_json sorts them).
  std::vector<DeviceFingerprint> under;
  // As recorded (fingerprint_difference is the comparison that matters for a device).
  bool operator==(const DeviceFingerprint &) const = default;
};

// Reads the identity of block device MAJOR:MINOR under `sysfs` (normally /sys). Errc::device
// when sysfs does not know the device or has no size for it, or a loop device's file cannot be
// looked at (deleted, or not reachable from here): such a device cannot be found again.
[[nodiscard]] Result<DeviceFingerprint> read_device_fingerprint(const std::filesystem::path &sysfs,
                                                                DevNumber device);

// Whether the identity names one device only: a loop device's file, a serial or a dm uuid,
// its own or one it is built on. A device with none (a disk without a serial) has its size
// alone, which another device may share; such a run is bound to its path and number too.
[[nodiscard]] bool fingerprint_distinguishes(const DeviceFingerprint &fingerprint);

// What differs between the run's identity and a device's, as one phrase with the device as
// its subject ("now reads another file (...)"), and what to do ("attach the run's file and
// resume"); nullopt when they match.
struct FingerprintDifference {
  std::string what;
  std::string hint;
};
[[nodiscard]] std::optional<FingerprintDifference> fingerprint_difference(
    const DeviceFingerprint &run, const DeviceFingerprint &now);

// One line for people: "a loop device over /a.img (inode 99 on 8:1)", "a disk with serial X".
[[nodiscard]] std::string describe_fingerprint(const DeviceFingerprint &fingerprint);

// Every block device under `sysfs` whose identity is `fingerprint`, as "/dev/NAME" (NAME its
// directory's name under sysfs, "!" read as "/"), sorted.
[[nodiscard]] std::vector<std::string> find_devices_by_fingerprint(
    const std::filesystem::path &sysfs, const DeviceFingerprint &fingerprint);

// The JSON text of an identity (an object; absent fields left out; `under` sorted by its
// text), and back. Strict: an unknown or missing key, a wrong type, a device number that is
// not MAJOR:MINOR are Errc::invalid_argument, the message naming the field under `field`.
[[nodiscard]] std::string fingerprint_to_json(const DeviceFingerprint &fingerprint);
[[nodiscard]] Result<DeviceFingerprint> fingerprint_from_json(std::string_view text,
                                                              std::string_view field);

// The run's device now, for --resume: `path` is the path the state file records, `number`
// what it is now (nullopt: nothing there, or no block device). When the device at the path
// has the run's identity, the path; otherwise, when the identity names one device and exactly
// one device has it (the run's file attached under another loop number, a disk renamed), that
// device; otherwise Errc::refused in one line naming what differs (or that no device is the
// run's) and what to do. Nothing is written either way.
[[nodiscard]] Result<std::string> bind_run_device(const std::filesystem::path &sysfs,
                                                  const std::string &path,
                                                  std::optional<DevNumber> number,
                                                  const DeviceFingerprint &run);

}  // namespace lbscrypt
