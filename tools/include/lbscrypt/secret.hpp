// SPDX-License-Identifier: GPL-2.0-only
// Key material: kept in memory locked against swapping, wiped when released, never printed
// except on explicit request (hex for a table line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lbscrypt {

class SecretBuffer {
 public:
  SecretBuffer() = default;
  explicit SecretBuffer(std::size_t size);
  SecretBuffer(const void *data, std::size_t size);
  ~SecretBuffer();

  SecretBuffer(const SecretBuffer &other);
  SecretBuffer &operator=(const SecretBuffer &other);
  SecretBuffer(SecretBuffer &&other) noexcept;
  SecretBuffer &operator=(SecretBuffer &&other) noexcept;

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] std::uint8_t *data() { return data_; }
  [[nodiscard]] const std::uint8_t *data() const { return data_; }
  [[nodiscard]] std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  // True when the pages holding the secret are locked (mlock succeeded).
  [[nodiscard]] bool locked() const { return locked_; }

  // Shrinks the visible size; the dropped tail is wiped at once.
  void truncate(std::size_t size);
  // Appends bytes; on growth the old storage is wiped before it is freed.
  void append(std::string_view text);
  void append(const void *data, std::size_t size);
  // The contents as text (for table lines that carry a key).
  [[nodiscard]] std::string_view view() const;

  [[nodiscard]] bool operator==(const SecretBuffer &other) const;

 private:
  void release() noexcept;

  std::uint8_t *data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  void reserve(std::size_t capacity);
  bool locked_ = false;
};

// Lower-case hex as dm-crypt prints keys. The result is itself a secret.
[[nodiscard]] SecretBuffer to_hex(const SecretBuffer &key);
// Parses hex (either case); nullopt-like empty result with ok=false on bad input.
[[nodiscard]] bool from_hex(std::string_view hex, SecretBuffer &out);
// Wipes memory in a way the compiler cannot drop.
void secure_wipe(void *data, std::size_t size) noexcept;

}  // namespace lbscrypt
