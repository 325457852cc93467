// SPDX-License-Identifier: GPL-2.0-only
#include "output.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "lbscrypt/table.hpp"

namespace lbscrypt::cli {

namespace {

using nlohmann::json;

// The flags set, each by its word in `interface` (&FlagWord::table or &FlagWord::status);
// those without one there are left out.
std::vector<std::string> flag_words(const CryptOptions &o, std::string_view FlagWord::*interface) {
  std::vector<std::string> words;
  for (const FlagWord &flag : kFlagWords) {
    if (o.*flag.member && !(flag.*interface).empty()) {
      words.emplace_back(flag.*interface);
    }
  }
  return words;
}

// The non-secret description of a table, shared by `table --json` and `status --json`.
json describe(const CryptTable &table) {
  const auto sector_size = table.sector_size();
  return json{{"start", table.start},
              {"length", table.length},
              {"cipher", table.cipher},
              {"key_size", key_size_bytes(table.key) * 8},
              {"iv_offset", table.iv_offset},
              {"device", table.device},
              {"offset", table.offset},
              {"sector_size", sector_size ? *sector_size : 0},
              {"flags", flag_words(table.options, &FlagWord::table)}};
}

std::string version_text(const KnownCapabilities &known) {
  if (!known.target_reachable) {
    return "unknown";
  }
  return known.target_loaded ? to_string(known.caps.version) : std::string("not loaded");
}

}  // namespace

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when its first byte starts none.
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;  // the second byte's range, narrowed for the edge cases
  unsigned char high = 0xbf;
  if (lead < 0x80) {
    return 1;
  }
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) {
      return 0;
    }
  }
  return length;
}

}  // namespace

void print_error(std::ostream &err, std::string_view message, std::string_view program) {
  err << program << ": " << one_line(message) << '\n';
}

void write_json_string(std::ostream &out, std::string_view text) {
  out << '"';
  while (!text.empty()) {
    std::size_t run = 0;  // the well-formed UTF-8 at the front
    while (run < text.size()) {
      const std::size_t n = utf8_sequence(text.substr(run));
      if (n == 0) {
        break;
      }
      run += n;
    }
    if (run == 0) {
      // Not UTF-8 (a path is bytes), which nlohmann cannot write: the byte as a lone low
      // surrogate U+DC80..U+DCFF, as Python's "surrogateescape" decodes it, so the bytes can
      // be recovered exactly.
      out << fmt::format("\\udc{:02x}", static_cast<unsigned char>(text.front()));
      text.remove_prefix(1);
      continue;
    }
    // Everything else is nlohmann's: its escapes, without its quotes.
    const std::string quoted = json(std::string(text.substr(0, run))).dump();
    out << std::string_view(quoted).substr(1, quoted.size() - 2);
    text.remove_prefix(run);
  }
  out << '"';
}

void write_json(std::ostream &out, const nlohmann::json &value) {
  if (value.is_string()) {
    write_json_string(out, value.get_ref<const std::string &>());
  } else if (value.is_object()) {
    out << '{';
    bool first = true;
    for (const auto &[key, item] : value.items()) {
      out << (first ? "" : ",");
      first = false;
      write_json_string(out, key);
      out << ':';
      write_json(out, item);
    }
    out << '}';
  } else if (value.is_array()) {
    out << '[';
    bool first = true;
    for (const auto &item : value) {
      out << (first ? "" : ",");
      first = false;
      write_json(out, item);
    }
    out << ']';
  } else {
    out << value.dump();
  }
}

void print_table(std::ostream &out, const CryptTable &table, std::string_view target_type,
                 const KnownCapabilities &known, bool json_output, KeyDisplay keys) {
  const SecretBuffer line = format_table_line(table, keys, target_type);
  if (!json_output) {
    out << line.view() << '\n';
    return;
  }
  json rest = describe(table);
  rest["target"] = target_type;
  rest["target_version"] = version_text(known);
  rest["page_size"] = known.caps.page_size;
  out << "{\"table\":";
  write_json_string(out, line.view());
  std::ostringstream body;
  write_json(body, rest);
  out << ',' << std::string_view(body.str()).substr(1) << '\n';
}

void print_in_tree(std::ostream &out, const InTreeCrypt &in_tree, bool json_output) {
  if (!json_output) {
    out << describe(in_tree) << '\n';
    return;
  }
  const bool has_file =
      in_tree.state == InTreeState::module || in_tree.state == InTreeState::unreadable;
  json j{{"kernel", in_tree.release},
         {"in_tree", to_string(in_tree.state)},
         {"file", has_file ? json(in_tree.file.string()) : json(nullptr)},
         {"target_version", in_tree.version ? json(to_string(*in_tree.version)) : json(nullptr)},
         {"hand_over", enough_to_hand_over(in_tree)},
         {"reason", describe(in_tree)}};
  write_json(out, j);
  out << '\n';
}

void print_check(std::ostream &out, const CheckReport &report, std::string_view target_type,
                 bool json_output) {
  const std::string version = version_text(report.known);
  if (json_output) {
    json j{{"target", target_type},
           {"target_version", report.known.target_loaded ? json(version) : json(nullptr)},
           {"page_size", report.known.caps.page_size},
           {"max_plain_sector_size", report.max_plain},
           {"max_luks_sector_size", report.max_luks}};
    if (report.sector_size) {
      j["sector_size"] = *report.sector_size;
      j["type"] = to_string(report.type);
      j["loads"] = !report.refusal.has_value();
      j["reason"] = report.refusal ? json(report.refusal->message) : json(nullptr);
    }
    write_json(out, j);
    out << '\n';
    return;
  }
  out << fmt::format("{} target:             {}\n", target_type,
                     report.known.target_loaded ? "v" + version : version);
  out << fmt::format("page size:                {}\n", report.known.caps.page_size);
  out << fmt::format("largest plain sector size: {}\n", report.max_plain);
  out << fmt::format("largest LUKS sector size:  {}\n", report.max_luks);
  if (report.sector_size) {
    out << fmt::format("sector size {} ({}):     {}\n", *report.sector_size, to_string(report.type),
                       report.refusal ? "refused: " + report.refusal->message : "loads");
  }
}

