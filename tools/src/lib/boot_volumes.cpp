// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/boot_volumes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <system_error>

#include "text_fields.hpp"

namespace lbscrypt {

namespace {

namespace fs = std::filesystem;

// How deep a chain of mappings (slaves/) or of /dev links is followed: far more than any real
// stack, and a bound on a loop in a broken tree.
constexpr int kMaxDepth = 32;

// The lines of a text, a '\r' before the end of each dropped.
std::vector<std::string_view> text_lines(std::string_view text) {
  std::vector<std::string_view> lines = text::split(text, '\n');
  for (std::string_view &line : lines) {
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
  }
  return lines;
}

// fstab's and mountinfo's escapes: \NNN (octal) is one byte ("\040" a blank).
std::string octal_unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto octal = [&](std::size_t k) {
      return i + k < text.size() && text[i + k] >= '0' && text[i + k] <= '7';
    };
    if (text[i] == '\\' && octal(1) && octal(2) && octal(3)) {
      const int value =
          ((text[i + 1] - '0') << 6) | ((text[i + 2] - '0') << 3) | (text[i + 3] - '0');
      out += static_cast<char>(value & 0xff);
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

// "/usr/" and "/usr" are the same mount point.
std::string mount_point(std::string_view field) {
  std::string point = octal_unescape(field);
  while (point.size() > 1 && point.back() == '/') {
    point.pop_back();
  }
  return point;
}

std::optional<std::string> first_line_of(const fs::path &file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return std::nullopt;
  }
  return line;
}

class Finder {
 public:
  Finder(const BootInputs &inputs, BootVolumes &out) : inputs_(inputs), out_(out) {}

  // A device as fstab, RESUME=, resume= or root= names it.
  void spec(std::string_view device, const BootUse &use) {
    if (device.empty()) {
      return;
    }
    constexpr std::string_view kMapper = "/dev/mapper/";
    if (device.starts_with(kMapper) && device.size() > kMapper.size()) {
      // The name itself, active or not: the boot opens it by that name.
      add(std::string(device.substr(kMapper.size())), use);
    }
    if (const auto number = device_number(device)) {
      block(inputs_.sysfs / "dev" / "block" / *number, use, 0);
      return;
    }
    const auto path = volume_device_path(device);
    if (!path || !path->starts_with("/dev/")) {
      return;
    }
    if (const auto dir = block_dir(*path)) {
      block(*dir, use, 0);
    }
  }

  // A block device by its sysfs number ("253:1"), or else the device path mountinfo gives.
  void mounted(std::string_view number, std::string_view source, const BootUse &use) {
    std::error_code ec;
    const fs::path dir = inputs_.sysfs / "dev" / "block" / std::string(number);
    if (fs::exists(dir, ec)) {
      block(dir, use, 0);
    } else if (source.starts_with("/dev/")) {
      spec(source, use);
    }
  }

 private:
  void add(const std::string &name, const BootUse &use) {
    auto &uses = out_.uses[name];
    if (std::find(uses.begin(), uses.end(), use) == uses.end()) {
      uses.push_back(use);
    }
  }

