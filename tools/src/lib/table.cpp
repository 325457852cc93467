// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

// Option words with a value, named once for the parser and the formatter (the flags are
// kFlagWords).
constexpr std::string_view kIntegrity = "integrity:";
constexpr std::string_view kSectorSize = "sector_size:";
constexpr std::string_view kIntegrityKeySize = "integrity_key_size:";

constexpr std::size_t kRequiredParams = 5;  // cipher key iv_offset device offset

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto begin = text.find_first_not_of(" \t\n", pos);
    if (begin == std::string_view::npos) {
      break;
    }
    const auto end = text.find_first_of(" \t\n", begin);
    words.push_back(text.substr(begin, end - begin));
    pos = end == std::string_view::npos ? text.size() : end;
  }
  return words;
}

Error bad_table(std::string_view what) {
  return make_error(Errc::invalid_argument, fmt::format("invalid crypt table: {}", what));
}

Result<std::uint64_t> parse_field(std::string_view name, std::string_view word) {
  const auto value = parse_decimal_u64(word);
  if (!value) {
    return bad_table(fmt::format("{} '{}' is not an unsigned decimal number", name, word));
  }
  return *value;
}

Result<KeySpec> parse_key(std::string_view word) {
  if (word == "-") {
    return KeySpec{EmptyKey{}};
  }
  if (!word.empty() && word.front() == ':') {
    // :<key_size>:<type>:<description>; the description may itself contain ':'.
    const auto second = word.find(':', 1);
    const auto third = second == std::string_view::npos ? second : word.find(':', second + 1);
    if (third == std::string_view::npos) {
      return bad_table("keyring key must be :<key_size>:<type>:<description>");
    }
    const auto size = parse_decimal_u32(word.substr(1, second - 1));
    KeyringKey key{size.value_or(0), std::string(word.substr(second + 1, third - second - 1)),
                   std::string(word.substr(third + 1))};
    if (!size || key.type.empty() || key.description.empty()) {
      return bad_table("keyring key must be :<key_size>:<type>:<description>");
    }
    return KeySpec{std::move(key)};
  }
  SecretBuffer bytes;
  if (word.empty() || !from_hex(word, bytes)) {
    return bad_table(
        fmt::format("the key must be an even number of hex digits, '-' or "
                    ":<key_size>:<type>:<description> ({} characters given)",
                    word.size()));
  }
  return KeySpec{std::move(bytes)};
}

Result<void> set_flag(bool &flag, std::string_view word) {
  if (flag) {
    return bad_table(fmt::format("optional parameter '{}' given twice", word));
  }
  flag = true;
  return Ok{};
}

Result<void> parse_option(std::string_view word, CryptOptions &opts) {
  for (const FlagWord &flag : kFlagWords) {
    if (word == flag.table) {
      return set_flag(opts.*flag.member, word);
    }
  }
  if (word.starts_with(kSectorSize)) {
    if (opts.sector_size_arg) {
      return bad_table("optional parameter 'sector_size' given twice");
    }
    opts.sector_size_arg = std::string(word.substr(kSectorSize.size()));
    return Ok{};
  }
  if (word.starts_with(kIntegrityKeySize)) {
    const auto size = parse_decimal_u32(word.substr(kIntegrityKeySize.size()));
    if (!size || opts.integrity_key_size) {
      return bad_table(fmt::format("invalid optional parameter '{}'", word));
    }
    opts.integrity_key_size = *size;
    return Ok{};
  }
  if (word.starts_with(kIntegrity)) {
    const auto rest = word.substr(kIntegrity.size());
    const auto colon = rest.find(':');
    const auto tag = parse_decimal_u32(rest.substr(0, colon));
    if (!tag || colon == std::string_view::npos || colon + 1 == rest.size() || opts.integrity) {
      return bad_table(
          fmt::format("invalid optional parameter '{}' (expected "
                      "integrity:<tag_size>:<type>)",
                      word));
    }
    opts.integrity = IntegrityOption{*tag, std::string(rest.substr(colon + 1))};
    return Ok{};
  }
  return bad_table(fmt::format("unknown optional parameter '{}'", word));
}

