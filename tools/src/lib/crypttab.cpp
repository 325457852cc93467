// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/crypttab.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include <filesystem>

#include "lbscrypt/cipher.hpp"
#include "lbscrypt/gating.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/sealed.hpp"
#include "lbscrypt/table.hpp"
#include "reencrypt/files.hpp"
#include "text_fields.hpp"

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

struct TimeUnit {
  std::string_view word;
  std::uint64_t usec;
};

constexpr std::uint64_t kUsecPerSec = 1000000;
constexpr std::uint64_t kUsecPerMinute = 60 * kUsecPerSec;
constexpr std::uint64_t kUsecPerHour = 60 * kUsecPerMinute;
constexpr std::uint64_t kUsecPerDay = 24 * kUsecPerHour;
// systemd's month and year: 30.44 and 365.25 days.
constexpr std::uint64_t kUsecPerMonth = 2629800 * kUsecPerSec;
constexpr std::uint64_t kUsecPerYear = 31557600 * kUsecPerSec;

constexpr TimeUnit kTimeUnits[] = {
    {"usec", 1},
    {"us", 1},
    {"\u00b5s", 1},  // micro sign
    {"\u03bcs", 1},  // Greek mu
    {"msec", 1000},
    {"ms", 1000},
    {"seconds", kUsecPerSec},
    {"second", kUsecPerSec},
    {"sec", kUsecPerSec},
    {"s", kUsecPerSec},
    {"minutes", kUsecPerMinute},
    {"minute", kUsecPerMinute},
    {"min", kUsecPerMinute},
    {"m", kUsecPerMinute},
    {"hours", kUsecPerHour},
    {"hour", kUsecPerHour},
    {"hr", kUsecPerHour},
    {"h", kUsecPerHour},
    {"days", kUsecPerDay},
    {"day", kUsecPerDay},
    {"d", kUsecPerDay},
    {"weeks", 7 * kUsecPerDay},
    {"week", 7 * kUsecPerDay},
    {"w", 7 * kUsecPerDay},
    {"months", kUsecPerMonth},
    {"month", kUsecPerMonth},
    {"M", kUsecPerMonth},
    {"years", kUsecPerYear},
    {"year", kUsecPerYear},
    {"y", kUsecPerYear},
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_blank(char c) { return c == ' ' || c == '\t'; }

// One term's microseconds: `whole`.`fraction` (its digits as written) times `unit`; nullopt
// when it passes 2^64 - 2 (kTimeInfinity is "infinity").
std::optional<std::uint64_t> time_term(std::uint64_t whole, std::string_view fraction,
                                       std::uint64_t unit) {
  constexpr std::uint64_t kMax = kTimeInfinity - 1;
  if (whole != 0 && unit > kMax / whole) {
    return std::nullopt;
  }
  std::uint64_t total = whole * unit;
  // The fraction, digit by digit: unit / 10, unit / 100, ... (below a microsecond: dropped).
  std::uint64_t place = unit;
  for (const char digit : fraction) {
    place /= 10;
    const auto add = static_cast<std::uint64_t>(digit - '0') * place;
    if (add > kMax - total) {
      return std::nullopt;
    }
    total += add;
  }
  return total;
}

}  // namespace

