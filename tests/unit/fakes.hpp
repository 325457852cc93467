// SPDX-License-Identifier: GPL-2.0-only
// Test doubles for the Kernel and BlockDevices interfaces. The fake kernel applies the
// sector_size rule of the version it pretends to be (predict() is NOT used here, so tests of
// the commands do not check the code against itself): stock reads the value with 16-bit
// truncation and caps at 4096; 1.30.0 caps at min(page, 65536).
#pragma once

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lbscrypt/device.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt::test {

class FakeKernel final : public Kernel {
 public:
  std::optional<TargetVersion> version = TargetVersion{1, 30, 0};
  std::uint32_t page = 65536;
  bool fail_list = false;
  // A kernel that misreports: records this sector_size whatever the table says.
  std::optional<std::string> recorded_override;
  // Target types the kernel does not know (create fails with EINVAL), and a table read that
  // fails (to test what happens to devices already made).
  std::set<std::string, std::less<>> missing_targets;
  bool fail_table = false;
  // What asking for the crypt target by name loads when none is registered (version is
  // nullopt): the in-tree module's version, or nothing; and whether modules.dep lists ours.
  std::optional<TargetVersion> loadable;
  bool ours_installed = false;
  int loads = 0;
  int creates = 0;
  int removes = 0;
  int busy_removes = 0;  // removes that fail with EBUSY first (udev probing the device)

  struct Mapping {
    DeviceInfo info;
    TargetLine line;
    std::vector<TargetLine> more;  // the lines after the first, of a table reload gave
    std::optional<std::vector<TargetLine>> inactive;
  };
  // suspend, reload and resume, in order, as "suspend NAME" (SuspendMode::freeze: the
  // filesystem frozen) or "suspend-noflush NAME" (SuspendMode::queue), "reload NAME",
  // "resume NAME"; `observe` sees each as it happens.
  std::vector<std::string> events;
  std::function<void(const std::string &event)> observe;
  bool fail_reload = false;
  std::map<std::string, Mapping, std::less<>> mappings;

  Result<std::optional<TargetVersion>> target_version(std::string_view target) override {
    if (fail_list) {
      return make_error(Errc::kernel, "cannot list device-mapper targets: no device-mapper");
    }
    return target == "crypt" ? version : std::nullopt;
  }
  Result<std::optional<TargetVersion>> load_target(std::string_view target) override {
    ++loads;
    if (target != "crypt") {
      return std::optional<TargetVersion>{};
    }
    if (!version) {
      version = loadable;
    }
    return version;
  }
  bool module_installed(std::string_view module) override {
    return ours_installed && module == "dm_crypt_lbs";
  }
  std::uint32_t page_size() override { return page; }

  Result<DeviceInfo> create(const CreateRequest &request) override {
    ++creates;
    if (mappings.contains(request.name)) {
      return make_error(Errc::exists, "the kernel refused: Device or resource busy", EBUSY);
    }
    if (missing_targets.contains(request.target_type)) {
      return make_error(Errc::kernel, "the kernel refused: Invalid argument", EINVAL);
    }
    // The kernel side of sector_size, written out independently of lbscrypt::predict.
    std::string params(request.params.view());
    const auto pos = params.find("sector_size:");
    if (pos != std::string::npos) {
      const auto end = params.find(' ', pos);
      const std::string arg =
          params.substr(pos + 12, end == std::string::npos ? end : end - pos - 12);
      const bool stock = !version || *version < TargetVersion{1, 30, 0};
      // Both read digits only: no sign, no junk (sscanf "%hu%c"; kstrtouint).
      if (arg.empty() || arg.find_first_not_of("0123456789") != std::string::npos) {
        return make_error(Errc::kernel, "the kernel refused: Invalid argument", EINVAL);
      }
      const unsigned long long full = std::stoull(arg);
      const unsigned long long value = stock ? (full & 0xffffULL) : full;
      const unsigned long long bound = stock ? 4096 : std::min<unsigned long long>(page, 65536);
      if (value < 512 || value > bound || (value & (value - 1)) != 0) {
        return make_error(Errc::kernel, "the kernel refused: Invalid argument", EINVAL);
      }
      // dm-crypt: "Invalid iv_offset sector" unless it starts on an encryption sector.
      std::istringstream fields(params);
      std::string cipher_word;
      std::string key_word;
      unsigned long long iv_offset = 0;
      fields >> cipher_word >> key_word >> iv_offset;
      if (iv_offset % (value / 512) != 0) {
        return make_error(Errc::kernel, "the kernel refused: Invalid iv_offset sector", EINVAL);
      }
      params.replace(pos + 12, arg.size(), recorded_override.value_or(std::to_string(value)));
    }
    Mapping m;
    m.info.name = request.name;
    m.info.uuid = request.uuid;
    m.info.major = 253;
    // the lowest minor no mapping has, as the kernel's allocator gives it
    while (std::any_of(mappings.begin(), mappings.end(),
                       [&](const auto &item) { return item.second.info.minor == m.info.minor; })) {
      ++m.info.minor;
    }
    m.info.read_only = request.read_only;
    m.info.target_count = 1;
    m.line.length = request.length;
    m.line.type = request.target_type;
    m.line.params.append(params);
    const DeviceInfo info = m.info;
    mappings.emplace(request.name, std::move(m));
    return info;
  }

  Result<void> remove(std::string_view name) override {
    ++removes;
    if (busy_removes > 0) {
      --busy_removes;
      return make_error(Errc::busy, "the kernel refused: Device or resource busy", EBUSY);
    }
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      return make_error(Errc::not_found, "no such device");
    }
    mappings.erase(it);
    return Ok{};
  }

  Result<DeviceInfo> info(std::string_view name) override {
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      return make_error(Errc::not_found, "no device-mapper device named " + std::string(name));
    }
    return it->second.info;
  }

  Result<std::vector<std::string>> list() override {
    std::vector<std::string> names;
    for (const auto &item : mappings) {
      names.push_back(item.first);
    }
    return names;
  }

  Result<std::vector<TargetLine>> table(std::string_view name) override {
    if (fail_table) {
      return make_error(Errc::kernel, "cannot read the table of " + std::string(name));
    }
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      // as libdevmapper: DM_DEVICE_TABLE of a missing device fails (ENXIO); only info()
      // says "no such device"
      return make_error(Errc::kernel, "cannot read the table of " + std::string(name) +
                                          ": No such device or address");
    }
    std::vector<TargetLine> lines;
    lines.push_back(it->second.line);
    lines.insert(lines.end(), it->second.more.begin(), it->second.more.end());
    return lines;
  }

  Result<void> suspend(std::string_view name, SuspendMode mode) override {
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      return make_error(Errc::not_found, "no device-mapper device named " + std::string(name));
    }
    it->second.info.suspended = true;
    note((mode == SuspendMode::freeze ? "suspend " : "suspend-noflush ") + std::string(name));
    return Ok{};
  }

  Result<void> reload(std::string_view name, const std::vector<TargetLine> &lines,
                      bool read_only) override {
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      return make_error(Errc::not_found, "no device-mapper device named " + std::string(name));
    }
    // dm-table: the targets cover the device from 0 without a gap
    std::uint64_t next = 0;
    for (const TargetLine &line : lines) {
      if (line.start != next || line.length == 0) {
        return make_error(Errc::kernel, "the kernel refused: Invalid argument", EINVAL);
      }
      next += line.length;
    }
    if (fail_reload || lines.empty()) {
      return make_error(Errc::kernel, "the kernel refused: Invalid argument", EINVAL);
    }
    it->second.inactive = lines;
    it->second.info.read_only = read_only;
    note("reload " + std::string(name));
    return Ok{};
  }

  Result<void> resume(std::string_view name) override {
    const auto it = mappings.find(name);
    if (it == mappings.end()) {
      return make_error(Errc::not_found, "no device-mapper device named " + std::string(name));
    }
    if (it->second.inactive) {
      std::vector<TargetLine> lines = std::move(*it->second.inactive);
      it->second.inactive.reset();
      it->second.line = lines.front();
      it->second.more.assign(lines.begin() + 1, lines.end());
      it->second.info.target_count = static_cast<std::uint32_t>(lines.size());
    }
    it->second.info.suspended = false;
    note("resume " + std::string(name));
    return Ok{};
  }

 private:
  void note(const std::string &event) {
    events.push_back(event);
    if (observe) {
      observe(event);
    }
  }
};

