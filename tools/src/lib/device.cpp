// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/device.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cryptsetup_handle.hpp"
#include "file_descriptor.hpp"
#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

using detail::FileDescriptor;

class SystemBlockDevices final : public BlockDevices {
 public:
  Result<PathKind> path_kind(const std::string &path) override {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        return PathKind::missing;
      }
      return make_error(Errc::device, fmt::format("Device {} cannot be looked at: {}", path,
                                                  std::strerror(errno)));
    }
    if (S_ISBLK(st.st_mode)) {
      return PathKind::block_device;
    }
    if (S_ISREG(st.st_mode)) {
      return PathKind::regular_file;
    }
    if (S_ISDIR(st.st_mode)) {
      return PathKind::directory;
    }
    if (S_ISCHR(st.st_mode)) {
      return PathKind::character_device;
    }
    return PathKind::other;
  }

  Result<std::uint64_t> size_bytes(const std::string &path) override {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
    const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      return make_error(Errc::device, fmt::format("Device {} does not exist or access denied ({}).",
                                                  path, std::strerror(errno)));
    }
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) {
      return make_error(Errc::device,
                        fmt::format("cannot stat device {}: {}", path, std::strerror(errno)));
    }
    if (S_ISREG(st.st_mode)) {
      return static_cast<std::uint64_t>(st.st_size);
    }
    if (!S_ISBLK(st.st_mode)) {
      return make_error(Errc::device,
                        fmt::format("{} is neither a block device nor a regular file", path));
    }
    std::uint64_t bytes = 0;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
    if (ioctl(fd.get(), BLKGETSIZE64, &bytes) != 0) {
      return make_error(Errc::device,
                        fmt::format("cannot read the size of {}: {}", path, std::strerror(errno)));
    }
    return bytes;
  }

  Result<bool> has_luks_header(const std::string &path) override {
    detail::silence_libcryptsetup();
    crypt_device *raw = nullptr;
    if (const int r = crypt_init(&raw, path.c_str()); r < 0) {
      return make_error(Errc::device, fmt::format("cannot open device {} to look for a LUKS "
                                                  "header: {}",
                                                  path, std::strerror(-r)));
    }
    const detail::CryptDevice cd(raw);
    const int r = crypt_load(cd.get(), CRYPT_LUKS, nullptr);
    if (r == 0) {
      return true;
    }
    if (r == -EINVAL || r == -ENOENT) {
      return false;
    }
    return make_error(Errc::device, fmt::format("cannot read device {} to look for a LUKS header: "
                                                "{}",
                                                path, std::strerror(-r)));
  }

  std::string resolve(std::string_view major_minor) override {
    std::error_code ec;
    const auto link = std::filesystem::read_symlink(
        std::filesystem::path("/sys/dev/block") / std::string(major_minor), ec);
    if (ec) {
      return std::string(major_minor);
    }
    return "/dev/" + link.filename().string();
  }

  bool is_regular_file(const std::string &path) override {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }

  Result<LoopDevice> attach_loop(const std::string &file, bool read_only) override {
    const int mode = read_only ? O_RDONLY : O_RDWR;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
    const FileDescriptor backing(open(file.c_str(), mode | O_CLOEXEC));
    if (backing.get() < 0) {
      return make_error(Errc::device,
                        fmt::format("Cannot use device {}: {}; a loop device needs "
                                    "it readable{}",
                                    file, std::strerror(errno), read_only ? "" : " and writable"));
    }
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
    const FileDescriptor control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
    if (control.get() < 0) {
      return make_error(Errc::device,
                        fmt::format("cannot attach a loop device to {}: /dev/loop-control: {} "
                                    "(load the loop module)",
                                    file, std::strerror(errno)));
    }
    // Another process may take the free device first: try a few times.
    for (int attempt = 0; attempt < 8; ++attempt) {
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
      const int number = ioctl(control.get(), LOOP_CTL_GET_FREE);
      if (number < 0) {
        break;
      }
      const std::string path = fmt::format("/dev/loop{}", number);
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
      const int loop_fd = open(path.c_str(), mode | O_CLOEXEC);
      if (loop_fd < 0) {
        continue;
      }
      auto hold = std::shared_ptr<int>(new int(loop_fd), [](const int *fd) {
        close(*fd);
        delete fd;  // NOLINT(cppcoreguidelines-owning-memory)
      });
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
      if (ioctl(loop_fd, LOOP_SET_FD, backing.get()) != 0) {
        if (errno == EBUSY) {
          continue;
        }
        return make_error(Errc::device, fmt::format("cannot attach {} to {}: {}", path, file,
                                                    std::strerror(errno)));
      }
      loop_info64 info{};
      info.lo_flags = static_cast<std::uint32_t>(LO_FLAGS_AUTOCLEAR) |
                      (read_only ? static_cast<std::uint32_t>(LO_FLAGS_READ_ONLY) : 0U);
      const std::string name = std::filesystem::absolute(file).string();
      std::strncpy(reinterpret_cast<char *>(info.lo_file_name),  // NOLINT(*-reinterpret-cast)
                   name.c_str(), LO_NAME_SIZE - 1);
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
      if (ioctl(loop_fd, LOOP_SET_STATUS64, &info) != 0) {
        const int saved = errno;
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
        static_cast<void>(ioctl(loop_fd, LOOP_CLR_FD, 0));
        return make_error(Errc::device, fmt::format("cannot set up {} for {}: {}", path, file,
                                                    std::strerror(saved)));
      }
      return LoopDevice{path, std::move(hold)};
    }
    return make_error(Errc::device,
                      fmt::format("no free loop device for {}: {}", file, std::strerror(errno)));
  }

  std::optional<std::string> user_of(const std::string &path) override {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) {
      return std::nullopt;
    }
    const auto holders = block_device_holders("/sys", major(st.st_rdev), minor(st.st_rdev));
    if (!holders.empty()) {
      return fmt::format("{}", fmt::join(holders, ", "));
    }
    // Mounted filesystems and exclusive openers (mkfs, another cryptsetup) show no holder.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
    const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC));
    if (fd.get() < 0 && errno == EBUSY) {
      return "a mounted filesystem or a program that opened it exclusively";
    }
    return std::nullopt;
  }

  std::optional<std::string> loop_backing_file(const std::string &device) override {
    const std::string base = std::filesystem::path(device).filename().string();
    if (base.rfind("loop", 0) != 0) {
      return std::nullopt;
    }
    std::ifstream in("/sys/block/" + base + "/loop/backing_file");
    std::string line;
    if (!in || !std::getline(in, line) || line.empty()) {
      return std::nullopt;
    }
    return line;
  }

  std::optional<WriteGeometry> write_geometry(const std::string &device) override {
    const auto page = sysconf(_SC_PAGESIZE);
    const std::uint64_t page_size = page > 0 ? static_cast<std::uint64_t>(page) : 0;
    // the kernel's table names the device as MAJOR:MINOR
    if (const auto colon = device.find(':'); colon != std::string::npos) {
      const std::string_view text(device);
      const auto dev_major = parse_decimal_u32(text.substr(0, colon));
      const auto dev_minor = parse_decimal_u32(text.substr(colon + 1));
      if (dev_major && dev_minor) {
        return read_write_geometry("/sys", *dev_major, *dev_minor, page_size);
      }
    }
    struct stat st {};
    if (stat(device.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) {
      return std::nullopt;
    }
    return read_write_geometry("/sys", major(st.st_rdev), minor(st.st_rdev), page_size);
  }
};