  // MAJOR:MINOR in decimal (the kernel's resume=8:2), or nullopt.
  static std::optional<std::string> device_number(std::string_view text) {
    const auto colon = text.find(':');
    const auto digits = [](std::string_view part) {
      return !part.empty() &&
             std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (colon == std::string_view::npos || !digits(text.substr(0, colon)) ||
        !digits(text.substr(colon + 1))) {
      return std::nullopt;
    }
    return std::string(text);
  }

  // The sysfs directory of the block device a /dev path names: its links followed inside
  // `dev` (/dev/disk/by-uuid/X -> ../../dm-3), the last name looked up in class/block; for a
  // /dev/mapper node that is no link, the mapping of that dm/name.
  [[nodiscard]] std::optional<fs::path> block_dir(const std::string &path) const {
    fs::path at = inputs_.dev / path.substr(std::string_view("/dev/").size());
    for (int hop = 0; hop < kMaxDepth; ++hop) {
      std::error_code ec;
      if (!fs::is_symlink(at, ec)) {
        break;
      }
      const fs::path target = fs::read_symlink(at, ec);
      if (ec) {
        return std::nullopt;
      }
      if (target.is_absolute()) {
        const std::string text = target.string();
        if (!text.starts_with("/dev/")) {
          return std::nullopt;
        }
        at = inputs_.dev / text.substr(std::string_view("/dev/").size());
      } else {
        at = (at.parent_path() / target).lexically_normal();
      }
    }
    const fs::path classes = inputs_.sysfs / "class" / "block";
    std::error_code ec;
    if (fs::exists(classes / at.filename(), ec)) {
      return classes / at.filename();
    }
    if (at.parent_path().filename() != "mapper") {
      return std::nullopt;
    }
    for (const auto &entry : fs::directory_iterator(classes, ec)) {
      if (first_line_of(entry.path() / "dm" / "name") == at.filename().string()) {
        return entry.path();
      }
    }
    return std::nullopt;
  }

  // The mapping a block device is (dm/name), and every one it is built on (slaves/).
  void block(const fs::path &dir, const BootUse &use, int depth) {
    if (depth > kMaxDepth) {
      return;
    }
    if (const auto name = first_line_of(dir / "dm" / "name"); name && !name->empty()) {
      add(*name, use);
    }
    std::error_code ec;
    for (const auto &slave : fs::directory_iterator(dir / "slaves", ec)) {
      block(slave.path(), use, depth + 1);
    }
  }

  const BootInputs &inputs_;
  BootVolumes &out_;
};

void from_fstab(const BootInputs &inputs, Finder &finder) {
  for (const std::string_view line : text_lines(*inputs.fstab)) {
    const auto words = text::fields(line);
    if (words.size() < 2 || words[0].front() == '#') {
      continue;
    }
    const std::string point = mount_point(words[1]);
    if (point != "/" && point != "/usr") {
      continue;
    }
    if (words.size() > 3 && std::ranges::count(text::split(words[3], ','), "noauto") > 0) {
      continue;  // not mounted at boot
    }
    finder.spec(octal_unescape(words[0]), {point, "fstab"});
  }
}

void from_mountinfo(const BootInputs &inputs, Finder &finder) {
  // The last mount of a point is the one seen there.
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const std::string_view line : text_lines(*inputs.mountinfo)) {
    const auto words = text::fields(line);
    const auto dash = std::find(words.begin(), words.end(), "-");
    if (words.size() < 5 || dash == words.end() || words.end() - dash < 3) {
      continue;
    }
    const std::string point = mount_point(words[4]);
    if (point == "/" || point == "/usr") {
      seen[point] = {std::string(words[2]), octal_unescape(*(dash + 2))};
    }
  }
  for (const auto &[point, device] : seen) {
    finder.mounted(device.first, device.second, {point, "mountinfo"});
  }
}

void from_resume_conf(const BootInputs &inputs, Finder &finder) {
  std::optional<std::string> value;
  for (const std::string_view line : text_lines(*inputs.resume_conf)) {
    const auto words = text::fields(line);
    if (words.empty() || !words[0].starts_with("RESUME=")) {
      continue;
    }
    std::string_view v = words[0].substr(std::string_view("RESUME=").size());
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
      v = v.substr(1, v.size() - 2);
    }
    value = std::string(v);
  }
  // auto (the largest swap, chosen when the image is made) and none name no device here.
  if (value && *value != "none" && *value != "auto") {
    finder.spec(*value, {"the resume device", "RESUME= in " + inputs.resume_conf_path});
  }
}

void from_cmdline(const BootInputs &inputs, Finder &finder) {
  std::optional<std::string> resume;
  std::optional<std::string> root;
  for (const std::string &word : kernel_command_line_words(*inputs.cmdline)) {
    if (word.starts_with("resume=")) {
      resume = word.substr(std::string_view("resume=").size());
    } else if (word.starts_with("root=")) {
      root = word.substr(std::string_view("root=").size());
    }
  }
  if (root) {
    finder.spec(*root, {"/", "root= on the kernel command line"});
  }
  if (resume) {
    finder.spec(*resume, {"the resume device", "resume= on the kernel command line"});
  }
}

}  // namespace

std::vector<std::string> kernel_command_line_words(std::string_view cmdline) {
  std::vector<std::string> words(1);
  char quote = 0;
  for (const char c : cmdline) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        words.back() += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (!words.back().empty()) {
        words.emplace_back();
      }
    } else {
      words.back() += c;
    }
  }
  if (words.back().empty()) {
    words.pop_back();
  }
  return words;
}

BootVolumes find_boot_volumes(const BootInputs &inputs) {
  BootVolumes out;
  Finder finder(inputs, out);
  if (inputs.fstab) {
    from_fstab(inputs, finder);
  }
  if (inputs.mountinfo) {
    from_mountinfo(inputs, finder);
  }
  if (inputs.cmdline) {
    from_cmdline(inputs, finder);
  }
  if (inputs.resume_conf) {
    from_resume_conf(inputs, finder);
  }
  return out;
}

std::optional<std::string> boot_use(const TabEntry &entry, const BootVolumes &boot) {
  const auto found = boot.uses.find(entry.name);
  if (found == boot.uses.end() || found->second.empty()) {
    return std::nullopt;
  }
  // One group per thing held, in the order found: "/ (fstab, mountinfo)".
  std::vector<std::pair<std::string, std::string>> groups;
  for (const BootUse &use : found->second) {
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto &g) { return g.first == use.what; });
    if (group == groups.end()) {
      groups.emplace_back(use.what, use.source);
    } else {
      group->second += ", " + use.source;
    }
  }
  std::string out = "holds ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) {
      out += i + 1 == groups.size() ? " and " : ", ";
    }
    out += fmt::format("{} ({})", groups[i].first, groups[i].second);
  }
  return out;
}

bool opens_in_initrd(const TabEntry &entry, const BootVolumes &boot) {
  return opened_by_initrd(entry) || boot_use(entry, boot).has_value();
}

std::string boot_use_note(const TabEntry &entry, std::string_view tab_path, std::string_view use) {
  return fmt::format("{} line {} ({}) {}: opened in the initramfs without x-initrd.attach",
                     tab_path, entry.line, entry.name, use);
}

}  // namespace lbscrypt
