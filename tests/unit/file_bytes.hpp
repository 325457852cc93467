// SPDX-License-Identifier: GPL-2.0-only
// A file's bytes read and written directly, as a torn write, another disk or a hand with a hex
// editor would leave them, and the unkeyed checksums anyone can make right again.
#pragma once

#include <openssl/evp.h>
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace lbscrypt::test {

using FileBytes = std::vector<std::uint8_t>;

inline FileBytes file_bytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return {all.begin(), all.end()};
}

inline FileBytes file_range(const std::filesystem::path &path, std::size_t offset,
                            std::size_t size) {
  const FileBytes all = file_bytes(path);
  REQUIRE(all.size() >= offset + size);
  return {all.begin() + static_cast<std::ptrdiff_t>(offset),
          all.begin() + static_cast<std::ptrdiff_t>(offset + size)};
}

// Overwrites bytes in place.
inline void put_bytes(const std::filesystem::path &path, std::size_t offset,
                      const FileBytes &bytes) {
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  REQUIRE(out.good());
  out.seekp(static_cast<std::streamoff>(offset));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  const auto *chars = reinterpret_cast<const char *>(bytes.data());
  out.write(chars, static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::array<std::uint8_t, 32> sha256_of(std::span<const std::uint8_t> bytes) {
  std::array<std::uint8_t, 32> digest{};
  unsigned int size = 0;
  REQUIRE(EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) == 1);
  return digest;
}

// A journal slot's closing SHA-256 of bytes [0, 4064) made right again after an edit.
inline void reseal_slot_checksum(FileBytes &slot) {
  REQUIRE(slot.size() == 4096);
  const auto digest = sha256_of(std::span(slot).first(4064));
  std::copy(digest.begin(), digest.end(), slot.begin() + 4064);
}

}  // namespace lbscrypt::test