Result<std::uint64_t> parse_time_span(std::string_view text) {
  const auto refuse = [&] {
    return bad(fmt::format(
        "'{}' is not a time span: give a number and a unit, several summed (30s, 2min, 1h30min, "
        "500ms; us, ms, s, min, h, d, w, M, y), bare seconds (30) or infinity",
        printable(text)));
  };
  std::string_view rest = text;
  while (!rest.empty() && is_blank(rest.front())) {
    rest.remove_prefix(1);
  }
  while (!rest.empty() && is_blank(rest.back())) {
    rest.remove_suffix(1);
  }
  if (rest == "infinity") {
    return kTimeInfinity;
  }
  if (rest.empty()) {
    return refuse();
  }
  std::uint64_t total = 0;
  while (!rest.empty()) {
    std::size_t n = 0;
    while (n < rest.size() && is_digit(rest[n])) {
      ++n;
    }
    const std::string_view whole_digits = rest.substr(0, n);
    std::string_view fraction;
    if (n < rest.size() && rest[n] == '.') {
      std::size_t f = n + 1;
      while (f < rest.size() && is_digit(rest[f])) {
        ++f;
      }
      fraction = rest.substr(n + 1, f - n - 1);
      if (fraction.empty()) {
        return refuse();  // "1." or "1..5s"
      }
      n = f;
    }
    if (whole_digits.empty() && fraction.empty()) {
      return refuse();  // a sign, a unit without a number, "."
    }
    const auto whole =
        whole_digits.empty() ? std::optional<std::uint64_t>(0) : parse_decimal_u64(whole_digits);
    if (!whole) {
      return refuse();
    }
    rest.remove_prefix(n);
    while (!rest.empty() && is_blank(rest.front())) {
      rest.remove_prefix(1);
    }
    std::size_t u = 0;
    while (u < rest.size() && !is_digit(rest[u]) && !is_blank(rest[u]) && rest[u] != '.') {
      ++u;
    }
    const std::string_view word = rest.substr(0, u);
    std::uint64_t unit = kUsecPerSec;  // a bare number: seconds
    if (!word.empty()) {
      const auto *found = std::find_if(std::begin(kTimeUnits), std::end(kTimeUnits),
                                       [&](const TimeUnit &t) { return t.word == word; });
      if (found == std::end(kTimeUnits)) {
        return refuse();
      }
      unit = found->usec;
    }
    rest.remove_prefix(u);
    while (!rest.empty() && is_blank(rest.front())) {
      rest.remove_prefix(1);
    }
    const auto term = time_term(*whole, fraction, unit);
    if (!term || *term > kTimeInfinity - 1 - total) {
      return bad(
          fmt::format("'{}' is too long a time span: give infinity for no limit", printable(text)));
    }
    total += *term;
  }
  return total;
}

namespace {

// A time span option's value, its error naming the option.
Result<std::uint64_t> option_time(std::string_view option, std::string_view text) {
  auto span = parse_time_span(text);
  if (!span) {
    return bad(fmt::format("{}={}: {}", option, printable(text), span.error().message));
  }
  return span;
}

}  // namespace

std::optional<bool> parse_boolean(std::string_view text) {
  constexpr std::string_view kTrue[] = {"1", "yes", "y", "true", "t", "on"};
  constexpr std::string_view kFalse[] = {"0", "no", "n", "false", "f", "off"};
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  if (std::find(std::begin(kTrue), std::end(kTrue), lower) != std::end(kTrue)) {
    return true;
  }
  if (std::find(std::begin(kFalse), std::end(kFalse), lower) != std::end(kFalse)) {
    return false;
  }
  return std::nullopt;
}

