// SPDX-License-Identifier: GPL-2.0-only
// Which lbscrypttab volumes the initramfs opens: the lines with x-initrd.attach, and, as
// Debian's cryptroot finds them, the volumes behind /, /usr and the resume device whatever
// their options say. One predicate, shared by `tab list --initrd` (the initramfs hook), the
// generator (whose unit must not stop such a volume at shutdown) and reencrypt (which refuses
// such a volume).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/crypttab.hpp"

namespace lbscrypt {

inline constexpr const char *kFstab = "/etc/fstab";
inline constexpr const char *kMountinfo = "/proc/self/mountinfo";
// initramfs-tools' resume device (RESUME=), written by its resume hook or the administrator.
inline constexpr const char *kResumeConf = "/etc/initramfs-tools/conf.d/resume";
inline constexpr const char *kKernelCmdline = "/proc/cmdline";

// What the search reads. The texts are given (nullopt: the file does not exist), so the
// caller decides where they come from; sysfs and /dev are read where the paths say.
struct BootInputs {
  std::optional<std::string> fstab;        // the / and /usr lines (noauto lines skipped)
  std::optional<std::string> mountinfo;    // the running system's / and /usr
  std::optional<std::string> resume_conf;  // RESUME= (none and auto name no device)
  std::optional<std::string> cmdline;      // resume= and root=
  std::string fstab_path = kFstab;         // the paths, for the reasons given
  std::string resume_conf_path = kResumeConf;
  std::filesystem::path sysfs = "/sys";  // slaves/ and dm/name: what a device is built on
  std::filesystem::path dev = "/dev";    // the links a device path (UUID=...) goes through
};

// One place the boot needs a mapping: `what` is "/", "/usr" or "the resume device"; `source`
// where it was found ("fstab", "mountinfo", "root= on the kernel command line", "resume= on
// the kernel command line", "RESUME= in /etc/initramfs-tools/conf.d/resume").
struct BootUse {
  std::string what;
  std::string source;
  bool operator==(const BootUse &) const = default;
};

struct BootVolumes {
  // By mapping name: every device-mapper device the boot's devices are built on (its own
  // name for /dev/mapper/NAME, and through sysfs slaves/ the mappings under an active one:
  // LVM on an lbscrypt volume counts for the volume too).
  std::map<std::string, std::vector<BootUse>, std::less<>> uses;
};

// The kernel command line's words: split at blanks outside double or single quotes, the
// quotes removed (root="/dev/mapper/a b" is one word).
[[nodiscard]] std::vector<std::string> kernel_command_line_words(std::string_view cmdline);

// The mappings /, /usr and the resume device need, from every source in `inputs`. A source
// that names nothing usable (a device sysfs does not know, RESUME=auto) adds nothing.
[[nodiscard]] BootVolumes find_boot_volumes(const BootInputs &inputs);

// What the boot needs the entry for, "holds / (fstab, mountinfo) and the resume device
// (resume= on the kernel command line)"; nullopt when it needs it for nothing.
[[nodiscard]] std::optional<std::string> boot_use(const TabEntry &entry, const BootVolumes &boot);

// The predicate: the initramfs opens this volume. opened_by_initrd(entry) (x-initrd.attach,
// not noauto), or the boot needs it (whatever its options: without it the machine does not
// boot).
[[nodiscard]] bool opens_in_initrd(const TabEntry &entry, const BootVolumes &boot);

// The note `tab list --initrd` prints for a volume it lists only because the boot needs it:
// "PATH line N (NAME) holds / (fstab): opened in the initramfs without x-initrd.attach".
[[nodiscard]] std::string boot_use_note(const TabEntry &entry, std::string_view tab_path,
                                        std::string_view use);

}  // namespace lbscrypt
