// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/online_checks.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "lbscrypt/numbers.hpp"
#include "lbscrypt/reencrypt/core.hpp"

namespace lbscrypt {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxDepth = 16;  // levels of stacking followed before giving up
constexpr int kMaxLinks = 40;  // symbolic links followed, as the kernel's ELOOP bound
constexpr unsigned kCapIpcLock = 14;

constexpr std::array<std::string_view, 9> kMemoryFilesystems = {
    "rootfs", "tmpfs", "ramfs", "devtmpfs", "proc", "sysfs", "devpts", "mqueue", "hugetlbfs"};

struct MountEntry {
  DevNumber number;
  std::string mount_point;
  std::string fstype;
  std::string source;
  std::string super_options;
};

// The fields between runs of any of `separators`.
std::vector<std::string_view> split_fields(std::string_view line, std::string_view separators) {
  std::vector<std::string_view> fields;
  std::size_t at = 0;
  while (at < line.size()) {
    const std::size_t end = std::min(line.find_first_of(separators, at), line.size());
    if (end > at) {
      fields.push_back(line.substr(at, end - at));
    }
    at = end + 1;
  }
  return fields;
}

// mountinfo and swaps write space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      unsigned value = 0;
      const auto digits = text.substr(i + 1, 3);
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + 3, value, 8);
      if (error == std::errc{} && end == digits.data() + 3 && value < 256) {
        out += static_cast<char>(value);
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::optional<DevNumber> parse_dev_text(std::string_view text, int base) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  DevNumber number;
  const auto parse = [base](std::string_view part, std::uint32_t &value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value, base);
    return !part.empty() && error == std::errc{} && end == part.data() + part.size();
  };
  if (!parse(text.substr(0, colon), number.major) || !parse(text.substr(colon + 1), number.minor)) {
    return std::nullopt;
  }
  return number;
}

std::optional<DevNumber> read_dev_file(const fs::path &file) {
  const auto text = read_sysfs_text(file);
  return text ? parse_dev_text(*text, 10) : std::nullopt;
}

std::optional<MountEntry> parse_mountinfo_line(std::string_view line) {
  const auto fields = split_fields(line, " ");
  const auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
  if (fields.size() < 6 || dash == fields.end() || fields.end() - dash < 3 ||
      dash - fields.begin() < 6) {
    return std::nullopt;
  }
  const auto number = parse_dev_text(fields[2], 10);
  if (!number) {
    return std::nullopt;
  }
  MountEntry entry;
  entry.number = *number;
  entry.mount_point = unescape_octal(fields[4]);
  entry.fstype = std::string(dash[1]);
  entry.source = unescape_octal(dash[2]);
  entry.super_options = dash + 3 < fields.end() ? unescape_octal(dash[3]) : std::string{};
  return entry;
}

Result<std::vector<std::string>> read_lines(const fs::path &file) {
  std::ifstream in(file);
  if (!in) {
    return make_error(Errc::device, fmt::format("cannot read {}", file.string()));
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
  }
  return lines;
}

Result<std::vector<MountEntry>> read_mountinfo(const fs::path &proc) {
  auto lines = read_lines(proc / "self" / "mountinfo");
  if (!lines) {
    return make_error(Errc::device,
                      fmt::format("{}: which filesystem holds each file the run needs cannot be "
                                  "told without it",
                                  lines.error().message));
  }
  std::vector<MountEntry> mounts;
  for (const std::string &line : *lines) {
    if (auto entry = parse_mountinfo_line(line)) {
      mounts.push_back(std::move(*entry));
    }
  }
  return mounts;
}

bool path_within(const std::string &path, const std::string &mount_point) {
  if (mount_point == "/") {
    return !path.empty() && path.front() == '/';
  }
  return path == mount_point ||
         (path.size() > mount_point.size() &&
          path.compare(0, mount_point.size(), mount_point) == 0 && path[mount_point.size()] == '/');
}