namespace {

// systemd's booleans (parse_boolean), the error naming the option.
Result<bool> option_bool(std::string_view option, std::string_view text) {
  if (const auto value = parse_boolean(text)) {
    return *value;
  }
  return bad(fmt::format("{}={} is not a boolean: give yes or no (1, true, on; 0, false, off)",
                         option, printable(text)));
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
         auto span = option_time("timeout", value);
         if (!span) {
           return span.error();
         }
         v.timeout_us = *span == kTimeInfinity ? 0 : *span;  // both: no limit
         return Ok{};
       }},
      {"x-systemd.device-timeout", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         return store(option_time("x-systemd.device-timeout", value), v.device_timeout_us);
       }},
      {"_netdev", false, flag_into(&VolumeOptions::netdev, true)},
      {"headless", false, flag_into(&VolumeOptions::headless, true)},
      {"headless", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         return store(option_bool("headless", value), v.headless);
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
      {"tpm2-device", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         const bool device = value.starts_with("/dev/") &&
                             check_table_word("tpm2-device=", value) &&
                             std::filesystem::path(value).lexically_normal().string() == value;
         if (value != "auto" && !device) {
           return bad(fmt::format(
               "tpm2-device={} is not a TPM2: give auto (the TPM systemd-creds finds) or its "
               "device, /dev/tpmrm0",
               printable(value)));
         }
         v.tpm2_device = std::string(value);
         return Ok{};
       }},
      {"x-lbscrypt.sealed", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         if (value != "key" && value != "passphrase") {
           return bad(fmt::format(
               "x-lbscrypt.sealed={}: give key (the sealed secret is the key itself, the "
               "default) or passphrase (it is hashed with hash=, and asked for when the TPM "
               "refuses)",
               printable(value)));
         }
         v.sealed_passphrase = value == "passphrase";
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
      // systemd's other name for discard
      {"allow-discards", false,
       [](std::string_view, VolumeOptions &v) -> Result<void> {
         v.mapping.flags.allow_discards = true;
         return Ok{};
       }},
      {"swap", false, flag_into(&VolumeOptions::swap, true)},
      {"tmp", false,
       [](std::string_view, VolumeOptions &v) -> Result<void> {
         v.tmp_fstype = kDefaultTmpFilesystem;
         return Ok{};
       }},
      {"tmp", true,
       [](std::string_view value, VolumeOptions &v) -> Result<void> {
         const bool word = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' ||
                  c == '_' || c == '-' || c == '+';
         });
         if (!word) {
           return bad(fmt::format(
               "tmp={} is not a filesystem type: give one mkfs.TYPE makes (tmp=xfs), or tmp "
               "alone for {}",
               printable(value), kDefaultTmpFilesystem));
         }
         v.tmp_fstype = std::string(value);
         return Ok{};
       }},
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

// Why lbscrypt does not take an option systemd-cryptsetup takes (systemd 252, and a few of
// later versions), or nullopt for a name systemd does not know either.
std::optional<std::string_view> systemd_only_option(std::string_view name) {
  struct Refusal {
    std::string_view name;
    std::string_view why;
  };
  constexpr std::string_view kLuksHeader =
      "it reads a LUKS header, and a plain volume has none; list a LUKS volume in "
      "/etc/crypttab";
  constexpr std::string_view kTcrypt =
      "it is for TrueCrypt and VeraCrypt volumes; list one in /etc/crypttab";
  constexpr std::string_view kToken =
      "a key from a token (PKCS#11, FIDO2) is enrolled in a LUKS2 header, and a plain "
      "volume has none; give a key file, a key sealed to the TPM2 (tpm2-device=) or ask for a "
      "passphrase";
  constexpr std::string_view kPcrPolicy =
      "a sealed key's PCR policy is chosen when it is sealed (lbscrypt seal --tpm2-pcrs=), "
      "not on the line; give tpm2-device=auto alone";
  constexpr std::string_view kSignedPolicy =
      "signed PCR policies are not supported for sealed plain keys: seal with lbscrypt seal "
      "--tpm2-pcrs= and give tpm2-device=auto";
  constexpr Refusal kRefusals[] = {
      {"verify", "plain mode asks once; check= catches a mistyped passphrase and asks again"},
      {"password-echo",
       "the passphrase is asked with systemd-ask-password's default (no echo); drop it"},
      {"try-empty-password",
       "plain mode opens with any passphrase, an empty one too: the volume would open as "
       "garbage; give a key file or ask for a passphrase"},
      {"key-slot", kLuksHeader},
      {"keyslot", kLuksHeader},
      {"header", kLuksHeader},
      {"token-timeout", kToken},
      {"pkcs11-uri", kToken},
      {"fido2-device", kToken},
      {"fido2-cid", kToken},
      {"fido2-rp", kToken},
      {"tpm2-pcrs", kPcrPolicy},
      {"tpm2-signature", kSignedPolicy},
      {"tpm2-pin",
       "systemd-creds seals without a PIN (252 has none): lbscrypt has no TPM2 PIN; seal a "
       "passphrase (x-lbscrypt.sealed=passphrase) to have one asked for when the TPM refuses"},
      {"tpm2-public-key", kSignedPolicy},
      {"tpm2-public-key-pcrs", kSignedPolicy},
      {"tpm2-pcrlock", kSignedPolicy},
      {"tpm2-measure-pcr", "lbscrypt measures nothing into the TPM2 when a volume opens"},
      {"tpm2-measure-bank", "lbscrypt measures nothing into the TPM2 when a volume opens"},
      {"tcrypt-hidden", kTcrypt},
      {"tcrypt-system", kTcrypt},
      {"tcrypt-veracrypt", kTcrypt},
      {"tcrypt-keyfile", kTcrypt},
      {"veracrypt-pim", kTcrypt},
      {"link-volume-key",
       "it keeps a LUKS volume key in a keyring; list a LUKS volume in /etc/crypttab"},
      {"fixate-volume-key", kLuksHeader},
      {"keyfile-erase",
       "lbscrypt never deletes a key file; remove it after the boot if it must go"},
  };
  const auto *found = std::find_if(std::begin(kRefusals), std::end(kRefusals),
                                   [&](const Refusal &r) { return r.name == name; });
  return found == std::end(kRefusals) ? std::nullopt : std::optional(found->why);
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
  if (const auto why = systemd_only_option(name)) {
    return bad(fmt::format("option '{}' is not supported: {}", name, *why));
  }
  if (name == "keyfile-timeout") {
    return bad(
        "keyfile-timeout= (wait for a key on a device, then ask for a passphrase) is not "
        "supported: name the key file or the key device in the third field (the volume waits "
        "for it), or ask for a passphrase with none");
  }
  return bad(fmt::format("unknown option '{}': see lbscrypttab(5) for the options lbscrypt takes",
                         printable(name)));
}