Result<CryptTable> parse_words(std::span<const std::string_view> words, std::uint64_t start,
                               std::uint64_t length) {
  if (words.size() < kRequiredParams) {
    return bad_table(
        fmt::format("{} parameters given, at least 5 needed: <cipher> <key> "
                    "<iv_offset> <device> <offset>",
                    words.size()));
  }
  CryptTable table;
  table.start = start;
  table.length = length;
  table.cipher = std::string(words[0]);
  auto key = parse_key(words[1]);
  if (!key) {
    return key.error();
  }
  table.key = std::move(key).value();
  const auto iv_offset = parse_field("iv_offset", words[2]);
  if (!iv_offset) {
    return iv_offset.error();
  }
  table.iv_offset = *iv_offset;
  table.device = std::string(words[3]);
  const auto offset = parse_field("offset", words[4]);
  if (!offset) {
    return offset.error();
  }
  table.offset = *offset;
  if (words.size() == kRequiredParams) {
    return table;
  }
  const auto count = parse_decimal_u32(words[kRequiredParams]);
  const auto given = words.size() - kRequiredParams - 1;
  if (!count || *count != given) {
    return bad_table(
        fmt::format("optional parameter count '{}' does not match the {} "
                    "parameters that follow",
                    words[kRequiredParams], given));
  }
  for (const auto word : words.subspan(kRequiredParams + 1)) {
    const auto parsed = parse_option(word, table.options);
    if (!parsed) {
      return parsed.error();
    }
  }
  return table;
}

void append_key(SecretBuffer &out, const KeySpec &key, KeyDisplay keys) {
  if (const auto *bytes = std::get_if<SecretBuffer>(&key)) {
    if (bytes->empty()) {
      out.append("-");
    } else if (keys == KeyDisplay::show) {
      const SecretBuffer hex = to_hex(*bytes);
      out.append(hex.view());
    } else {
      out.append(std::string(bytes->size() * 2, '0'));
    }
  } else if (const auto *ring = std::get_if<KeyringKey>(&key)) {
    out.append(fmt::format(":{}:{}:{}", ring->key_size, ring->type, ring->description));
  } else {
    out.append("-");
  }
}

}  // namespace

unsigned CryptOptions::count() const {
  unsigned n = 0;
  for (const FlagWord &flag : kFlagWords) {
    n += this->*flag.member ? 1U : 0U;
  }
  n += integrity ? 1U : 0U;
  n += sector_size_arg ? 1U : 0U;
  n += integrity_key_size ? 1U : 0U;
  return n;
}

Result<std::uint32_t> CryptTable::sector_size() const {
  if (!options.sector_size_arg) {
    return kDefaultSectorSize;
  }
  const auto value = parse_decimal_u32(*options.sector_size_arg);
  if (!value) {
    return make_error(Errc::invalid_argument,
                      fmt::format("sector_size '{}' is not an unsigned decimal number",
                                  *options.sector_size_arg));
  }
  return *value;
}

Result<CryptTable> parse_table_params(std::string_view params, std::uint64_t start,
                                      std::uint64_t length) {
  const auto words = split_words(params);
  return parse_words(words, start, length);
}

Result<CryptTable> parse_table_line(std::string_view line, std::string_view target_name) {
  const auto words = split_words(line);
  if (words.size() < 3) {
    return bad_table("a line is <start> <length> crypt <parameters>");
  }
  const auto start = parse_field("start", words[0]);
  if (!start) {
    return start.error();
  }
  const auto length = parse_field("length", words[1]);
  if (!length) {
    return length.error();
  }
  if (words[2] != target_name) {
    return bad_table(fmt::format("target type is '{}', not '{}'", words[2], target_name));
  }
  return parse_words(std::span(words).subspan(3), *start, *length);
}

