// SPDX-License-Identifier: GPL-2.0-only
// The real I/O of an offline reencrypt run (reencrypt/io.hpp): the device's raw bytes, its
// plaintext through a read-only mapping with the old parameters, and a read-write mapping
// with the new ones. Never unit-tested on the host (no device-mapper there): the guest's
// power-cut tests run it.
#include "lbscrypt/reencrypt/io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

// O_DIRECT wants the memory aligned to the logical block (at most 64 KiB here) on older
// kernels; a caller's span that is not is copied through a bounce buffer this large (a
// multiple of every sector size, so each piece stays whole sectors).
constexpr std::size_t kReencIoAlign = 65536;
constexpr std::size_t kReencBounceBytes = std::size_t{1} << 20;
constexpr unsigned kReencRemoveRetries = 5;
constexpr std::chrono::milliseconds kReencRemoveDelay{200};
constexpr std::size_t kReencRunIdChars = 32;
constexpr std::size_t kReencNameIdChars = 16;

constexpr std::array<const char *, 2> kReencSideWords{"old", "new"};

SecretBuffer reenc_table_params(const ReencryptState &state, const CryptSide &side,
                                const SecretBuffer &key) {
  CryptTable table;
  table.length = state.data_bytes / 512;
  table.cipher = side.cipher;
  table.key = key;
  table.iv_offset = state.skip;
  table.device = state.device;
  table.offset = state.offset;
  table.options.iv_large_sectors = side.iv_large_sectors;
  if (side.sector_size != kDefaultSectorSize) {
    table.options.sector_size_arg = std::to_string(side.sector_size);
  }
  return format_table_params(table);
}