// The bits one AES key of the cipher gets, when the cipher is AES in a mode whose key is the
// cipher's keys alone (xts: two; the IV modes lmk, tcw and elephant add key material of their
// own, so they are left to the kernel); nullopt for other ciphers.
std::optional<std::uint32_t> aes_key_bits(const CipherSpec &spec, std::uint32_t bits,
                                          std::string &mode) {
  if (spec.ivmode == "lmk" || spec.ivmode == "tcw" || spec.ivmode == "elephant") {
    return std::nullopt;
  }
  std::string cipher = spec.cipher;
  mode = spec.chainmode;
  if (spec.capi) {  // capi:xts(aes)-plain64: MODE(aes)
    const auto open = cipher.find('(');
    if (open == std::string::npos || !cipher.ends_with(')')) {
      return std::nullopt;
    }
    mode = cipher.substr(0, open);
    cipher = cipher.substr(open + 1, cipher.size() - open - 2);
  }
  if (cipher != "aes") {
    return std::nullopt;
  }
  const std::uint32_t keys = spec.keycount * (mode == "xts" ? 2U : 1U);
  return bits % keys == 0 ? bits / keys : 0;
}

// The checks that need several options, or the key field: what attach would refuse at boot.
Result<void> check_together(const VolumeOptions &v, bool passphrase,
                            const std::set<std::string, std::less<>> &seen) {
  if (v.swap && v.tmp_fstype) {
    return bad(
        "swap and tmp both format the volume after it opens (mkswap, mkfs): keep the one the "
        "volume is for");
  }
  if (v.sealed() && passphrase) {
    return bad(
        "tpm2-device= unseals the credential the key field names, and the line asks for a "
        "passphrase: give the sealed credential's path (lbscrypt seal writes it) as the key");
  }
  if (seen.contains("x-lbscrypt.sealed") && !v.sealed()) {
    return bad(
        "x-lbscrypt.sealed= says what a sealed credential holds, and the line seals nothing: "
        "add tpm2-device=auto, or drop it");
  }
  if (v.sealed() && (seen.contains("keyfile-offset") || seen.contains("keyfile-size"))) {
    return bad(
        "keyfile-offset= and keyfile-size= are for a key file, and a sealed credential holds "
        "the key alone: drop them (seal the key's bytes alone)");
  }
  if (passphrase && (seen.contains("keyfile-offset") || seen.contains("keyfile-size"))) {
    return bad(
        "keyfile-offset= and keyfile-size= are for a key file, and the line asks for a "
        "passphrase: drop them, or name the key file in the third field");
  }
  if (!passphrase && !v.sealed_passphrase && v.key.hash && *v.key.hash != "plain") {
    return bad(fmt::format(
        "hash={} with a key file has two meanings: systemd-cryptsetup hashes the key file's "
        "bytes with it, the cryptsetup command line ignores it; write hash=plain, or drop "
        "hash=, to use the key file's bytes as the key (both agree on that)",
        printable(*v.key.hash)));
  }
  if (v.key.hash) {
    const auto colon = v.key.hash->find(':');
    if (colon != std::string::npos) {
      const auto bytes = parse_decimal_u32(std::string_view(*v.key.hash).substr(colon + 1));
      const std::uint32_t key_bytes = v.key.key_size_bits / 8;
      if (!bytes || *bytes == 0 || *bytes > key_bytes) {
        return bad(fmt::format(
            "hash={}: the part after ':' is how many bytes of the hash make the key (the rest "
            "is zeros); give 1 to {} (size={}), or the hash alone",
            printable(*v.key.hash), key_bytes, v.key.key_size_bits));
      }
    }
  }
  const std::uint64_t unit = v.mapping.sector_size / kSectorBytes;
  if (unit > 1 && v.mapping.offset % unit != 0) {
    return bad(fmt::format(
        "offset={} is not a multiple of sector-size={} ({} sectors of 512 bytes): the data "
        "would not start on a sector; give offset={} or {}",
        v.mapping.offset, v.mapping.sector_size, unit, v.mapping.offset / unit * unit,
        (v.mapping.offset / unit + 1) * unit));
  }
  if (unit > 1 && v.mapping.skip % unit != 0) {
    return bad(fmt::format(
        "skip={} is not a multiple of sector-size={} ({} sectors of 512 bytes): the kernel "
        "refuses such an IV offset",
        v.mapping.skip, v.mapping.sector_size, unit));
  }
  if (const auto spec = parse_cipher_spec(v.mapping.cipher)) {
    std::string mode;
    if (const auto bits = aes_key_bits(*spec, v.key.key_size_bits, mode);
        bits && *bits != 128 && *bits != 192 && *bits != 256) {
      return bad(fmt::format(
          "size={} does not fit cipher={}: {} takes AES keys of 128, 192 or 256 bits{}; give "
          "size={}",
          v.key.key_size_bits, v.mapping.cipher, mode.empty() ? "it" : mode,
          mode == "xts" ? ", two of the same size (size=256 is AES-128, 512 AES-256)" : "",
          (mode == "xts" ? 2 : 1) * spec->keycount * 256U));
    }
  }
  return Ok{};
}

}  // namespace

