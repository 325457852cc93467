// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <fstream>
#include <optional>
#include <set>
#include <system_error>

#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/sealed.hpp"

namespace lbscrypt {

namespace {

constexpr std::uint64_t kMicro = 1000000;
constexpr std::uint64_t kMilli = 1000;

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

// Whether `text` is valid UTF-8: systemd ignores a unit file line that is not.
bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t more = 0;
    if (lead < 0x80) {
      more = 0;
    } else if (lead >= 0xc2 && lead <= 0xdf) {
      more = 1;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      more = 2;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      more = 3;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= more; ++k) {
      if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xc0U) != 0x80U) {
        return false;
      }
    }
    i += more + 1;
  }
  return true;
}

// A path a unit setting that takes a list of paths (RequiresMountsFor=) can hold as written:
// no blank, quote, backslash or control byte (systemd splits and unquotes those lists), UTF-8.
bool plain_setting_path(std::string_view path) {
  return valid_utf8(path) && std::none_of(path.begin(), path.end(), [](char c) {
           const auto byte = static_cast<unsigned char>(c);
           return byte <= 0x20 || byte == 0x7f || c == '"' || c == '\'' || c == '\\';
         });
}

// A systemd time span for a number of microseconds: 0 and infinity are no limit.
std::string time_span(std::uint64_t us) {
  if (us == 0 || us == kTimeInfinity) {
    return "infinity";
  }
  if (us % kMicro == 0) {
    return fmt::format("{}s", us / kMicro);
  }
  if (us % kMilli == 0) {
    return fmt::format("{}ms", us / kMilli);
  }
  return fmt::format("{}us", us);
}

// Keys read from the kernel's random generators: they wait for the seed, as
// systemd-cryptsetup-generator orders these four (it writes no device dependency for them).
bool random_key(std::string_view key) {
  return key == "/dev/urandom" || key == "/dev/random" || key == "/dev/hw_random" ||
         key == "/dev/hwrng";
}

// systemd has no device unit for /dev/null (udev does not tag it for systemd): a unit that
// required dev-null.device would wait for it and fail at every boot. systemd-cryptsetup-generator
// (252, checked) writes no dependency for it; nor do we.
bool null_key(std::string_view key) { return key == "/dev/null"; }

// A key whose device unit the volume's unit requires: one under /dev, not a random source
// nor /dev/null.
bool key_device_unit(std::string_view key) {
  return !is_passphrase_key(key) && key.starts_with("/dev/") && !random_key(key) && !null_key(key);
}

// The dependencies on the key: its device, its mount, or the random seed; none for a
// passphrase or /dev/null.
std::string key_dependencies(const TabEntry &e) {
  if (is_passphrase_key(e.key) || null_key(e.key)) {
    return "";
  }
  if (random_key(e.key)) {
    return "After=systemd-random-seed.service\n";
  }
  if (key_device_unit(e.key)) {
    const std::string device = unit_name_from_path(e.key, ".device");
    return fmt::format("After={}\nRequires={}\n", device, device);
  }
  return fmt::format("RequiresMountsFor={}\n", specifier_escape(e.key));
}

// Whether systemd unseals the volume's sealed key for its unit (LoadCredentialEncrypted=). Not
// for a sealed passphrase that may be asked for instead: systemd fails the unit before attach
// runs when the TPM refuses, so attach unseals it itself and asks. Nor for a volume the
// initramfs opens: attach finds it open and needs no key, and a PCR extended since must not
// fail its unit.
bool loads_credential(const TabEntry &e, const GeneratorSettings &settings) {
  const VolumeOptions &v = e.volume;
  const bool may_ask = v.sealed_passphrase && !v.headless;
  return v.sealed() && !may_ask && !v.initrd_attach && !opens_in_initrd(e, settings.boot);
}