Result<void> reenc_check_request(const ReencryptState &state, const SecretBuffer &old_key,
                                 const SecretBuffer &new_key) {
  const bool hex = std::all_of(state.run_id.begin(), state.run_id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (state.run_id.size() != kReencRunIdChars || !hex) {
    return make_error(Errc::invalid_argument,
                      fmt::format("the run id '{}' is not 32 lower-case hex digits: the state "
                                  "file is damaged",
                                  printable(state.run_id)));
  }
  if (state.data_bytes == 0 || state.data_bytes % 512 != 0) {
    return make_error(Errc::invalid_argument,
                      fmt::format("the data's {} bytes are not a positive multiple of 512: the "
                                  "state file is damaged",
                                  state.data_bytes));
  }
  if (auto r = check_table_word("device", state.device); !r) {
    return r.error();
  }
  for (const auto *side : {&state.old_side, &state.new_side}) {
    if (auto r = check_table_word("cipher", side->cipher); !r) {
      return r.error();
    }
  }
  if (old_key.size() != state.old_side.key_bytes || new_key.size() != state.new_side.key_bytes) {
    const bool old_wrong = old_key.size() != state.old_side.key_bytes;
    return make_error(
        Errc::key,
        fmt::format("the {} key has {} bytes where the run's {} cipher "
                    "takes {}: give the key the run was started with",
                    old_wrong ? "old" : "new", old_wrong ? old_key.size() : new_key.size(),
                    old_wrong ? "old" : "new",
                    old_wrong ? state.old_side.key_bytes : state.new_side.key_bytes));
  }
  return Ok{};
}

class ReencDeviceIo final : public DeviceReencryptIo {
 public:
  ReencDeviceIo(Kernel &kernel, const ReencryptState &state)
      : kernel_(&kernel),
        device_(state.device),
        device_base_(state.offset * 512),
        data_bytes_(state.data_bytes),
        run_id_(state.run_id) {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      names_.at(i) = reencrypt_mapping_name_prefix(run_id_) + kReencSideWords.at(i);
    }
  }
  ReencDeviceIo(const ReencDeviceIo &) = delete;
  ReencDeviceIo &operator=(const ReencDeviceIo &) = delete;
  ReencDeviceIo(ReencDeviceIo &&) = delete;
  ReencDeviceIo &operator=(ReencDeviceIo &&) = delete;
  ~ReencDeviceIo() override {
    static_cast<void>(close_all());
    if (bounce_ != nullptr) {
      // It carried old ciphertext and plaintext.
      secure_wipe(bounce_, kReencBounceBytes);
      ::operator delete (bounce_, std::align_val_t{kReencIoAlign});
    }
  }

  Result<void> setup(const ReencryptState &state, const SecretBuffer &old_key,
                     const SecretBuffer &new_key, std::string_view target_type) {
    const std::array<std::pair<const CryptSide *, const SecretBuffer *>, 2> sides{
        {{&state.old_side, &old_key}, {&state.new_side, &new_key}}};
    for (std::size_t i = 0; i < sides.size(); ++i) {
      if (auto r = remove_leftover(i); !r) {
        return r;
      }
      CreateRequest request;
      request.name = names_.at(i);
      request.uuid = uuid(i);
      request.target_type = std::string(target_type);
      request.length = data_bytes_ / 512;
      request.params = reenc_table_params(state, *sides.at(i).first, *sides.at(i).second);
      request.read_only = i == 0;  // the old side is only read
      request.private_device = true;
      const auto made = kernel_->create(request);
      if (!made) {
        return made.error();
      }
      made_.at(i) = true;
      nodes_.at(i) = made->dm_node();
    }
    if (auto r = open_fd(raw_fd_, device_, O_RDWR); !r) {
      return r;
    }
    if (auto r = open_fd(old_fd_, nodes_.at(0), O_RDONLY); !r) {
      return r;
    }
    return open_fd(new_fd_, nodes_.at(1), O_RDWR);
  }

  [[nodiscard]] std::string old_node() const override { return nodes_.at(0); }

  Result<void> read_raw(std::uint64_t position, std::span<std::uint8_t> out) override {
    return transfer(raw_fd_, "read the device's raw bytes", {device_base_, position},
                    {out.data(), nullptr, out.size()});
  }
  Result<void> write_raw(std::uint64_t position, std::span<const std::uint8_t> data) override {
    return transfer(raw_fd_, "write the device's raw bytes", {device_base_, position},
                    {nullptr, data.data(), data.size()});
  }
  Result<void> read_old(std::uint64_t position, std::span<std::uint8_t> out) override {
    return transfer(old_fd_, "read through the old parameters", {0, position},
                    {out.data(), nullptr, out.size()});
  }
  Result<void> write_new(std::uint64_t position, std::span<const std::uint8_t> data) override {
    return transfer(new_fd_, "write through the new parameters", {0, position},
                    {nullptr, data.data(), data.size()});
  }
  Result<void> read_new(std::uint64_t position, std::span<std::uint8_t> out) override {
    return transfer(new_fd_, "read through the new parameters", {0, position},
                    {out.data(), nullptr, out.size()});
  }

  Result<void> flush() override {
    for (const auto &[fd, what] :
         {std::pair{new_fd_, "the new mapping"}, std::pair{raw_fd_, "the device"}}) {
      if (fd < 0) {
        return closed_error("flush");
      }
      if (fdatasync(fd) != 0) {
        const int error = errno;
        return make_error(Errc::device,
                          fmt::format("cannot flush {} ({}): {}", what,
                                      fd == raw_fd_ ? device_ : nodes_.at(1), std::strerror(error)),
                          error);
      }
    }
    return Ok{};
  }

  Result<void> close() override { return close_all(); }

 private:
  Result<void> close_all() {
    for (int *fd : {&raw_fd_, &old_fd_, &new_fd_}) {
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
    }
    std::optional<Error> first_failure;
    // The new mapping first: it is the one written through.
    for (const std::size_t i : {std::size_t{1}, std::size_t{0}}) {
      if (!made_.at(i)) {
        continue;
      }
      auto removed = remove_mapping(names_.at(i));
      if (removed || removed.error().code == Errc::not_found) {
        made_.at(i) = false;
      } else if (!first_failure) {
        first_failure = removed.error();
      }
    }
    if (first_failure) {
      return *first_failure;
    }
    return Ok{};
  }

  [[nodiscard]] std::string uuid(std::size_t side) const {
    return reencrypt_mapping_uuid_prefix(run_id_) + kReencSideWords.at(side);
  }

  // A mapping of this run that a killed process left behind goes first; a mapping of that name
  // with another UUID is not ours.
  Result<void> remove_leftover(std::size_t side) {
    const std::string &name = names_.at(side);
    const auto info = kernel_->info(name);
    if (!info) {
      return info.error().code == Errc::not_found ? Result<void>(Ok{}) : Result<void>(info.error());
    }
    if (info->uuid != uuid(side)) {
      return make_error(Errc::exists,
                        fmt::format("a device-mapper device named {} exists and is not this "
                                    "run's (UUID '{}'): remove it with dmsetup remove {}",
                                    name, printable(info->uuid), name));
    }
    return remove_mapping(name);
  }

  Result<void> remove_mapping(const std::string &name) {
    return remove_reencrypt_mapping(*kernel_, name);
  }

  static Result<void> open_fd(int &fd, const std::string &path, int mode) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
    fd = ::open(path.c_str(), mode | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      return make_error(
          Errc::device,
          fmt::format("cannot open {} for {}: {}", path,
                      mode == O_RDONLY ? "reading" : "reading and writing", std::strerror(error)),
          error);
    }
    return Ok{};
  }

  [[nodiscard]] static Error closed_error(std::string_view what) {
    return make_error(Errc::device,
                      fmt::format("cannot {}: the reencrypt devices are already closed", what));
  }

  // Where a transfer goes: base (the device's data offset, or 0 on a mapping) + position.
  struct Place {
    std::uint64_t base = 0;
    std::uint64_t position = 0;
  };
  // What it moves: into `out` (a read) or from `in` (a write).
  struct Buffer {
    std::uint8_t *out = nullptr;
    const std::uint8_t *in = nullptr;
    std::size_t size = 0;
  };

  // pread or pwrite of the whole buffer, through the bounce buffer when the caller's memory
  // is not aligned for O_DIRECT.
  Result<void> transfer(int fd, std::string_view what, Place place, Buffer buffer) {
    if (fd < 0) {
      return closed_error(what);
    }
    if (place.position > data_bytes_ || buffer.size > data_bytes_ - place.position) {
      return make_error(Errc::invalid_argument,
                        fmt::format("cannot {} at {} ({} bytes): beyond the data's {} bytes", what,
                                    place.position, buffer.size, data_bytes_));
    }
    const void *memory = buffer.out != nullptr ? static_cast<const void *>(buffer.out) : buffer.in;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    if (reinterpret_cast<std::uintptr_t>(memory) % kReencIoAlign == 0) {
      return transfer_aligned(fd, what, place, buffer);
    }
    if (bounce_ == nullptr) {
      bounce_ = static_cast<std::uint8_t *>(
          ::operator new (kReencBounceBytes, std::align_val_t{kReencIoAlign}, std::nothrow));
      if (bounce_ == nullptr) {
        return make_error(Errc::device, fmt::format("cannot {}: no memory for a buffer of {} "
                                                    "bytes",
                                                    what, kReencBounceBytes));
      }
    }
    for (std::size_t done = 0; done < buffer.size;) {
      const std::size_t piece = std::min(kReencBounceBytes, buffer.size - done);
      const Place at{place.base, place.position + done};
      if (buffer.in != nullptr) {
        std::memcpy(bounce_, buffer.in + done, piece);
        if (auto r = transfer_aligned(fd, what, at, {nullptr, bounce_, piece}); !r) {
          return r;
        }
      } else {
        if (auto r = transfer_aligned(fd, what, at, {bounce_, nullptr, piece}); !r) {
          return r;
        }
        std::memcpy(buffer.out + done, bounce_, piece);
      }
      done += piece;
    }
    return Ok{};
  }

  Result<void> transfer_aligned(int fd, std::string_view what, Place place, Buffer buffer) const {
    for (std::size_t done = 0; done < buffer.size;) {
      const auto at = static_cast<off_t>(place.base + place.position + done);
      const std::size_t left = buffer.size - done;
      const ssize_t n = buffer.in != nullptr ? ::pwrite(fd, buffer.in + done, left, at)
                                             : ::pread(fd, buffer.out + done, left, at);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        const int error = n < 0 ? errno : 0;
        const std::string &path = fd == raw_fd_ ? device_ : nodes_.at(fd == old_fd_ ? 0 : 1);
        return make_error(Errc::device,
                          fmt::format("cannot {} at position {} ({} bytes) on {}: {}", what,
                                      place.position + done, left, path,
                                      error != 0 ? std::strerror(error) : "the device ended early"),
                          error);
      }
      done += static_cast<std::size_t>(n);
    }
    return Ok{};
  }

  Kernel *kernel_;
  std::string device_;
  std::uint64_t device_base_;
  std::uint64_t data_bytes_;
  std::string run_id_;
  std::array<std::string, 2> names_;
  std::array<std::string, 2> nodes_;
  std::array<bool, 2> made_{false, false};
  int raw_fd_ = -1;
  int old_fd_ = -1;
  int new_fd_ = -1;
  std::uint8_t *bounce_ = nullptr;
};

}  // namespace

