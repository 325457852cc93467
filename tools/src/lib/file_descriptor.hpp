// SPDX-License-Identifier: GPL-2.0-only
// A file descriptor owned by one object and closed once (the library's private helper).
#pragma once

#include <unistd.h>

namespace lbscrypt::detail {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  FileDescriptor(FileDescriptor &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
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

}  // namespace lbscrypt::detail
