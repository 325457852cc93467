// SPDX-License-Identifier: GPL-2.0-only
// The systemd units for /etc/lbscrypttab (the generator's output), ordered as
// systemd-cryptsetup-generator orders crypttab's volumes: one lbscrypt@NAME.service per line,
// no default dependencies, bound to and after its device, before cryptsetup.target and
// /dev/mapper/NAME's users, stopped before umount.target.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

// The module the units load before attaching (modprobe@.service, as loop devices are loaded).
inline constexpr const char *kModuleName = "dm_crypt_lbs";

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
};

struct GeneratorSettings {
  std::string tool;    // the lbscrypt the units run: /usr/sbin/lbscrypt
  std::string source;  // the file the lines come from: /etc/lbscrypttab
};

// systemd's escaping of a string for a unit name (systemd-escape): [A-Za-z0-9:_.] stay, '/'
// becomes '-', every other byte (and a leading '.') \xNN.
[[nodiscard]] std::string unit_name_escape(std::string_view text);
// systemd-escape --path --suffix=SUFFIX: the unit name of a path (dev-vdb.device).
[[nodiscard]] std::string unit_name_from_path(std::string_view path, std::string_view suffix);
// lbscrypt@NAME.service, NAME escaped.
[[nodiscard]] std::string volume_unit_name(std::string_view name);

// The unit files, drop-ins and symlinks for every entry.
[[nodiscard]] GeneratedUnits generate_units(const std::vector<TabEntry> &entries,
                                            const GeneratorSettings &settings);

// Writes them under `dir` (which exists, as systemd hands it over). Errc::device naming the
// path on failure.
[[nodiscard]] Result<void> write_units(const std::filesystem::path &dir,
                                       const GeneratedUnits &units);

}  // namespace lbscrypt