std::string reencrypt_mapping_name_prefix(std::string_view run_id) {
  return fmt::format("lbscrypt-reenc-{}-", run_id.substr(0, kReencNameIdChars));
}

std::string reencrypt_mapping_uuid_prefix(std::string_view run_id) {
  return fmt::format("LBSCRYPT-REENC-{}-", run_id);
}

Result<void> remove_reencrypt_mapping(Kernel &kernel, const std::string &name) {
  for (unsigned attempt = 0;; ++attempt) {
    auto removed = kernel.remove(name);
    if (removed || removed.error().code != Errc::busy) {
      return removed;
    }
    if (attempt >= kReencRemoveRetries) {
      return make_error(Errc::busy,
                        fmt::format("the reencrypt mapping {} is still in use and was not "
                                    "removed: remove it with dmsetup remove {}",
                                    name, name));
    }
    std::this_thread::sleep_for(kReencRemoveDelay);
  }
}

Result<std::unique_ptr<DeviceReencryptIo>> open_reencrypt_io(Kernel &kernel,
                                                             const ReencryptState &state,
                                                             const SecretBuffer &old_key,
                                                             const SecretBuffer &new_key,
                                                             std::string_view target_type) {
  if (auto r = reenc_check_request(state, old_key, new_key); !r) {
    return r.error();
  }
  auto io = std::make_unique<ReencDeviceIo>(kernel, state);
  if (auto r = io->setup(state, old_key, new_key, target_type); !r) {
    Error error = r.error();
    if (auto closed = io->close(); !closed) {
      error.message += "; and " + closed.error().message;
    }
    return error;
  }
  return std::unique_ptr<DeviceReencryptIo>(std::move(io));
}

}  // namespace lbscrypt
