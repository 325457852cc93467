// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/crypttab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include "lbscrypt/cipher.hpp"
#include "lbscrypt/gating.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

constexpr std::size_t kMaxMappingName = 127;  // DM_NAME_LEN 128 with its NUL

Error bad(std::string message) { return make_error(Errc::invalid_argument, std::move(message)); }

template <class T>
Result<T> option_number(std::string_view option, std::string_view text) {
  const auto value = parse_decimal_u64(text);
  if (!value || *value > std::numeric_limits<T>::max()) {
    return bad(fmt::format("{}={} is not a number: give decimal digits only, 0 to {}", option,
                           printable(text), std::numeric_limits<T>::max()));
  }
  return static_cast<T>(*value);
}

// timeout=: seconds, or a number with s, min or h (crypttab takes systemd time spans; these
// are the ones a passphrase prompt needs).
Result<std::uint32_t> parse_timeout(std::string_view text) {
  constexpr std::pair<std::string_view, std::uint32_t> kUnits[] = {
      {"min", 60}, {"sec", 1}, {"s", 1}, {"m", 60}, {"h", 3600}};
  std::uint32_t scale = 1;
  std::string_view digits = text;
  for (const auto &[suffix, factor] : kUnits) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      digits = text.substr(0, text.size() - suffix.size());
      scale = factor;
      break;
    }
  }
  const auto value = parse_decimal_u32(digits);
  if (!value || *value > std::numeric_limits<std::uint32_t>::max() / scale) {
    return bad(
        fmt::format("timeout={} is not a time: give seconds (30, 30s), minutes (2min) or "
                    "hours (1h)",
                    printable(text)));
  }
  return *value * scale;
}

// Checks sector-size= as open checks --sector-size, against the most any kernel takes
// (v1.30.0 on 64K pages); the running kernel's own bound is applied when the volume opens.
Result<std::uint32_t> parse_sector_size(std::string_view text) {
  const auto value = option_number<std::uint32_t>("sector-size", text);
  if (!value) {
    return value.error();
  }
  const Capabilities widest{kLargeSectorVersion, kBlockLayerMaxSectorSize};
  if (auto r = check_sector_size(*value, widest, MappingType::plain); !r) {
    return bad(fmt::format("sector-size={}: {}", *value, r.error().message));
  }
  return *value;
}

// Stores a parsed value, or passes its error on.
template <class T, class U>
Result<void> store(Result<T> value, U &into) {
  if (!value) {
    return value.error();
  }
  into = std::move(value).value();
  return Ok{};
}

using Setter = std::function<Result<void>(std::string_view value, VolumeOptions &v)>;

struct OptionRule {
  std::string_view name;
  bool takes_value;  // name=VALUE; otherwise a bare word
  Setter set;
};

template <class T>
Setter number_into(std::string_view name, T VolumeOptions::*group, auto field) {
  return [name, group, field](std::string_view value, VolumeOptions &v) -> Result<void> {
    auto &into = v.*group.*field;
    return store(option_number<std::remove_cvref_t<decltype(into)>>(name, value), into);
  };
}

Setter flag_into(bool VolumeOptions::*field, bool value) {
  return [field, value](std::string_view, VolumeOptions &v) -> Result<void> {
    v.*field = value;
    return Ok{};
  };
}