class FakeBlockDevices final : public BlockDevices {
 public:
  std::map<std::string, std::uint64_t, std::less<>> sizes;  // bytes
  std::map<std::string, bool, std::less<>> luks;
  // What a path is when it is not a block device of `sizes` or a regular file.
  std::map<std::string, PathKind, std::less<>> kinds;

  Result<PathKind> path_kind(const std::string &path) override {
    if (const auto it = kinds.find(path); it != kinds.end()) {
      return it->second;
    }
    if (is_regular_file(path)) {
      return PathKind::regular_file;
    }
    return sizes.contains(path) ? PathKind::block_device : PathKind::missing;
  }

  Result<std::uint64_t> size_bytes(const std::string &path) override {
    const auto it = sizes.find(path);
    if (it == sizes.end()) {
      return make_error(Errc::device, "cannot open device " + path + ": No such file or directory");
    }
    return it->second;
  }
  Result<bool> has_luks_header(const std::string &path) override {
    const auto it = luks.find(path);
    return it != luks.end() && it->second;
  }
  // "MAJOR:MINOR" -> path, besides 7:0 -> /dev/loop0.
  std::map<std::string, std::string, std::less<>> resolved;
  std::string resolve(std::string_view major_minor) override {
    if (const auto it = resolved.find(major_minor); it != resolved.end()) {
      return it->second;
    }
    return major_minor == "7:0" ? "/dev/loop0" : std::string(major_minor);
  }

