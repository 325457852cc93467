// SPDX-License-Identifier: GPL-2.0-only
// Questions about the backing block device: its size, whether it holds a LUKS header, and
// the path behind a major:minor. An interface so the commands are tested with a fake.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lbscrypt/result.hpp"

namespace lbscrypt {

class BlockDevices {
 public:
  BlockDevices() = default;
  BlockDevices(const BlockDevices &) = delete;
  BlockDevices &operator=(const BlockDevices &) = delete;
  BlockDevices(BlockDevices &&) = delete;
  BlockDevices &operator=(BlockDevices &&) = delete;
  virtual ~BlockDevices() = default;

  // Size in bytes of a block device or regular file. Errc::device when it cannot be opened.
  [[nodiscard]] virtual Result<std::uint64_t> size_bytes(const std::string &path) = 0;
  // True when libcryptsetup finds a LUKS1 or LUKS2 header.
  [[nodiscard]] virtual Result<bool> has_luks_header(const std::string &path) = 0;
  // "/dev/NAME" for "MAJOR:MINOR" when sysfs knows it, else the argument unchanged.
  [[nodiscard]] virtual std::string resolve(std::string_view major_minor) = 0;
};

[[nodiscard]] std::unique_ptr<BlockDevices> make_system_block_devices();

}  // namespace lbscrypt