std::vector<OptionRule> option_rules() {
  std::vector<OptionRule> rules{
      {"cipher", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         if (auto r = check_table_word("cipher=", value); !r) {
           return r;
         }
         if (auto spec = parse_cipher_spec(value); !spec) {
           return bad(fmt::format("cipher={}: {}", value, spec.error().message));
         }
         v.mapping.cipher = std::string(value);
         return Ok{};
       }},
      {"size", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         auto bits = option_number<std::uint32_t>("size", value);
         if (!bits) {
           return bits.error();
         }
         if (*bits == 0 || *bits % 8 != 0) {
           return bad(
               fmt::format("size={} is not a key size: give bits, a multiple of 8 "
                           "(256 or 512 for aes-xts-plain64)",
                           *bits));
         }
         v.key.key_size_bits = *bits;
         return Ok{};
       }},
      {"hash", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         if (auto r = check_table_word("hash=", value); !r) {
           return r;
         }
         v.key.hash = std::string(value);
         return Ok{};
       }},
      {"sector-size", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         return store(parse_sector_size(value), v.mapping.sector_size);
       }},
      {"offset", true, number_into("offset", &VolumeOptions::mapping, &MappingRequest::offset)},
      {"skip", true, number_into("skip", &VolumeOptions::mapping, &MappingRequest::skip)},
      {"keyfile-offset", true,
       number_into("keyfile-offset", &VolumeOptions::key, &KeyOptions::keyfile_offset)},
      {"keyfile-size", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         return store(option_number<std::uint32_t>("keyfile-size", value), v.key.keyfile_size);
       }},
      {"tries", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         return store(option_number<std::uint32_t>("tries", value), v.tries);
       }},
      {"timeout", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         auto seconds = parse_timeout(value);
         if (!seconds) {
           return seconds.error();
         }
         v.timeout_us = std::uint64_t{*seconds} * 1000000U;
         return Ok{};
       }},
      {"password-cache", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         if (value == "yes" || value == "no") {
           v.password_cache = value == "yes" ? PasswordCache::yes : PasswordCache::no;
           return Ok{};
         }
         return bad(fmt::format(
             "password-cache={}: give yes (take a kept passphrase even without check=) or no "
             "(never keep or take one); read-only cannot be had, systemd-ask-password keeps "
             "every answer",
             printable(value)));
       }},
      {"check", false,
       [](std::string_view, VolumeOptions &v) -> Result<void> {
         v.check = kDefaultCheck;
         return Ok{};
       }},
      {"check", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         if (value.empty() || value.find_first_of(" \t\n") != std::string_view::npos ||
             (value.find('/') != std::string_view::npos && value.front() != '/')) {
           return bad(
               fmt::format("check={} is not a check: give a program of {} (blkid, ext2, "
                           "...) or an absolute path",
                           printable(value), kCheckDir));
         }
         v.check = std::string(value);
         return Ok{};
       }},
      {"checkargs", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         v.check_args = std::string(value);
         return Ok{};
       }},
      {"readonly", false, flag_into(&VolumeOptions::read_only, true)},
      {"read-only", false, flag_into(&VolumeOptions::read_only, true)},
      {"noauto", false, flag_into(&VolumeOptions::noauto, true)},
      {"auto", false, flag_into(&VolumeOptions::noauto, false)},
      {"nofail", false, flag_into(&VolumeOptions::nofail, true)},
      {"fail", false, flag_into(&VolumeOptions::nofail, false)},
      {"x-initrd.attach", false, flag_into(&VolumeOptions::initrd_attach, true)},
      {"plain", false, [](std::string_view, VolumeOptions &) -> Result<void> { return Ok{}; }},
  };
  for (const FlagWord &flag : kFlagWords) {
    if (!flag.crypttab.empty()) {
      rules.push_back({flag.crypttab, false,
                       [member = flag.member](std::string_view, VolumeOptions &v) -> Result<void> {
                         v.mapping.flags.*member = true;
                         return Ok{};
                       }});
    }
  }
  return rules;
}

// crypttab types and options lbscrypt leaves to cryptsetup, with what to do instead.
Error foreign_option(std::string_view name) {
  constexpr std::string_view kOtherTypes[] = {"luks", "tcrypt", "bitlk", "fvault2", "loopaes"};
  if (std::find(std::begin(kOtherTypes), std::end(kOtherTypes), name) != std::end(kOtherTypes)) {
    return bad(
        fmt::format("option '{}': lbscrypttab opens plain volumes only; list a {} volume "
                    "in /etc/crypttab",
                    name, name));
  }
  return bad(fmt::format("unknown option '{}': see lbscrypttab(5) for the options lbscrypt takes",
                         printable(name)));
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto end = text.find(separator);
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) {
      return parts;
    }
    text.remove_prefix(end + 1);
  }
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t pos = 0;
  while (true) {
    const auto begin = line.find_first_not_of(" \t", pos);
    if (begin == std::string_view::npos) {
      return words;
    }
    const auto end = line.find_first_of(" \t", begin);
    words.push_back(line.substr(begin, end - begin));
    if (end == std::string_view::npos) {
      return words;
    }
    pos = end;
  }
}

}  // namespace

bool is_passphrase_key(std::string_view key_field) {
  return key_field.empty() || key_field == "none" || key_field == "-";
}