std::string strip_deleted(std::string text, bool &deleted) {
  constexpr std::string_view kDeleted = " (deleted)";
  deleted = text.size() >= kDeleted.size() &&
            text.compare(text.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0;
  if (deleted) {
    text.resize(text.size() - kDeleted.size());
  }
  return text;
}

NameLocation off_name() { return NameLocation{NamePlacement::off_name, {}}; }

// The path a file is written at: symbolic links followed, a dangling one too (the tool
// creating the file would create it at the link's target), and whatever does not exist yet
// appended as given.
fs::path resolved(const fs::path &given, std::error_code &ec) {
  fs::path path = fs::absolute(given, ec);
  for (int links = 0; !ec && links < kMaxLinks; ++links) {
    std::error_code none;
    if (!fs::is_symlink(fs::symlink_status(path, none))) {
      break;
    }
    const fs::path target = fs::read_symlink(path, ec);
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  return ec ? fs::path{} : fs::weakly_canonical(path, ec);
}

// Of several places something is on: on NAME if any is, else unknown if any is.
void take_worse(NameLocation &worst, NameLocation next) {
  if (next.where == NamePlacement::on_name ||
      (next.where == NamePlacement::unknown && worst.where == NamePlacement::off_name)) {
    worst = std::move(next);
  }
}

// The lookups, over one reading of mountinfo.
class Locator {
 public:
  Locator(const NameLookup &lookup, std::vector<MountEntry> mounts)
      : lookup_(lookup), mounts_(std::move(mounts)) {}

  [[nodiscard]] NameLocation path(const fs::path &given, int depth) const {
    if (depth > kMaxDepth) {
      return too_deep();
    }
    std::error_code ec;
    const fs::path real = resolved(given, ec);
    if (ec) {
      return NameLocation{NamePlacement::unknown, fmt::format("{} (cannot be looked at: {})",
                                                              given.string(), ec.message())};
    }
    const MountEntry *best = nullptr;
    for (const MountEntry &mount : mounts_) {
      if (path_within(real.string(), mount.mount_point) &&
          (best == nullptr || mount.mount_point.size() >= best->mount_point.size())) {
        best = &mount;  // the later of two at one point is the one on top
      }
    }
    if (best == nullptr) {
      return NameLocation{NamePlacement::unknown,
                          fmt::format("{} (no mount in mountinfo holds it)", real.string())};
    }
    return mount(*best, depth);
  }

  [[nodiscard]] NameLocation mount(const MountEntry &mount, int depth) const {
    const std::string_view type = mount.fstype;
    if (std::find(kMemoryFilesystems.begin(), kMemoryFilesystems.end(), type) !=
        kMemoryFilesystems.end()) {
      return off_name();
    }
    if (type == "overlay") {
      return overlay(mount, depth);
    }
    if (type == "btrfs") {
      return btrfs(mount, depth);
    }
    std::optional<DevNumber> number;
    if (mount.number.major != 0) {
      number = mount.number;
    } else {
      number = source_device(mount.source);
    }
    if (!number) {
      return NameLocation{NamePlacement::unknown, fmt::format("{} {} (no block device to follow)",
                                                              mount.fstype, mount.source)};
    }
    return wrap(device(*number, depth + 1), fmt::format("{} on ", mount.fstype));
  }

  [[nodiscard]] NameLocation device(DevNumber number, int depth) const {
    if (number == lookup_.name_device) {
      return NameLocation{NamePlacement::on_name, lookup_.name};
    }
    if (depth > kMaxDepth) {
      return too_deep();
    }
    std::error_code ec;
    const fs::path dir = fs::canonical(
        lookup_.sysfs / "dev" / "block" / fmt::format("{}:{}", number.major, number.minor), ec);
    if (ec) {
      return off_name();  // sysfs does not describe it: nothing is known to be under it
    }
    const std::string name = dir.filename().string();
    NameLocation worst = off_name();
    if (fs::exists(dir / "partition", ec)) {
      if (const auto disk = read_dev_file(dir.parent_path() / "dev")) {
        take_worse(worst, wrap(device(*disk, depth + 1), fmt::format("{}, a partition of ", name)));
      }
    }
    for (const auto &slave : fs::directory_iterator(dir / "slaves", ec)) {
      if (const auto under = read_dev_file(slave.path() / "dev")) {
        take_worse(worst, wrap(device(*under, depth + 1), fmt::format("{}, built on ", name)));
      }
    }
    if (const auto backing = read_sysfs_text(dir / "loop" / "backing_file")) {
      bool deleted = false;
      const std::string file = strip_deleted(*backing, deleted);
      if (deleted) {
        take_worse(worst,
                   NameLocation{NamePlacement::unknown,
                                fmt::format("{}, whose backing file {} was deleted", name, file)});
      } else {
        take_worse(worst, wrap(path(file, depth + 1),
                               fmt::format("{}, whose backing file {} is on ", name, file)));
      }
    }
    return worst;
  }

  // A mount's source as a block device: /dev/NAME through <sys>/class/block, /dev/mapper/NAME
  // through the dm/name of each device there, else stat.
  [[nodiscard]] std::optional<DevNumber> source_device(const std::string &source) const {
    constexpr std::string_view kDev = "/dev/";
    constexpr std::string_view kMapper = "mapper/";
    if (source.compare(0, kDev.size(), kDev) != 0) {
      return std::nullopt;
    }
    const std::string rest = source.substr(kDev.size());
    const fs::path classes = lookup_.sysfs / "class" / "block";
    std::error_code ec;
    if (rest.compare(0, kMapper.size(), kMapper) == 0) {
      const std::string dm_name = rest.substr(kMapper.size());
      for (const auto &entry : fs::directory_iterator(classes, ec)) {
        if (read_sysfs_text(entry.path() / "dm" / "name") == dm_name) {
          return read_dev_file(entry.path() / "dev");
        }
      }
    } else if (rest.find('/') == std::string::npos && !rest.empty()) {
      if (const auto number = read_dev_file(classes / rest / "dev")) {
        return number;
      }
    }
    struct stat st {};
    if (stat(source.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      return DevNumber{major(st.st_rdev), minor(st.st_rdev)};
    }
    return std::nullopt;
  }

  [[nodiscard]] const MountEntry *mount_numbered(DevNumber number) const {
    for (const MountEntry &mount : mounts_) {
      if (mount.number == number) {
        return &mount;
      }
    }
    return nullptr;
  }

  // A file known by its st_dev only (deleted, or reached through /proc): its mount, else the
  // block device of that number; an anonymous number no mount lists is the kernel's own
  // (shared memory, memfd).
  [[nodiscard]] NameLocation file_device(DevNumber number, int depth) const {
    if (const MountEntry *found = mount_numbered(number)) {
      return mount(*found, depth);
    }
    if (number.major == 0) {
      return off_name();
    }
    return device(number, depth);
  }

 private:
  static NameLocation too_deep() {
    return NameLocation{NamePlacement::unknown,
                        fmt::format("devices stacked more than {} levels deep", kMaxDepth)};
  }

  static NameLocation wrap(NameLocation inner, const std::string &prefix) {
    if (inner.where != NamePlacement::off_name) {
      inner.how = prefix + inner.how;
    }
    return inner;
  }

  [[nodiscard]] NameLocation overlay(const MountEntry &mount, int depth) const {
    NameLocation worst = off_name();
    bool any = false;
    for (const std::string_view option : split_fields(mount.super_options, ",")) {
      const auto equals = option.find('=');
      if (equals == std::string_view::npos) {
        continue;
      }
      const std::string_view key = option.substr(0, equals);
      if (key != "lowerdir" && key != "upperdir" && key != "workdir" && key != "lowerdir+" &&
          key != "datadir+") {
        continue;
      }
      for (const std::string_view dir : split_fields(option.substr(equals + 1), ":")) {
        any = true;
        take_worse(worst, wrap(path(std::string(dir), depth + 1),
                               fmt::format("overlay whose layer {} is on ", dir)));
      }
    }
    if (!any) {
      return NameLocation{NamePlacement::unknown,
                          fmt::format("overlay {} (mountinfo lists no layers)", mount.mount_point)};
    }
    return worst;
  }

  [[nodiscard]] NameLocation btrfs(const MountEntry &mount, int depth) const {
    const auto source = source_device(mount.source);
    if (!source) {
      return NameLocation{NamePlacement::unknown,
                          fmt::format("btrfs {} (its device cannot be found)", mount.source)};
    }
    // Every device of the filesystem the source belongs to.
    std::vector<DevNumber> members;
    std::error_code ec;
    for (const auto &filesystem : fs::directory_iterator(lookup_.sysfs / "fs" / "btrfs", ec)) {
      std::vector<DevNumber> here;
      std::error_code inner;
      for (const auto &member : fs::directory_iterator(filesystem.path() / "devices", inner)) {
        if (const auto number = read_dev_file(member.path() / "dev")) {
          here.push_back(*number);
        }
      }
      if (std::find(here.begin(), here.end(), *source) != here.end()) {
        members = std::move(here);
        break;
      }
    }
    if (members.empty()) {
      members.push_back(*source);
    }
    NameLocation worst = off_name();
    for (const DevNumber member : members) {
      take_worse(worst, wrap(device(member, depth + 1), "btrfs on "));
    }
    return worst;
  }

  const NameLookup &lookup_;
  std::vector<MountEntry> mounts_;
};

Result<Locator> make_locator(const NameLookup &lookup) {
  auto mounts = read_mountinfo(lookup.proc);
  if (!mounts) {
    return mounts.error();
  }
  return Locator(lookup, std::move(mounts).value());
}

// A place refused: on NAME, or not shown to be off it.
Error placed_on_name(const NameLookup &lookup, const std::string &thing, const NameLocation &where,
                     const std::string &why, const std::string &todo) {
  if (where.where == NamePlacement::on_name) {
    return Error{Errc::refused, fmt::format("{} is on {} ({}): {}; {} (nothing was written)", thing,
                                            lookup.name, where.how, why, todo)};
  }
  return Error{Errc::refused,
               fmt::format("{} is on {}, which cannot be shown not to be on {}: {}; {} (nothing "
                           "was written)",
                           thing, where.how, lookup.name, why, todo)};
}

Result<void> check_state_files(const NameLookup &lookup, const Locator &locator,
                               const OnlineRunNeeds &needs) {
  const std::array<std::pair<std::string, fs::path>, 2> files = {
      std::pair<std::string, fs::path>{"the state file", needs.state},
      std::pair<std::string, fs::path>{"the state file's journal", needs.journal}};
  for (const auto &[what, file] : files) {
    const NameLocation where = locator.path(file, 0);
    if (where.where != NamePlacement::off_name) {
      return placed_on_name(
          lookup, fmt::format("{} {}", what, file.string()), where,
          fmt::format("{} is suspended while each hotzone is converted, and the journal's "
                      "flushes must reach a disk then",
                      lookup.name),
          fmt::format("put the state file on a local disk filesystem that is not on {}",
                      lookup.name));
    }
  }
  return {};
}

Result<void> check_swap(const NameLookup &lookup, const Locator &locator) {
  const fs::path swaps = lookup.proc / "swaps";
  std::error_code ec;
  if (!fs::exists(swaps, ec)) {
    return {};  // a kernel without swap
  }
  auto lines = read_lines(swaps);
  if (!lines) {
    return lines.error();
  }
  for (std::size_t i = 1; i < lines->size(); ++i) {
    const auto fields = split_fields((*lines)[i], " \t");
    if (fields.size() < 2) {
      continue;
    }
    const std::string file = unescape_octal(fields[0]);
    NameLocation where;
    if (fields[1] == "partition") {
      const auto number = locator.source_device(file);
      where = number ? locator.device(*number, 0)
                     : NameLocation{NamePlacement::unknown,
                                    fmt::format("{} (no block device found)", file)};
    } else {
      where = locator.path(file, 0);
    }
    if (where.where != NamePlacement::off_name) {
      return placed_on_name(
          lookup, fmt::format("swap {}", file), where,
          fmt::format("a page swapped in or out while {} is suspended would wait for it",
                      lookup.name),
          fmt::format("swapoff {} first", file));
    }
  }
  return {};
}

Result<void> check_files(const NameLookup &lookup, const Locator &locator,
                         const OnlineRunNeeds &needs) {
  for (const fs::path &key : needs.key_files) {
    const NameLocation where = locator.path(key, 0);
    if (where.where != NamePlacement::off_name) {
      return placed_on_name(
          lookup, fmt::format("the key file {}", key.string()), where,
          fmt::format("a run resumed after a kill -9 reads it while {} may be suspended",
                      lookup.name),
          fmt::format("copy it to a tmpfs such as /run or to a disk not on {}, and give that path",
                      lookup.name));
    }
  }
  std::error_code ec;
  if (!needs.tab.empty() && fs::exists(needs.tab, ec)) {
    const NameLocation where = locator.path(needs.tab, 0);
    if (where.where != NamePlacement::off_name) {
      return placed_on_name(lookup, needs.tab.string(), where,
                            fmt::format("the run reads it and may rewrite it while {} may be "
                                        "suspended",
                                        lookup.name),
                            fmt::format("reencrypt {} offline, from a system that does not "
                                        "run on it",
                                        lookup.name));
    }
  }
  return {};
}

// Every file mapped into this process (the program, its libraries), from <proc>/self/maps.
Result<void> check_mapped_files(const NameLookup &lookup, const Locator &locator) {
  auto lines = read_lines(lookup.proc / "self" / "maps");
  if (!lines) {
    return make_error(Errc::device, fmt::format("{}: the files of the program cannot be told",
                                                lines.error().message));
  }
  std::set<std::string> seen;
  for (const std::string &line : *lines) {
    // address perms offset dev inode path (the path may hold spaces).
    const auto fields = split_fields(line, " ");
    const auto slash = line.find('/');
    if (fields.size() < 6 || slash == std::string::npos ||
        !seen.insert(line.substr(slash)).second) {
      continue;
    }
    bool deleted = false;
    const std::string file = strip_deleted(line.substr(slash), deleted);
    std::error_code ec;
    NameLocation where;
    if (!deleted && fs::exists(file, ec)) {
      where = locator.path(file, 0);
    } else if (const auto number = parse_dev_text(fields[3], 16)) {
      where = locator.file_device(*number, 0);
    } else {
      where = NameLocation{NamePlacement::unknown, fmt::format("{} (gone)", file)};
    }
    if (where.where != NamePlacement::off_name) {
      return placed_on_name(
          lookup, fmt::format("{}, which lbscrypt runs from (the program or a library),", file),
          where,
          fmt::format("its pages may have to be read again while {} is suspended", lookup.name),
          fmt::format("run a copy of lbscrypt and its libraries from a tmpfs or a disk not on {}",
                      lookup.name));
    }
  }
  return {};
}

// The number after "KEY:" (and blanks) in a /proc file of such lines, read in `base`.
std::optional<std::uint64_t> proc_field_number(const fs::path &file, std::string_view key,
                                               int base) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 ||
        line[key.size()] != ':') {
      continue;
    }
    std::size_t at = key.size() + 1;
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) {
      ++at;
    }
    std::uint64_t value = 0;
    const auto [end, error] =
        std::from_chars(line.data() + at, line.data() + line.size(), value, base);
    if (error != std::errc{} || end == line.data() + at) {
      return std::nullopt;
    }
    return value;
  }
  return std::nullopt;
}