Result<void> check_key_field(std::string_view key) {
  const bool odd = std::any_of(key.begin(), key.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f || c == '"' || c == '\'' || c == '\\';
  });
  if (odd) {
    return bad(
        fmt::format("key file '{}' holds a quote, a backslash or a control character: rename it",
                    printable(key)));
  }
  if (key.find(':') != std::string_view::npos) {
    return bad(fmt::format(
        "key '{}' is a KEY:DEVICE spec (a key file on another device), which lbscrypt does not "
        "support: copy the key file to the root (or the initramfs), or name the key device "
        "itself, with keyfile-offset= where the key starts on it",
        printable(key)));
  }
  return Ok{};
}

using text::fields;
using text::split;

bool opened_by_initrd(const TabEntry &entry) {
  return entry.volume.initrd_attach && !entry.volume.noauto;
}

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
  if ((passphrase || v.sealed_passphrase) && !seen.contains("hash")) {
    return bad(
        fmt::format("no hash= for a passphrase: crypttab's plain default (ripemd160) is "
                    "not lbscrypt's ({}); name it, e.g. hash={}",
                    kDefaultPlainHash, kDefaultPlainHash));
  }
  if (auto r = check_together(v, passphrase, seen); !r) {
    return r.error();
  }
  v.key.cipher_given = true;
  v.key.key_size_given = true;
  return v;
}