Result<VolumeOptions> parse_volume_options(std::string_view options, bool passphrase) {
  static const std::vector<OptionRule> rules = option_rules();
  VolumeOptions v;
  v.key.hash.reset();
  std::set<std::string, std::less<>> seen;
  if (!options.empty()) {
    for (const std::string_view option : split(options, ',')) {
      if (option.empty()) {
        return bad("an empty option (two commas, or one at an end): remove it");
      }
      const auto equals = option.find('=');
      const std::string_view name = option.substr(0, equals);
      const bool has_value = equals != std::string_view::npos;
      const std::string_view value = has_value ? option.substr(equals + 1) : std::string_view();
      const auto rule = std::find_if(rules.begin(), rules.end(), [&](const OptionRule &r) {
        return r.name == name && r.takes_value == has_value;
      });
      if (rule == rules.end()) {
        const bool known = std::any_of(rules.begin(), rules.end(),
                                       [&](const OptionRule &r) { return r.name == name; });
        if (!known) {
          return foreign_option(name);
        }
        return bad(has_value
                       ? fmt::format("option '{}' takes no value: write {} alone", name, name)
                       : fmt::format("option '{}' needs a value: write {}=VALUE", name, name));
      }
      if (!seen.emplace(name).second) {
        return bad(fmt::format("option '{}' is given twice: keep one", name));
      }
      if (auto r = rule->set(value, v); !r) {
        return r.error();
      }
    }
  }
  if (!seen.contains("cipher")) {
    return bad(
        fmt::format("no cipher=: crypttab's plain default (aes-cbc-essiv:sha256) is not "
                    "lbscrypt's ({}); name the volume's cipher, e.g. cipher={}",
                    kDefaultCipher, kDefaultCipher));
  }
  if (!seen.contains("size")) {
    return bad(
        "no size=: name the key size in bits, e.g. size=256 (crypttab's plain default "
        "differs from lbscrypt's)");
  }
  if (passphrase && !seen.contains("hash")) {
    return bad(
        fmt::format("no hash= for a passphrase: crypttab's plain default (ripemd160) is "
                    "not lbscrypt's ({}); name it, e.g. hash={}",
                    kDefaultPlainHash, kDefaultPlainHash));
  }
  v.key.cipher_given = true;
  v.key.key_size_given = true;
  return v;
}

Result<std::string> volume_device_path(std::string_view device) {
  constexpr std::pair<std::string_view, std::string_view> kTags[] = {
      {"UUID=", "/dev/disk/by-uuid/"},
      {"PARTUUID=", "/dev/disk/by-partuuid/"},
      {"LABEL=", "/dev/disk/by-label/"},
      {"PARTLABEL=", "/dev/disk/by-partlabel/"},
  };
  for (const auto &[tag, dir] : kTags) {
    if (device.starts_with(tag)) {
      const std::string_view id = device.substr(tag.size());
      if (id.empty() || id.find('/') != std::string_view::npos) {
        return bad(fmt::format("device {} names no {}: give {}VALUE without '/'", printable(device),
                               tag.substr(0, tag.size() - 1), tag));
      }
      return fmt::format("{}{}", dir, id);
    }
  }
  if (device.empty() || device.front() != '/') {
    return bad(
        fmt::format("device '{}' is not an absolute path or UUID=, PARTUUID=, LABEL=, "
                    "PARTLABEL=: give /dev/disk/by-partuuid/... or PARTUUID=...",
                    printable(device)));
  }
  return std::string(device);
}

Result<void> check_mapping_name(std::string_view name) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7f;
  });
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      control || name.size() > kMaxMappingName) {
    return bad(
        fmt::format("'{}' is not a mapping name: give 1 to {} bytes without '/', spaces "
                    "or control characters",
                    printable(name), kMaxMappingName));
  }
  return Ok{};
}

Lbscrypttab parse_lbscrypttab(std::string_view text, std::string_view path) {
  Lbscrypttab tab;
  std::set<std::string, std::less<>> names;
  unsigned number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    const auto words = fields(line);
    if (words.empty() || words.front().front() == '#') {
      continue;
    }
    const auto refuse = [&](const std::string &why) {
      tab.errors.push_back(bad(fmt::format("{}:{}: {}", path, number, why)));
    };
    if (words.size() < 2 || words.size() > 4) {
      refuse(fmt::format("{} fields; a line is NAME DEVICE [KEY [OPTIONS]]", words.size()));
      continue;
    }
    TabEntry entry;
    entry.line = number;
    entry.name = std::string(words[0]);
    entry.device = std::string(words[1]);
    entry.key = words.size() > 2 ? std::string(words[2]) : "none";
    entry.options = words.size() > 3 ? std::string(words[3]) : "";
    if (auto r = check_mapping_name(entry.name); !r) {
      refuse(r.error().message);
      continue;
    }
    if (!names.emplace(entry.name).second) {
      refuse(fmt::format("{} is listed twice: keep one line per volume", entry.name));
      continue;
    }
    auto device = volume_device_path(entry.device);
    if (!device) {
      refuse(device.error().message);
      continue;
    }
    if (auto r = check_table_word("device", *device); !r) {
      refuse(r.error().message);
      continue;
    }
    entry.path = std::move(device).value();
    const bool passphrase = is_passphrase_key(entry.key);
    if (!passphrase && entry.key.front() != '/') {
      refuse(
          fmt::format("key file '{}' is not an absolute path: give /etc/keys/... or none to "
                      "ask for a passphrase",
                      printable(entry.key)));
      continue;
    }
    auto volume = parse_volume_options(entry.options, passphrase);
    if (!volume) {
      refuse(fmt::format("{}: {}", entry.name, volume.error().message));
      continue;
    }
    entry.volume = std::move(volume).value();
    entry.volume.mapping.device = entry.path;
    tab.entries.push_back(std::move(entry));
  }
  return tab;
}

}  // namespace lbscrypt