// Where the file behind a process's fd is: a block device by its number, a file by its path
// (or its st_dev when the path is gone).
NameLocation fd_location(const Locator &locator, const fs::path &fd) {
  std::error_code ec;
  bool deleted = false;
  const std::string target = strip_deleted(fs::read_symlink(fd, ec).string(), deleted);
  if (ec) {
    return off_name();
  }
  struct stat st {};
  const bool stated = stat(fd.c_str(), &st) == 0;
  if (stated && S_ISBLK(st.st_mode)) {
    return locator.device(DevNumber{major(st.st_rdev), minor(st.st_rdev)}, 0);
  }
  if (stated && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return off_name();  // a pipe, a socket, a character device
  }
  if (target.compare(0, 5, "/dev/") == 0) {
    if (const auto number = locator.source_device(target)) {
      return locator.device(*number, 0);
    }
  }
  if (!deleted && !target.empty() && target.front() == '/' && fs::exists(target, ec)) {
    return locator.path(target, 0);
  }
  if (stated) {
    return locator.file_device(DevNumber{major(st.st_dev), minor(st.st_dev)}, 0);
  }
  return off_name();
}

std::vector<std::string> openers_with_direct(const NameLookup &lookup, const Locator &locator,
                                             int self_pid) {
  std::map<int, std::string> found;
  std::error_code ec;
  for (const auto &process : fs::directory_iterator(lookup.proc, ec)) {
    const std::string pid_text = process.path().filename().string();
    const auto pid = parse_decimal_u32(pid_text);
    if (!pid || static_cast<int>(*pid) == self_pid) {
      continue;
    }
    std::error_code inner;
    for (const auto &fd : fs::directory_iterator(process.path() / "fd", inner)) {
      const auto flags =
          proc_field_number(process.path() / "fdinfo" / fd.path().filename(), "flags", 8);
      if (!flags || (*flags & static_cast<std::uint64_t>(O_DIRECT)) == 0) {
        continue;
      }
      if (fd_location(locator, fd.path()).where == NamePlacement::on_name) {
        const auto comm = read_sysfs_text(process.path() / "comm");
        found.emplace(static_cast<int>(*pid),
                      fmt::format("{} ({})", *pid, comm.value_or(std::string("?"))));
        break;
      }
    }
  }
  std::vector<std::string> names;
  names.reserve(found.size());
  for (auto &[pid, name] : found) {
    names.push_back(std::move(name));
  }
  return names;
}