void print_status(std::ostream &out, const StatusReport &report, std::string_view path,
                  std::string_view target_type, bool json_output) {
  const CryptTable &t = report.table;
  const std::string version =
      report.target_version ? to_string(*report.target_version) : std::string("unknown");
  const bool in_use = report.device.open_count > 0;
  if (json_output) {
    json j = report.is_crypt ? describe(t) : json::object();
    j["name"] = report.device.name;
    j["uuid"] = report.device.uuid;
    j["type"] = report.type;
    j["dm_device"] = report.device.dm_node();
    j["active"] = true;
    j["in_use"] = in_use;
    j["suspended"] = report.device.suspended;
    j["read_only"] = report.device.read_only;
    if (report.is_crypt) {
      j["device"] = report.device_path;
      j["key_location"] = report.key_location;
      j["loop"] = report.loop_file ? json(*report.loop_file) : json(nullptr);
      j["target"] = target_type;
      j["target_version"] = version;
    }
    write_json(out, j);
    out << '\n';
    return;
  }
  out << fmt::format("{} is active{}.\n", path, in_use ? " and is in use" : "");
  out << fmt::format("  type:    {}\n", report.type);
  if (!report.is_crypt) {
    return;  // as cryptsetup: nothing more for a mapping that is not dm-crypt
  }
  out << fmt::format("  cipher:  {}\n", t.cipher);
  out << fmt::format("  keysize: {} bits\n", report.key_bits);
  out << fmt::format("  key location: {}\n", report.key_location);
  out << fmt::format("  device:  {}\n", report.device_path);
  if (report.loop_file) {
    out << fmt::format("  loop:    {}\n", *report.loop_file);
  }
  out << fmt::format("  sector size:  {}\n", report.sector_size);
  out << fmt::format("  offset:  {} sectors\n", t.offset);
  out << fmt::format("  size:    {} sectors\n", t.length);
  if (t.iv_offset != 0) {
    out << fmt::format("  skipped: {} sectors\n", t.iv_offset);
  }
  out << fmt::format("  mode:    {}{}\n", report.device.read_only ? "readonly" : "read/write",
                     report.device.suspended ? " (suspended)" : "");
  const auto flags = flag_words(t.options, &FlagWord::status);
  if (!flags.empty()) {
    out << fmt::format("  flags:   {} \n", fmt::join(flags, " "));
  }
  out << fmt::format("  dm device: {}\n", report.device.dm_node());
  out << fmt::format("  target:  {} v{}\n", target_type, version);
}

void print_benchmark(std::ostream &out, const BenchmarkReport &report, std::string_view target_type,
                     bool json_output) {
  const Recommendation &rec = report.recommendation;
  const auto rounded = [](double v) { return std::round(v * 100.0) / 100.0; };
  if (json_output) {
    const json driver = report.driver ? json(*report.driver) : json(nullptr);
    for (const auto &r : report.results) {
      write_json(out, json{{"cipher", report.cipher},
                           {"algorithm", report.kernel.algorithm},
                           {"driver", driver},
                           {"key_size", report.key_bits},
                           {"sector_size", r.unit},
                           {"encrypt_mibps", rounded(r.encrypt.mib_per_s())},
                           {"decrypt_mibps", rounded(r.decrypt.mib_per_s())},
                           {"encrypt_requests", r.encrypt.requests},
                           {"decrypt_requests", r.decrypt.requests},
                           {"encrypt_bytes", r.encrypt.bytes},
                           {"decrypt_bytes", r.decrypt.bytes}});
      out << '\n';
    }
    write_json(out, json{{"recommended_sector_size", rec.sector_size},
                         {"gain_over_4096",
                          rec.gain_over_4096 ? json(rounded(*rec.gain_over_4096)) : json(nullptr)},
                         {"max_plain_sector_size", rec.max_plain},
                         {"max_luks_sector_size", rec.max_luks},
                         {"page_size", rec.page_size},
                         {"target", target_type},
                         {"target_version",
                          rec.known.target_loaded ? json(version_text(rec.known)) : json(nullptr)},
                         {"reason", rec.reason}});
    out << '\n';
    return;
  }
  out << fmt::format(
      "# {} ({}-bit key) as the kernel's {}{}, through AF_ALG: one request per "
      "unit, each with its own IV; memory only, no storage I/O\n",
      report.cipher, report.key_bits, report.kernel.algorithm,
      report.driver ? " (driver " + *report.driver + ")" : std::string());
  out << fmt::format("{:>6}  {:>14}  {:>14}\n", "unit", "encrypt MiB/s", "decrypt MiB/s");
  for (const auto &r : report.results) {
    out << fmt::format("{:>6}  {:>14.1f}  {:>14.1f}\n", r.unit, r.encrypt.mib_per_s(),
                       r.decrypt.mib_per_s());
  }
  out << fmt::format("Recommended sector size: {}. {}.\n", rec.sector_size, rec.reason);
}

void print_opened(std::ostream &out, const OpenResult &opened) {
  const auto sector_size = opened.table.sector_size();
  out << fmt::format("{}: /dev/mapper/{} ({}), {} sectors, sector size {}\n", opened.device.name,
                     opened.device.name, opened.device.dm_node(), opened.table.length,
                     sector_size ? *sector_size : 0);
}

}  // namespace lbscrypt::cli