  // Regular files (by path) and the loop devices attached to them.
  std::map<std::string, bool, std::less<>> regular_files;
  std::map<std::string, std::string, std::less<>> loops;  // /dev/loopN -> file
  std::weak_ptr<int> last_hold;
  bool fail_loop = false;

  bool is_regular_file(const std::string &path) override {
    const auto it = regular_files.find(path);
    return it != regular_files.end() && it->second;
  }
  Result<LoopDevice> attach_loop(const std::string &file, bool /*read_only*/) override {
    if (fail_loop) {
      return make_error(Errc::device, "no free loop device for " + file);
    }
    const std::string path = "/dev/loop" + std::to_string(loops.size());
    loops[path] = file;
    auto hold = std::make_shared<int>(-1);
    last_hold = hold;
    return LoopDevice{path, hold};
  }
  // Who holds a device (what the real one reads from sysfs holders/ and O_EXCL).
  std::map<std::string, std::string, std::less<>> users;
  std::optional<std::string> user_of(const std::string &path) override {
    const auto it = users.find(path);
    return it == users.end() ? std::nullopt : std::optional(it->second);
  }
  std::optional<std::string> loop_backing_file(const std::string &device) override {
    const auto it = loops.find(device);
    return it == loops.end() ? std::nullopt : std::optional(it->second);
  }
  // What sysfs tells of a device's writes; a device not here is unknown to it.
  std::map<std::string, WriteGeometry, std::less<>> geometries;
  std::optional<WriteGeometry> write_geometry(const std::string &device) override {
    const auto it = geometries.find(device);
    return it == geometries.end() ? std::nullopt : std::optional(it->second);
  }
};

}  // namespace lbscrypt::test