std::string joined(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &item : items) {
    text += text.empty() ? item : ", " + item;
  }
  return text;
}

[[maybe_unused]] bool has_ipc_lock() {  // unused in an ASan build
  const auto caps = proc_field_number("/proc/self/status", "CapEff", 16);
  return caps && ((*caps >> kCapIpcLock) & 1U) != 0;
}

}  // namespace

Result<NameLocation> locate_path(const NameLookup &lookup, const fs::path &path) {
  auto locator = make_locator(lookup);
  if (!locator) {
    return locator.error();
  }
  return locator->path(path, 0);
}

NameLocation locate_block_device(const NameLookup &lookup, DevNumber device) {
  return Locator(lookup, {}).device(device, 0);
}

std::vector<std::string> direct_openers(const NameLookup &lookup, int self_pid) {
  auto mounts = read_mountinfo(lookup.proc);
  const Locator locator(lookup, mounts ? std::move(mounts).value() : std::vector<MountEntry>{});
  return openers_with_direct(lookup, locator, self_pid);
}

Result<std::vector<std::string>> check_online_run(const NameLookup &lookup,
                                                  const OnlineRunNeeds &needs) {
  auto locator = make_locator(lookup);
  if (!locator) {
    return locator.error();
  }
  if (auto r = check_state_files(lookup, *locator, needs); !r) {
    return r.error();
  }
  if (auto r = check_swap(lookup, *locator); !r) {
    return r.error();
  }
  if (auto r = check_files(lookup, *locator, needs); !r) {
    return r.error();
  }
  if (auto r = check_mapped_files(lookup, *locator); !r) {
    return r.error();
  }
  std::vector<std::string> warnings;
  if (!needs.check_direct_openers) {
    return warnings;
  }
  const auto openers = openers_with_direct(lookup, *locator, needs.self_pid);
  if (openers.empty()) {
    return warnings;
  }
  const std::string what =
      fmt::format("{} or a file on it is open with O_DIRECT by {}", lookup.name, joined(openers));
  const std::string effect = fmt::format(
      "from the first hotzone on, their direct I/O not aligned to {} bytes fails with EINVAL",
      needs.new_sector_size);
  if (!needs.force) {
    return make_error(Errc::busy, fmt::format("{}: {}; stop them, or give --force to go on "
                                              "regardless (nothing was written)",
                                              what, effect));
  }
  warnings.push_back(fmt::format("--force: {}: {}", what, effect));
  return warnings;
}

