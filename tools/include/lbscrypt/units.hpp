// SPDX-License-Identifier: GPL-2.0-only
// The systemd units for /etc/lbscrypttab (the generator's output), ordered as
// systemd-cryptsetup-generator orders crypttab's volumes: one lbscrypt@NAME.service per line,
// no default dependencies, bound to and after its device, after its key's device (or mount, or
// the random seed), before cryptsetup.target (remote-cryptsetup.target for _netdev) and
// /dev/mapper/NAME's users, stopped before umount.target; all of them in system-lbscrypt.slice,
// a slice without default dependencies, so the shutdown does not stop an x-initrd.attach root
// (nor a volume behind /, /usr or the resume device, which has no Conflicts=umount.target).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

struct UnitFile {
  std::string path;  // relative to the generator's output directory
  std::string text;
};

struct UnitLink {
  std::string path;    // relative to the output directory: cryptsetup.target.requires/U
  std::string target;  // what it points to: ../U
};

struct GeneratedUnits {
  std::vector<UnitFile> files;
  std::vector<UnitLink> links;
  std::vector<Error> errors;  // one per entry given no unit: "SOURCE:LINE: NAME: why"
};

// The slice every lbscrypt@ unit runs in (systemd's default for the template name), written
// with the units: DefaultDependencies=no, so the shutdown never stops it or its units.
inline constexpr const char *kSliceName = "system-lbscrypt.slice";
// The longest unit or drop-in directory name systemd and the filesystem take (NAME_MAX).
inline constexpr std::size_t kMaxUnitName = 255;

// systemd's own formatter, which its generator runs after a swap or tmp volume opens
// (Debian 12's path; merged-/usr systems have it in /usr/lib/systemd as well).
inline constexpr const char *kSystemdMakefs = "/lib/systemd/systemd-makefs";

struct GeneratorSettings {
  std::string tool;                     // the lbscrypt the units run: /usr/sbin/lbscrypt
  std::string source;                   // the file the lines come from: /etc/lbscrypttab
  std::string makefs = kSystemdMakefs;  // what formats a swap or tmp volume
  // The mappings /, /usr and the resume device need (find_boot_volumes): their units, as an
  // x-initrd.attach line's, are not stopped at shutdown (no Conflicts=umount.target).
  BootVolumes boot{};
};

// systemd's escaping of a string for a unit name (systemd-escape): [A-Za-z0-9:_.] stay, '/'
// becomes '-', every other byte (and a leading '.') \xNN.
[[nodiscard]] std::string unit_name_escape(std::string_view text);
// systemd-escape --path --suffix=SUFFIX: the unit name of a path (dev-vdb.device).
[[nodiscard]] std::string unit_name_from_path(std::string_view path, std::string_view suffix);
// lbscrypt@NAME.service, NAME escaped.
[[nodiscard]] std::string volume_unit_name(std::string_view name);

// One argument of an Exec line as systemd reads it back byte for byte: single-quoted, with
// '\\', '\'', control and 8-bit bytes escaped (\xNN), '%' and '$' doubled. Errc::invalid_argument
// for a NUL, which no argument can hold.
[[nodiscard]] Result<std::string> exec_argument(std::string_view text);

// The unit files, drop-ins and symlinks for every entry. An entry whose units systemd could not
// take (a unit name over kMaxUnitName bytes, a path no unit setting can hold) gets none and an
// error; the others are generated all the same.
[[nodiscard]] GeneratedUnits generate_units(const std::vector<TabEntry> &entries,
                                            const GeneratorSettings &settings);

// The kernel command line's word on the generator, modelled on systemd's luks= and rd.luks=:
// lbscrypt=BOOL everywhere, rd.lbscrypt=BOOL only in the initramfs (`in_initrd`), the last one
// given winning; a bare lbscrypt (or rd.lbscrypt) is yes. Words are split at blanks outside
// double or single quotes, the quotes removed (lbscrypt="no").
struct KernelSwitch {
  bool enabled = true;
  std::vector<std::string> warnings;  // a value that is not a boolean: the word is ignored
};
[[nodiscard]] KernelSwitch kernel_command_line_switch(std::string_view cmdline, bool in_initrd);

// Writes them under `dir` (which exists, as systemd hands it over). A failure does not stop the
// rest: every other file and link is written (a link to a unit that could not be written is
// not). One Errc::device error naming the path per failure; none when all was written.
[[nodiscard]] std::vector<Error> write_units(const std::filesystem::path &dir,
                                             const GeneratedUnits &units);

}  // namespace lbscrypt