SecretBuffer format_table_params(const CryptTable &table, KeyDisplay keys) {
  SecretBuffer out;
  out.append(table.cipher);
  out.append(" ");
  append_key(out, table.key, keys);
  out.append(fmt::format(" {} {} {}", table.iv_offset, table.device, table.offset));
  const CryptOptions &o = table.options;
  if (const unsigned n = o.count(); n != 0) {
    out.append(fmt::format(" {}", n));
    const auto append_flags = [&](bool after_sector_size) {
      for (const FlagWord &flag : kFlagWords) {
        if (flag.after_sector_size == after_sector_size && o.*flag.member) {
          out.append(fmt::format(" {}", flag.table));
        }
      }
    };
    append_flags(false);
    if (o.integrity) {
      out.append(fmt::format(" {}{}:{}", kIntegrity, o.integrity->tag_size, o.integrity->auth));
    }
    if (o.sector_size_arg) {
      out.append(fmt::format(" {}{}", kSectorSize, *o.sector_size_arg));
    }
    append_flags(true);
    if (o.integrity_key_size) {
      out.append(fmt::format(" {}{}", kIntegrityKeySize, *o.integrity_key_size));
    }
  }
  return out;
}

SecretBuffer format_table_line(const CryptTable &table, KeyDisplay keys,
                               std::string_view target_name) {
  SecretBuffer out;
  out.append(fmt::format("{} {} {} ", table.start, table.length, target_name));
  const SecretBuffer params = format_table_params(table, keys);
  out.append(params.view());
  return out;
}

namespace {

// `text` with the bytes `escaped` picks written as C escapes (\n, \t, \\, \xNN).
template <typename Pred>
std::string escape_bytes(std::string_view text, Pred escaped) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (!escaped(byte)) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

bool is_control(unsigned char byte) { return byte < 0x20 || byte == 0x7f; }

}  // namespace

std::string printable(std::string_view text) {
  return escape_bytes(
      text, [](unsigned char byte) { return is_control(byte) || byte == '\\' || byte == 0xa0; });
}

std::string one_line(std::string_view text) { return escape_bytes(text, is_control); }

Result<void> check_table_word(std::string_view field, std::string_view word) {
  if (word.empty()) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} is empty: a table line needs a word there", field));
  }
  for (const char c : word) {
    const auto byte = static_cast<unsigned char>(c);
    std::string_view what;
    if (c == ' ' || byte == 0xa0) {
      what = "a space";
    } else if (c == '\n' || c == '\r') {
      what = "a line break";
    } else if (c == '\t' || c == '\v' || c == '\f') {
      what = "whitespace";
    } else if (byte < 0x20 || byte == 0x7f) {
      what = "a control character";
    } else if (c == '\\') {
      what = "a backslash (the kernel's escape)";
    } else {
      continue;
    }
    return make_error(
        Errc::invalid_argument,
        fmt::format("{} '{}' contains {}: a dm table line cannot carry it as one word; use {}",
                    field, printable(word), what,
                    field == "device"
                        ? "a path without whitespace, control characters or backslashes "
                          "(a /dev/disk/by-id/ or by-partuuid link, or the /dev node itself)"
                        : "the value without whitespace, control characters or backslashes"));
  }
  return Ok{};
}

Result<void> check_target_name(std::string_view name) {
  constexpr std::size_t kMaxTargetName = 15;
  const bool valid = !name.empty() && name.size() <= kMaxTargetName &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '_' || c == '-';
                     });
  if (!valid) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--target '{}' is not a device-mapper target name: give 1 to {} "
                                  "letters, digits, '_' or '-' (crypt, or crypt_lbs beside the "
                                  "stock module)",
                                  printable(name), kMaxTargetName));
  }
  return Ok{};
}

std::uint32_t key_size_bytes(const KeySpec &key) {
  if (const auto *bytes = std::get_if<SecretBuffer>(&key)) {
    return static_cast<std::uint32_t>(bytes->size());
  }
  if (const auto *ring = std::get_if<KeyringKey>(&key)) {
    return ring->key_size;
  }
  return 0;
}

}  // namespace lbscrypt
