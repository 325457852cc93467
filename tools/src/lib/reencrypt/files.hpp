// SPDX-License-Identifier: GPL-2.0-only
// The file handling the reencrypt state file and its journal share (the library's private
// helpers): whole reads and writes that survive EINTR and short counts, the fsync of a file's
// directory, and errors that name the file and say what to do.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "file_descriptor.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt::detail {

// Writes all of `data` at `offset`: 0, or the errno of the failed pwrite.
inline int pwrite_full(int fd, std::span<const std::uint8_t> data, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    if (n == 0) {
      return EIO;  // a regular file never takes nothing; do not spin
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// Reads all of `out` from `offset`: 0, ENODATA when the file ends first, or the errno of the
// failed pread.
inline int pread_full(int fd, std::span<std::uint8_t> out, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    if (n == 0) {
      return ENODATA;
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// fsync of the directory holding `file`, so a create, rename or unlink in it is durable: 0 or
// the errno.
inline int fsync_parent_directory(const std::filesystem::path &file) {
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) {
    dir = ".";
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const FileDescriptor fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return errno;
  }
  return fsync(fd.get()) == 0 ? 0 : errno;
}

// fsync of a file's bytes (before a rename makes it another file's content): 0 or the errno.
inline int fsync_file(const std::filesystem::path &file) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const FileDescriptor fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return errno;
  }
  return fsync(fd.get()) == 0 ? 0 : errno;
}

// What a file that is not a regular one is, for an error message.
inline std::string_view file_kind_name(mode_t mode) {
  if (S_ISLNK(mode)) {
    return "a symbolic link";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  return "not a regular file";
}

// A state or journal path that exists and is not a regular file: refused, saying what it is.
inline Error not_regular_file_error(const std::filesystem::path &file, mode_t mode) {
  return make_error(Errc::invalid_argument,
                    fmt::format("{} is {}: lbscrypt reencrypt keeps its state and journal in "
                                "regular files only; give another path",
                                printable(file.string()), file_kind_name(mode)));
}

// The error of a failed call on a file of the state filesystem: `what` says what was being
// done ("write the journal"). A full filesystem says so first: it is the one the user fixes.
inline Error state_file_error(std::string_view what, const std::filesystem::path &file, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return make_error(Errc::device,
                      fmt::format("the state filesystem is full: cannot {} {} ({}): free space "
                                  "there and run the command again (a run resumes with --resume)",
                                  what, printable(file.string()), std::strerror(err)),
                      err);
  }
  if (err == EACCES || err == EPERM) {
    return make_error(Errc::permission,
                      fmt::format("cannot {} {}: {}: run as root or give a state file you may "
                                  "write",
                                  what, printable(file.string()), std::strerror(err)),
                      err);
  }
  if (err == ENODATA) {
    return make_error(Errc::device,
                      fmt::format("cannot {} {}: the file is shorter than it was written", what,
                                  printable(file.string())),
                      err);
  }
  return make_error(
      Errc::device,
      fmt::format("cannot {} {}: {}", what, printable(file.string()), std::strerror(err)), err);
}

// Lower-case hex of exactly `bytes` bytes; nullopt for anything else (upper case too).
inline std::optional<std::vector<std::uint8_t>> lower_hex_bytes(std::string_view text,
                                                                std::size_t bytes) {
  if (text.size() != bytes * 2) {
    return std::nullopt;
  }
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    return -1;
  };
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    const int high = nibble(text[2 * i]);
    const int low = nibble(text[2 * i + 1]);
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    out[i] = static_cast<std::uint8_t>((high << 4) | low);
  }
  return out;
}

// Unlinks a file this run created when what made it fails before keep() (a temporary, or a
// journal half created), so the next attempt can create it again.
class UnlinkOnFailure {
 public:
  explicit UnlinkOnFailure(std::filesystem::path path) : path_(std::move(path)) {}
  UnlinkOnFailure(const UnlinkOnFailure &) = delete;
  UnlinkOnFailure &operator=(const UnlinkOnFailure &) = delete;
  UnlinkOnFailure(UnlinkOnFailure &&) = delete;
  UnlinkOnFailure &operator=(UnlinkOnFailure &&) = delete;
  ~UnlinkOnFailure() {
    if (armed_) {
      unlink(path_.c_str());
    }
  }
  void keep() { armed_ = false; }
  [[nodiscard]] const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool armed_ = true;
};

}  // namespace lbscrypt::detail
