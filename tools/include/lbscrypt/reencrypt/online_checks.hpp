// SPDX-License-Identifier: GPL-2.0-only
// What an online run (`lbscrypt reencrypt --active-name NAME`) refuses before NAME is first
// suspended: anything the tool needs while NAME is suspended that lives on NAME would wait for
// NAME forever (the state file and its journal, swap, the key files, lbscrypttab, the program
// and its shared libraries), and processes with NAME or a file on it open with O_DIRECT see
// I/O aligned below the new sector size fail mid-run (refused without --force).
//
// "On NAME" is followed through what the kernel shows under the roots given (normally /proc
// and /sys): a file's mount is the longest mount point of <proc>/self/mountinfo holding its
// path; the mount's source is its block device (<sys>/class/block/<name>, a /dev/mapper name
// through dm/name, else stat), a btrfs mount every device of <sys>/fs/btrfs/<fsid>/devices/,
// an overlay mount each of its layer directories (followed as files). A block device is on
// NAME when it is NAME or is built on it: its disk (a partition), its slaves/, the file behind
// a loop device (loop/backing_file, followed as a file), recursively. tmpfs, ramfs and the
// initramfs's rootfs are memory: never on NAME. A filesystem with no block device to follow
// (NFS, FUSE, 9p, CIFS, ...), a loop device over a deleted file, or a path no mount holds
// cannot be shown to be off NAME: refused (the journal's flushes must reach a disk while NAME
// is suspended; the other files must be readable). A block device sysfs does not describe
// is compared by its number only.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/reencrypt/run.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

// Where something is, seen from NAME.
enum class NamePlacement {
  off_name,  // shown not to be on NAME
  on_name,   // on NAME, or on something built on it
  unknown,   // on something that cannot be followed to its block devices
};

struct NameLocation {
  NamePlacement where = NamePlacement::off_name;
  // on_name: the chain, e.g. "ext4 on loop0, whose backing file /srv/img is on dm-3 (NAME)";
  // unknown: what could not be followed, e.g. "nfs4 server:/export".
  std::string how;
};

// The roots and NAME every lookup works with.
struct NameLookup {
  std::filesystem::path proc = "/proc";
  std::filesystem::path sysfs = "/sys";
  std::string name;       // NAME, for messages
  DevNumber name_device;  // NAME's number
};

// The placement of a path (an absent path: its nearest existing parent directory's).
[[nodiscard]] Result<NameLocation> locate_path(const NameLookup &lookup,
                                               const std::filesystem::path &path);
// The placement of a block device.
[[nodiscard]] NameLocation locate_block_device(const NameLookup &lookup, DevNumber device);

// What the run needs while NAME is suspended.
struct OnlineRunNeeds {
  std::filesystem::path state;                   // the state file (it need not exist yet)
  std::filesystem::path journal;                 // its journal
  std::vector<std::filesystem::path> key_files;  // as given (not "-")
  std::filesystem::path tab;                     // lbscrypttab (checked when it exists)
  std::uint32_t new_sector_size = 0;             // for the O_DIRECT message
  bool check_direct_openers = true;              // false: --abort (it starts nothing)
  bool force = false;                            // O_DIRECT openers: a warning, not a refusal
  int self_pid = 0;                              // this process, never counted
};

// Every refusal above, in this order: the state file, its journal, active swap
// (<proc>/swaps), the key files, lbscrypttab, the program and its libraries
// (<proc>/self/maps), other processes with NAME or a file on it open with O_DIRECT
// (<proc>/PID/fdinfo's flags). Errc::refused, one line naming the thing, how it is on NAME and
// what to do; nothing is written. Returns the warnings (O_DIRECT openers let through by
// --force).
[[nodiscard]] Result<std::vector<std::string>> check_online_run(const NameLookup &lookup,
                                                                const OnlineRunNeeds &needs);

// The processes other than `self_pid` with NAME or a file on NAME open with O_DIRECT (the
// O_DIRECT bit of this build's architecture), as "PID (COMM)", sorted by pid. Processes whose
// fds cannot be read (gone, or another user's without root) are skipped.
[[nodiscard]] std::vector<std::string> direct_openers(const NameLookup &lookup, int self_pid);

// mlockall(MCL_CURRENT | MCL_FUTURE) before the first suspend, so no page of the program, its
// libraries or its buffers has to be read back from NAME (or swap) while NAME is suspended.
// Not tried when RLIMIT_MEMLOCK is finite and CAP_IPC_LOCK is missing (every later allocation
// past the limit would then fail): a warning line then, and when mlockall fails.
[[nodiscard]] std::optional<std::string> lock_memory_for_online();

// An online run's start or resume (--abort: no O_DIRECT check, it starts nothing): the
// refusals of check_online_run for `request` over NAME (`name`, `name_device`), then
// `lock_memory` when given. Returns the warnings, one line each.
[[nodiscard]] Result<std::vector<std::string>> prepare_online_run(
    const ReencryptRequest &request, const std::string &name, DevNumber name_device,
    std::uint32_t new_sector_size, const std::function<std::optional<std::string>()> &lock_memory);

}  // namespace lbscrypt