namespace {

// The length of the UTF-8 sequence a lead byte starts (as libblkid counts it, up to 6), 0 for
// a byte that starts none.
std::size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  for (unsigned char bit = 0x80; (lead & bit) != 0 && bit != 0; bit >>= 1U) {
    ++length;
  }
  return length >= 2 && length <= 6 ? length : 0;
}

// The bytes a UTF-8 encoding of `code` takes, as the shortest form.
std::size_t utf8_encoded_length(std::uint32_t code) {
  constexpr std::uint32_t kLimits[] = {0x80, 0x800, 0x10000, 0x200000, 0x4000000};
  std::size_t length = 1;
  for (const std::uint32_t limit : kLimits) {
    if (code < limit) {
      return length;
    }
    ++length;
  }
  return 6;
}

// The length of the valid multi-byte character at the start of `text`, or 0: well formed,
// shortest form, and a character udev keeps (not above U+10FFFF, not a surrogate, not one of
// U+FDD0..U+FDEF, not U+xFFFF).
std::size_t valid_multibyte(std::string_view text) {
  const auto lead = static_cast<unsigned char>(text.front());
  const std::size_t length = utf8_sequence_length(lead);
  if (length < 2 || length > text.size()) {
    return 0;
  }
  std::uint32_t code = lead & (0xffU >> (length + 1));
  for (std::size_t k = 1; k < length; ++k) {
    const auto byte = static_cast<unsigned char>(text[k]);
    if ((byte & 0xc0U) != 0x80U) {
      return 0;
    }
    code = (code << 6U) | (byte & 0x3fU);
  }
  const bool kept = code <= 0x10ffff && (code & 0xfffff800U) != 0xd800 &&
                    !(code >= 0xfdd0 && code <= 0xfdef) && (code & 0xffffU) != 0xffff;
  return utf8_encoded_length(code) == length && kept ? length : 0;
}

// The two quotes systemd strips from around a tag's value (LABEL="Data").
std::string_view unquoted(std::string_view value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

}  // namespace

std::string udev_encode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (const std::size_t length = valid_multibyte(text.substr(i)); length > 1) {
      out += text.substr(i, length);
      i += length;
      continue;
    }
    const bool allowed = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
                         (c >= 'a' && c <= 'z') ||
                         std::string_view("#+-.:=@_").find(c) != std::string_view::npos;
    if (allowed) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
    ++i;
  }
  return out;
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
      const std::string_view id = unquoted(device.substr(tag.size()));
      if (id.empty() || id == "." || id == "..") {
        return bad(fmt::format("device {} names no {}: give {}VALUE", printable(device),
                               tag.substr(0, tag.size() - 1), tag));
      }
      // The name udev gives the link: every byte it does not keep as \xNN.
      return fmt::format("{}{}", dir, udev_encode(id));
    }
  }
  if (device.empty() || device.front() != '/') {
    return bad(
        fmt::format("device '{}' is not an absolute path or UUID=, PARTUUID=, LABEL=, "
                    "PARTLABEL=: give /dev/disk/by-partuuid/... or PARTUUID=...",
                    printable(device)));
  }
  // One spelling per device: systemd simplifies "//", "/./" and a trailing '/' when it names
  // the device's unit, and cannot name one after a path with "/../" (its own generator stops
  // there); the line is refused with the normal form instead.
  std::string normal = std::filesystem::path(device).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') {
    normal.pop_back();
  }
  if (normal != device) {
    return bad(fmt::format("device '{}' is not a normalised path: write {}", printable(device),
                           printable(normal)));
  }
  return std::string(device);
}