// The volume's unit; Errc::invalid_argument when an argument holds a NUL.
Result<std::string> volume_unit(const TabEntry &e, const GeneratorSettings &settings) {
  const VolumeOptions &v = e.volume;
  std::array<std::string, 4> args;
  const std::array<const std::string *, 4> fields{&e.name, &e.device, &e.key, &e.options};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    auto arg = exec_argument(*fields.at(i));
    if (!arg) {
      return arg.error();
    }
    args.at(i) = std::move(arg).value();
  }
  auto mapper = exec_argument("/dev/mapper/" + e.name);
  if (!mapper) {
    return mapper.error();
  }
  const std::string &mapper_arg = *mapper;
  const char *target = v.netdev ? "remote-cryptsetup.target" : "cryptsetup.target";
  std::string u;
  u += fmt::format("# Made by lbscrypt-generator from {} line {}; edit that line, not this file.\n",
                   settings.source, e.line);
  u += "\n[Unit]\n";
  u += "Description=lbscrypt volume %I\n";
  u += "Documentation=man:lbscrypttab(5) man:lbscrypt-attach(8)\n";
  u += fmt::format("SourcePath={}\n", specifier_escape(settings.source));
  u += "DefaultDependencies=no\n";
  u += "IgnoreOnIsolate=true\n";
  u += "After=cryptsetup-pre.target systemd-udevd-kernel.socket\n";
  u += fmt::format("Wants=modprobe@{}.service\n", kModuleName);
  u += fmt::format("After=modprobe@{}.service\n", kModuleName);
  u += "Before=blockdev@dev-mapper-%i.target\n";
  u += "Wants=blockdev@dev-mapper-%i.target\n";
  if (v.netdev) {
    u += "After=remote-fs-pre.target\n";
  }
  if (!v.initrd_attach && !opens_in_initrd(e, settings.boot)) {
    // An x-initrd.attach volume may hold the root, and one the boot needs (opens_in_initrd)
    // does: neither is stopped with the other units; systemd-shutdown detaches it at the end.
    u += "Conflicts=umount.target\n";
  }
  u += "Before=umount.target\n";
  if (!v.nofail) {
    u += fmt::format("Before={}\n", target);
  }
  u += key_dependencies(e);
  if (e.path.starts_with("/dev/")) {
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
  // timeout= bounds each prompt (systemd-ask-password's --timeout), never the whole unit: a
  // passphrase may be typed whenever the user comes, and tries= may ask again.
  u += "TimeoutSec=infinity\n";
  // The kernel keyring is shared with the other volumes' units, so a passphrase one asked for
  // can be taken by another (attach decides when: password-cache=).
  u += "KeyringMode=shared\n";
  u += "OOMScoreAdjust=500\n";
  if (loads_credential(e, settings)) {
    // systemd unseals it into the unit's private credentials directory, where attach reads
    // it ($CREDENTIALS_DIRECTORY/ID); the name must be the one sealed into the credential.
    const auto id = credential_id(e.key);
    if (!id) {
      return id.error();
    }
    u += fmt::format("LoadCredentialEncrypted={}:{}\n", *id, specifier_escape(e.key));
  }
  u += fmt::format("ExecStart={} attach {} {} {} {}\n", settings.tool, args[0], args[1], args[2],
                   args[3]);
  u += fmt::format("ExecStop={} detach {}\n", settings.tool, args[0]);
  // As systemd's generator: swap and tmp are made anew at every start, by systemd-makefs.
  if (v.swap) {
    u += fmt::format("ExecStartPost={} swap {}\n", settings.makefs, mapper_arg);
  } else if (v.tmp_fstype) {
    auto type = exec_argument(*v.tmp_fstype);
    if (!type) {
      return type.error();
    }
    u += fmt::format("ExecStartPost={} {} {}\n", settings.makefs, *type, mapper_arg);
  }
  return u;
}

std::string slice_unit() {
  return "# Made by lbscrypt-generator: the slice of the lbscrypt@ volumes. Without default\n"
         "# dependencies the shutdown does not stop it, nor so a volume that holds the root.\n"
         "\n[Unit]\n"
         "Description=lbscrypt volumes\n"
         "Documentation=man:lbscrypt-generate-units(8)\n"
         "DefaultDependencies=no\n";
}

// Why systemd could not take this entry's units, or nullopt.
std::optional<std::string> unwritable(const TabEntry &e) {
  const std::string mapper = unit_name_from_path("/dev/mapper/" + e.name, ".device");
  // The longest names a volume gives: its mapper device's .requires directory, as long as
  // blockdev@dev-mapper-NAME.target.
  std::vector<std::string> names{volume_unit_name(e.name), mapper + ".requires"};
  if (e.path.starts_with("/dev/")) {
    names.push_back(unit_name_from_path(e.path, ".device.d"));
  }
  if (key_device_unit(e.key)) {
    names.push_back(unit_name_from_path(e.key, ".device"));
  }
  const auto longest = std::max_element(
      names.begin(), names.end(), [](const auto &a, const auto &b) { return a.size() < b.size(); });
  if (longest->size() > kMaxUnitName) {
    const bool from_name = longest - names.begin() < 2;
    return fmt::format(
        "the {} is too long for a unit name: {} would be {} bytes, systemd takes at most {} "
        "(each byte other than a letter, digit, ':', '_' or '.' counts 4, as \\xNN); {}",
        from_name ? "name" : "device or key path",
        from_name ? "dev-mapper-NAME.device.requires" : "its .device unit", longest->size(),
        kMaxUnitName,
        from_name ? "give a shorter name" : "name the device by a shorter path (UUID=, LABEL=)");
  }
  if (!e.path.starts_with("/dev/") && !plain_setting_path(e.path)) {
    return "the device path holds a blank, quote, backslash or control byte, or is not UTF-8: "
           "RequiresMountsFor= cannot name it; move the image to a plain path";
  }
  if (e.volume.sealed()) {
    if (const auto bad = check_sealed_key_field(e.name, e.key); !bad) {
      return bad.error().message;
    }
  }
  if (!is_passphrase_key(e.key) && !e.key.starts_with("/dev/") && !plain_setting_path(e.key)) {
    return "the key path holds a blank, quote, backslash or control byte, or is not UTF-8: "
           "RequiresMountsFor= cannot name it; move the key file to a plain path";
  }
  return std::nullopt;
}

