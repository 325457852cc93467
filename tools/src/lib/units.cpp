// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/units.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <fstream>
#include <system_error>

namespace lbscrypt {

namespace {

// systemd takes '%' as a specifier's start: "%%" is one '%'.
std::string specifier_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    out += c;
    if (c == '%') {
      out += '%';
    }
  }
  return out;
}

// One argument of an Exec line: single-quoted, with the backslash, quote, specifier and
// variable characters escaped as systemd reads them back.
std::string exec_argument(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '%':
        out += "%%";
        break;
      case '$':
        out += "$$";
        break;
      default:
        out += c;
    }
  }
  return out + "'";
}

// The unit's TimeoutSec: without a limit while a passphrase may be asked for without one; with
// timeout=, each try's prompt time and half a minute for the device and the module.
std::string timeout_sec(const VolumeOptions &v) {
  constexpr std::uint64_t kSlack = 30;
  if (!v.timeout_us || v.tries == 0) {
    return "infinity";
  }
  return std::to_string((*v.timeout_us + 999999) / 1000000 * v.tries + kSlack);
}

std::string volume_unit(const TabEntry &e, const GeneratorSettings &settings) {
  const VolumeOptions &v = e.volume;
  const bool on_dev = e.path.starts_with("/dev/");
  std::string u;
  u += fmt::format("# Made by lbscrypt-generator from {} line {}; edit that line, not this file.\n",
                   settings.source, e.line);
  u += "\n[Unit]\n";
  u += "Description=lbscrypt volume %I\n";
  u += "Documentation=man:lbscrypt(8)\n";
  u += fmt::format("SourcePath={}\n", specifier_escape(settings.source));
  u += "DefaultDependencies=no\n";
  u += "IgnoreOnIsolate=true\n";
  u += "After=cryptsetup-pre.target systemd-udevd-kernel.socket\n";
  u += fmt::format("Wants=modprobe@{}.service\n", kModuleName);
  u += fmt::format("After=modprobe@{}.service\n", kModuleName);
  u += "Before=blockdev@dev-mapper-%i.target\n";
  u += "Wants=blockdev@dev-mapper-%i.target\n";
  if (!v.initrd_attach) {
    // An x-initrd.attach volume may hold the root: systemd-shutdown detaches it at the end.
    u += "Conflicts=umount.target\n";
  }
  u += "Before=umount.target\n";
  if (!v.nofail) {
    u += "Before=cryptsetup.target\n";
  }
  if (!is_passphrase_key(e.key) && !e.key.starts_with("/dev/")) {
    u += fmt::format("RequiresMountsFor={}\n", specifier_escape(e.key));
  }
  if (on_dev) {
    const std::string device = unit_name_from_path(e.path, ".device");
    u += fmt::format("BindsTo={}\n", device);
    u += fmt::format("After={}\n", device);
  } else {
    u += fmt::format("RequiresMountsFor={}\n", specifier_escape(e.path));
    u += "Wants=modprobe@loop.service\n";
    u += "After=modprobe@loop.service\n";
  }
  u += "\n[Service]\n";
  u += "Type=oneshot\n";
  u += "RemainAfterExit=yes\n";
  u += fmt::format("TimeoutSec={}\n", timeout_sec(v));
  u += "OOMScoreAdjust=500\n";
  u += fmt::format("ExecStart={} attach {} {} {} {}\n", settings.tool, exec_argument(e.name),
                   exec_argument(e.device), exec_argument(e.key), exec_argument(e.options));
  u += fmt::format("ExecStop={} close {}\n", settings.tool, exec_argument(e.name));
  return u;
}

bool plain_unit_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_' || c == '.';
}

}  // namespace

std::string unit_name_escape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '/') {
      out += '-';
    } else if (plain_unit_char(c) && !(i == 0 && c == '.')) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string unit_name_from_path(std::string_view path, std::string_view suffix) {
  std::string simple;  // without repeated, leading and trailing '/'
  for (const char c : path) {
    if (c != '/' || (!simple.empty() && simple.back() != '/')) {
      simple += c;
    }
  }
  if (!simple.empty() && simple.back() == '/') {
    simple.pop_back();
  }
  return (simple.empty() ? std::string("-") : unit_name_escape(simple)) + std::string(suffix);
}

std::string volume_unit_name(std::string_view name) {
  return fmt::format("lbscrypt@{}.service", unit_name_escape(name));
}

GeneratedUnits generate_units(const std::vector<TabEntry> &entries,
                              const GeneratorSettings &settings) {
  GeneratedUnits out;
  for (const TabEntry &e : entries) {
    const std::string unit = volume_unit_name(e.name);
    const std::string mapper = unit_name_from_path("/dev/mapper/" + e.name, ".device");
    out.files.push_back({unit, volume_unit(e, settings)});
    if (!e.volume.noauto) {
      out.links.push_back(
          {fmt::format("cryptsetup.target.{}/{}", e.volume.nofail ? "wants" : "requires", unit),
           "../" + unit});
    }
    // Whatever needs /dev/mapper/NAME (a mount, swap) pulls the volume in and waits for it.
    out.links.push_back({fmt::format("{}.requires/{}", mapper, unit), "../" + unit});
    if (!e.volume.noauto && !e.volume.nofail) {
      // The device appears when the passphrase is in: its job must not time out before.
      out.files.push_back({fmt::format("{}.d/40-device-timeout.conf", mapper),
                           "# Made by lbscrypt-generator: /dev/mapper/" + e.name +
                               " waits for its passphrase.\n\n[Unit]\nJobTimeoutSec=infinity\n"});
    }
  }
  return out;
}

Result<void> write_units(const std::filesystem::path &dir, const GeneratedUnits &units) {
  const auto failed = [](const std::filesystem::path &path, const std::error_code &ec) {
    return make_error(Errc::device, fmt::format("cannot write {}: {}", path.string(), ec.message()),
                      ec.value());
  };
  std::error_code ec;
  for (const UnitFile &file : units.files) {
    const auto path = dir / file.path;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return failed(path.parent_path(), ec);
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << file.text;
    out.close();
    if (!out) {
      return failed(path, std::error_code(errno != 0 ? errno : EIO, std::generic_category()));
    }
  }
  for (const UnitLink &link : units.links) {
    const auto path = dir / link.path;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return failed(path.parent_path(), ec);
    }
    std::filesystem::remove(path, ec);
    std::filesystem::create_symlink(link.target, path, ec);
    if (ec) {
      return failed(path, ec);
    }
  }
  return Ok{};
}

}  // namespace lbscrypt
