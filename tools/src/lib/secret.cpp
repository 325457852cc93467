// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/secret.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace lbscrypt {

void secure_wipe(void *data, std::size_t size) noexcept {
  if (data != nullptr && size != 0) {
    explicit_bzero(data, size);
  }
}

SecretBuffer::SecretBuffer(std::size_t size) : size_(size) { reserve(size); }

SecretBuffer::SecretBuffer(const void *data, std::size_t size) : SecretBuffer(size) {
  if (size != 0) {
    std::memcpy(data_, data, size);
  }
}

SecretBuffer::~SecretBuffer() { release(); }

SecretBuffer::SecretBuffer(const SecretBuffer &other) : SecretBuffer(other.data_, other.size_) {}

SecretBuffer &SecretBuffer::operator=(const SecretBuffer &other) {
  if (this != &other) {
    SecretBuffer copy(other);
    *this = std::move(copy);
  }
  return *this;
}

SecretBuffer::SecretBuffer(SecretBuffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      locked_(std::exchange(other.locked_, false)) {}

SecretBuffer &SecretBuffer::operator=(SecretBuffer &&other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

void SecretBuffer::release() noexcept {
  if (data_ == nullptr) {
    return;
  }
  secure_wipe(data_, capacity_);
  if (locked_) {
    munlock(data_, capacity_);
  }
  std::free(data_);  // NOLINT(cppcoreguidelines-no-malloc)
  data_ = nullptr;
  size_ = capacity_ = 0;
  locked_ = false;
}

void SecretBuffer::reserve(std::size_t capacity) {
  if (capacity <= capacity_) {
    return;
  }
  // Whole pages of its own, so unlocking one secret never unlocks a neighbour's page.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  capacity = (capacity + page - 1) / page * page;
  // NOLINTNEXTLINE(cppcoreguidelines-no-malloc)
  auto *fresh = static_cast<std::uint8_t *>(std::aligned_alloc(page, capacity));
  if (fresh == nullptr) {
    throw std::bad_alloc();
  }
  std::memset(fresh, 0, capacity);
  // Best effort: without CAP_IPC_LOCK a tight RLIMIT_MEMLOCK may refuse; locked() tells.
  const bool fresh_locked = mlock(fresh, capacity) == 0;
  if (data_ != nullptr) {
    std::memcpy(fresh, data_, size_);
  }
  const std::size_t keep = size_;
  release();
  data_ = fresh;
  size_ = keep;
  capacity_ = capacity;
  locked_ = fresh_locked;
}

void SecretBuffer::truncate(std::size_t size) {
  if (size < size_) {
    secure_wipe(data_ + size, size_ - size);
    size_ = size;
  }
}

void SecretBuffer::append(const void *data, std::size_t size) {
  if (size == 0) {
    return;
  }
  if (size_ + size > capacity_) {
    reserve(std::max<std::size_t>({size_ + size, capacity_ * 2, 64}));
  }
  std::memcpy(data_ + size_, data, size);
  size_ += size;
}

void SecretBuffer::append(std::string_view text) { append(text.data(), text.size()); }

std::string_view SecretBuffer::view() const {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  return {reinterpret_cast<const char *>(data_), size_};
}

bool SecretBuffer::operator==(const SecretBuffer &other) const {
  return size_ == other.size_ && (size_ == 0 || std::memcmp(data_, other.data_, size_) == 0);
}

SecretBuffer to_hex(const SecretBuffer &key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  SecretBuffer hex(key.size() * 2);
  for (std::size_t i = 0; i < key.size(); ++i) {
    hex.data()[2 * i] = static_cast<std::uint8_t>(kDigits[key.data()[i] >> 4U]);
    hex.data()[2 * i + 1] = static_cast<std::uint8_t>(kDigits[key.data()[i] & 0xfU]);
  }
  return hex;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}
}  // namespace

bool from_hex(std::string_view hex, SecretBuffer &out) {
  if (hex.size() % 2 != 0) {
    return false;
  }
  SecretBuffer bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return false;
    }
    bytes.data()[i] = static_cast<std::uint8_t>((hi << 4) | lo);
  }
  out = std::move(bytes);
  return true;
}

}  // namespace lbscrypt