bool plain_unit_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_' || c == '.';
}

}  // namespace

Result<std::string> exec_argument(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\0':
        return make_error(Errc::invalid_argument,
                          "a NUL byte cannot be passed in a command's argument: remove it");
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
        if (byte < 0x20 || byte >= 0x7f) {
          out += fmt::format("\\x{:02x}", byte);
        } else {
          out += c;
        }
    }
  }
  return out + "'";
}

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
    const auto refuse = [&](std::string_view why) {
      out.errors.push_back(make_error(Errc::invalid_argument,
                                      fmt::format("{}:{}: {}", settings.source, e.line, why)));
    };
    if (const auto why = unwritable(e)) {
      refuse(*why);
      continue;
    }
    auto text = volume_unit(e, settings);
    if (!text) {
      refuse(text.error().message);
      continue;
    }
    const std::string unit = volume_unit_name(e.name);
    const std::string mapper = unit_name_from_path("/dev/mapper/" + e.name, ".device");
    out.files.push_back({unit, std::move(text).value()});
    if (!e.volume.noauto) {
      out.links.push_back(
          {fmt::format("{}.{}/{}",
                       e.volume.netdev ? "remote-cryptsetup.target" : "cryptsetup.target",
                       e.volume.nofail ? "wants" : "requires", unit),
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
    if (e.volume.device_timeout_us && e.path.starts_with("/dev/")) {
      // x-systemd.device-timeout=: how long the backing device may take to appear.
      out.files.push_back(
          {unit_name_from_path(e.path, ".device.d/50-device-timeout.conf"),
           fmt::format("# Made by lbscrypt-generator from {} line {} "
                       "(x-systemd.device-timeout=).\n\n[Unit]\nJobRunningTimeoutSec={}\n",
                       settings.source, e.line, time_span(*e.volume.device_timeout_us))});
    }
  }
  if (!out.files.empty()) {
    out.files.push_back({kSliceName, slice_unit()});
  }
  return out;
}

KernelSwitch kernel_command_line_switch(std::string_view cmdline, bool in_initrd) {
  KernelSwitch out;
  for (const std::string &word : kernel_command_line_words(cmdline)) {
    std::string_view key = std::string_view(word).substr(0, word.find('='));
    if (key == "rd.lbscrypt" && in_initrd) {
      key = "lbscrypt";
    }
    if (key != "lbscrypt") {
      continue;
    }
    if (word.find('=') == std::string::npos) {
      out.enabled = true;
      continue;
    }
    const auto value = parse_boolean(std::string_view(word).substr(word.find('=') + 1));
    if (!value) {
      out.warnings.push_back(
          fmt::format("the kernel command line's {} is not yes or no: ignored", word));
      continue;
    }
    out.enabled = *value;
  }
  return out;
}

std::vector<Error> write_units(const std::filesystem::path &dir, const GeneratedUnits &units) {
  std::vector<Error> errors;
  const auto failed = [&](const std::filesystem::path &path, const std::error_code &ec) {
    errors.push_back(make_error(
        Errc::device, fmt::format("cannot write {}: {}", path.string(), ec.message()), ec.value()));
  };
  std::set<std::string> missing;  // units not written: no link may point to them
  for (const UnitFile &file : units.files) {
    const auto path = dir / file.path;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      failed(path.parent_path(), ec);
      missing.insert(file.path);
      continue;
    }
    errno = 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << file.text;
    out.close();
    if (!out) {
      failed(path, std::error_code(errno != 0 ? errno : EIO, std::generic_category()));
      missing.insert(file.path);
    }
  }
  for (const UnitLink &link : units.links) {
    const auto path = dir / link.path;
    if (missing.contains(std::filesystem::path(link.target).filename().string())) {
      continue;
    }
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      failed(path.parent_path(), ec);
      continue;
    }
    std::filesystem::remove(path, ec);
    std::filesystem::create_symlink(link.target, path, ec);
    if (ec) {
      failed(path, ec);
    }
  }
  return errors;
}

}  // namespace lbscrypt