// The unsigned number a sysfs file holds; nullopt when it is absent or holds none.
std::optional<std::uint64_t> sysfs_number(const std::filesystem::path &file) {
  std::ifstream in(file);
  std::uint64_t value = 0;
  if (!in || !(in >> value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::string_view describe(PathKind kind) {
  switch (kind) {
    case PathKind::missing:
      return "missing";
    case PathKind::block_device:
      return "a block device";
    case PathKind::regular_file:
      return "a regular file";
    case PathKind::directory:
      return "a directory";
    case PathKind::character_device:
      return "a character device";
    case PathKind::other:
      break;
  }
  return "neither a block device nor a regular file";
}

std::vector<std::string> block_device_holders(const std::filesystem::path &sysfs,
                                              std::uint32_t major, std::uint32_t minor) {
  std::vector<std::string> holders;
  std::error_code ec;
  const auto dir = sysfs / "dev" / "block" / fmt::format("{}:{}", major, minor) / "holders";
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string holder = entry.path().filename().string();
    std::ifstream name_file(entry.path() / "dm" / "name");
    std::string name;
    if (name_file && std::getline(name_file, name) && !name.empty()) {
      holders.push_back(fmt::format("device-mapper mapping {} ({})", name, holder));
    } else {
      holders.push_back(holder);
    }
  }
  std::sort(holders.begin(), holders.end());
  return holders;
}

std::optional<WriteGeometry> read_write_geometry(const std::filesystem::path &sysfs,
                                                 std::uint32_t major, std::uint32_t minor,
                                                 std::uint64_t page_size) {
  const auto dir = sysfs / "dev" / "block" / fmt::format("{}:{}", major, minor);
  WriteGeometry g;
  const auto start = sysfs_number(dir / "start");
  g.start = start.value_or(0);
  // a partition has no queue of its own: its disk's is one directory up (through the link)
  const auto queue = start ? dir / ".." / "queue" : dir / "queue";
  const auto physical = sysfs_number(queue / "physical_block_size");
  if (!physical) {
    return std::nullopt;
  }
  g.physical_block = *physical;
  g.atomic_unit_min = sysfs_number(queue / "atomic_write_unit_min_bytes").value_or(0);
  g.atomic_unit_max = sysfs_number(queue / "atomic_write_unit_max_bytes").value_or(0);
  g.atomic_max = sysfs_number(queue / "atomic_write_max_bytes").value_or(0);
  g.atomic_boundary = sysfs_number(queue / "atomic_write_boundary_bytes").value_or(0);
  const auto segments = sysfs_number(queue / "max_segments");
  const auto segment_size = sysfs_number(queue / "max_segment_size");
  if (segments && segment_size && page_size != 0) {
    g.segment_bytes = *segments * std::min(page_size, *segment_size);
  }
  std::ifstream zoned(queue / "zoned");
  std::string model;
  g.zoned = zoned && (zoned >> model) && model != "none";
  return g;
}

std::unique_ptr<BlockDevices> make_system_block_devices() {
  return std::make_unique<SystemBlockDevices>();
}

}  // namespace lbscrypt
