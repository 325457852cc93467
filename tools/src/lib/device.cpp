// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/device.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cryptsetup_handle.hpp"

namespace lbscrypt {

namespace {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  FileDescriptor(FileDescriptor &&) = delete;
  FileDescriptor &operator=(FileDescriptor &&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

class SystemBlockDevices final : public BlockDevices {
 public:
  Result<std::uint64_t> size_bytes(const std::string &path) override {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
    const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      return make_error(Errc::device,
                        fmt::format("cannot open device {}: {}", path, std::strerror(errno)));
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
};

}  // namespace

std::unique_ptr<BlockDevices> make_system_block_devices() {
  return std::make_unique<SystemBlockDevices>();
}

}  // namespace lbscrypt