Result<void> check_sealed_key_field(std::string_view name, std::string_view key) {
  if (!key.starts_with('/') || key.starts_with("/dev/")) {
    return bad(fmt::format(
        "{}: tpm2-device= unseals the credential file the key field names, and '{}' is {}: "
        "give the file lbscrypt seal wrote (/etc/lbscrypt/{}.cred)",
        name, printable(key), key.starts_with('/') ? "a device" : "not an absolute path", name));
  }
  if (auto id = credential_id(key); !id) {
    return bad(fmt::format("{}: {}", name, id.error().message));
  }
  return Ok{};
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
    auto words = fields(line);
    if (words.empty() || words.front().front() == '#') {
      continue;
    }
    const bool initrd_word =
        words.size() > 3 && std::ranges::count(split(words[3], ','), "x-initrd.attach") > 0;
    const auto refuse = [&](const std::string &why) {
      tab.errors.push_back(bad(fmt::format("{}:{}: {}", path, number, why)));
      tab.refused.push_back({number, initrd_word, std::string(words.front())});
    };
    if (words.size() > 4 && words[4].front() == '#') {
      words.resize(4);  // a trailing comment
    }
    if (words.size() < 2 || words.size() > 4) {
      refuse(fmt::format(
          "{} fields; a line is NAME DEVICE [KEY [OPTIONS]] (options are one field, joined by "
          "commas without blanks; a trailing comment starts with #)",
          words.size()));
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
    // As written, not only the path: tab list prints both, and a tag's path has the byte
    // escaped where the field still holds it.
    if (std::any_of(entry.device.begin(), entry.device.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      refuse(
          fmt::format("device '{}' holds a control character: remove it", printable(entry.device)));
      continue;
    }
    entry.path = std::move(device).value();
    const bool passphrase = is_passphrase_key(entry.key);
    if (!passphrase) {
      if (auto r = check_key_field(entry.key); !r) {
        refuse(fmt::format("{}: {}", entry.name, r.error().message));
        continue;
      }
    }
    if (std::any_of(entry.options.begin(), entry.options.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      refuse(fmt::format("{}: the options hold a control character ({}): remove it", entry.name,
                         printable(entry.options)));
      continue;
    }
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
    if (volume->sealed()) {
      if (auto r = check_sealed_key_field(entry.name, entry.key); !r) {
        refuse(r.error().message);
        continue;
      }
    }
    entry.volume = std::move(volume).value();
    entry.volume.mapping.device = entry.path;
    tab.entries.push_back(std::move(entry));
  }
  return tab;
}

std::string tab_record(const TabEntry &entry) {
  const VolumeOptions &v = entry.volume;
  return fmt::format("{} {} {} {} {} {} {} {}", entry.name, entry.device, entry.path, entry.key,
                     v.mapping.sector_size, v.check.value_or("-"), v.mapping.cipher, entry.options);
}

namespace {

// The name of one option as written: "cipher" for "cipher=aes-xts-plain64".
std::string_view tabw_option_name(std::string_view option) {
  return option.substr(0, option.find('='));
}

std::string tabw_join(const std::vector<std::string> &parts) {
  std::string out;
  for (const auto &part : parts) {
    if (!out.empty()) {
      out += ',';
    }
    out += part;
  }
  return out;
}

Error tabw_file_error(std::string_view what, const std::filesystem::path &file, int err) {
  const Errc code = err == EACCES || err == EPERM ? Errc::permission
                    : err == ENOENT               ? Errc::not_found
                                                  : Errc::device;
  return make_error(code,
                    fmt::format("cannot {} {}: {}: the file is left as it was; fix that and "
                                "run the command again",
                                what, printable(file.string()), std::strerror(err)),
                    err);
}

}  // namespace

std::string edit_volume_options(std::string_view options, std::span<const OptionEdit> edits) {
  std::vector<std::string> parts;
  if (!options.empty()) {
    for (const std::string_view part : split(options, ',')) {
      parts.emplace_back(part);
    }
  }
  for (const OptionEdit &edit : edits) {
    if (!edit.value) {
      std::erase_if(parts, [&](const std::string &p) { return tabw_option_name(p) == edit.name; });
      continue;
    }
    const std::string word = fmt::format("{}={}", edit.name, *edit.value);
    const auto at = std::find_if(parts.begin(), parts.end(), [&](const std::string &p) {
      return tabw_option_name(p) == edit.name;
    });
    if (at == parts.end()) {
      parts.push_back(word);
    } else {
      *at = word;
    }
  }
  return tabw_join(parts);
}

Result<std::string> replace_tab_options(std::string_view text, unsigned line,
                                        std::string_view options) {
  std::size_t begin = 0;
  for (unsigned number = 1; number < line; ++number) {
    const auto end = text.find('\n', begin);
    if (end == std::string_view::npos) {
      begin = std::string_view::npos;
      break;
    }
    begin = end + 1;
  }
  if (line == 0 || begin == std::string_view::npos || begin > text.size()) {
    return bad(fmt::format("lbscrypttab has no line {}: read it again", line));
  }
  std::size_t end = text.find('\n', begin);
  if (end == std::string_view::npos) {
    end = text.size();
  }
  std::string_view whole = text.substr(begin, end - begin);
  if (!whole.empty() && whole.back() == '\r') {
    whole.remove_suffix(1);
  }
  // The fourth field's place in the line, as fields() splits it.
  std::size_t pos = 0;
  for (int field = 0; field < 4; ++field) {
    const auto start = whole.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) {
      return bad(fmt::format("lbscrypttab line {} has no options field: read it again", line));
    }
    auto stop = whole.find_first_of(" \t", start);
    if (stop == std::string_view::npos) {
      stop = whole.size();
    }
    if (field == 3) {
      std::string out(text.substr(0, begin + start));
      out += options;
      out += text.substr(begin + stop);
      return out;
    }
    pos = stop;
  }
  return bad(fmt::format("lbscrypttab line {} has no options field: read it again", line));
}

Result<void> write_lbscrypttab(const std::filesystem::path &path, std::string_view text) {
  struct stat old {};
  if (stat(path.c_str(), &old) != 0) {
    return tabw_file_error("look at", path, errno);
  }
  if (!S_ISREG(old.st_mode)) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} is {}, not a regular file: lbscrypt rewrites only a "
                                  "regular lbscrypttab",
                                  printable(path.string()), detail::file_kind_name(old.st_mode)));
  }
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) {
    dir = ".";
  }
  std::string name = (dir / fmt::format(".{}.XXXXXX", path.filename().string())).string();
  const int raw = mkostemp(name.data(), O_CLOEXEC);
  if (raw < 0) {
    return tabw_file_error("create a temporary file beside", path, errno);
  }
  detail::UnlinkOnFailure temporary{std::filesystem::path(name)};
  const detail::FileDescriptor fd(raw);
  // the owner first: a chown may clear set-id bits that the chmod then puts back
  if (fchown(fd.get(), old.st_uid, old.st_gid) != 0) {
    return tabw_file_error("give the old owner to", temporary.path(), errno);
  }
  if (fchmod(fd.get(), old.st_mode & 07777U) != 0) {
    return tabw_file_error("give the old mode to", temporary.path(), errno);
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  const auto *bytes = reinterpret_cast<const std::uint8_t *>(text.data());
  if (const int err = detail::pwrite_full(fd.get(), {bytes, text.size()}, 0); err != 0) {
    return tabw_file_error("write", temporary.path(), err);
  }
  if (fsync(fd.get()) != 0) {
    return tabw_file_error("write", temporary.path(), errno);
  }
  if (rename(temporary.path().c_str(), path.c_str()) != 0) {
    return tabw_file_error("replace", path, errno);
  }
  temporary.keep();
  if (const int err = detail::fsync_parent_directory(path); err != 0) {
    return tabw_file_error("make durable the directory of", path, err);
  }
  return {};
}

}  // namespace lbscrypt