Result<std::vector<std::string>> prepare_online_run(
    const ReencryptRequest &request, const std::string &name, DevNumber name_device,
    std::uint32_t new_sector_size, const std::function<std::optional<std::string>()> &lock_memory) {
  const NameLookup lookup{request.proc, request.sysfs, name, name_device};
  OnlineRunNeeds needs;
  needs.state = request.state;
  needs.journal = journal_path(request.state);
  needs.key_files = request.key_files;
  needs.tab = request.tab_path;
  needs.new_sector_size = new_sector_size;
  needs.check_direct_openers = !request.abort;
  needs.force = request.force;
  needs.self_pid = getpid();
  auto warnings = check_online_run(lookup, needs);
  if (!warnings) {
    return warnings.error();
  }
  if (lock_memory) {
    if (auto warning = lock_memory()) {
      warnings->push_back(std::move(*warning));
    }
  }
  return warnings;
}

std::optional<std::string> lock_memory_for_online() {
#if defined(__SANITIZE_ADDRESS__)
  return std::string(
      "memory not locked (mlockall): this lbscrypt is built with AddressSanitizer, whose shadow "
      "memory cannot be locked");
#else
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      !has_ipc_lock()) {
    return fmt::format(
        "memory not locked (mlockall): RLIMIT_MEMLOCK is {} bytes and the process has no "
        "CAP_IPC_LOCK; a page of lbscrypt dropped while the mapping is suspended may have to "
        "be read back from a disk: run as root, or with ulimit -l unlimited",
        limit.rlim_cur);
  }
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    return fmt::format(
        "memory not locked: mlockall failed ({}); a page of lbscrypt dropped while "
        "the mapping is suspended may have to be read back from a disk",
        std::strerror(errno));
  }
  return std::nullopt;
#endif
}

}  // namespace lbscrypt
