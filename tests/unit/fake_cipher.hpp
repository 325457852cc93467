// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt tests' fake cipher (engine, run and online), simple enough to check by hand
// (reencrypt_engine_test.cpp does, "the fake cipher by hand"). Byte j of a sector whose IV is
// iv, under the key byte k, is XORed with
//   (k + 29 iv + 7 j + j / 256) mod 256,
// so encrypting and decrypting are the same. The IV is counted as dm-crypt counts it: skip plus
// the sector's start in 512-byte units, divided by the sector's 512-byte units with
// iv_large_sectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lbscrypt/reencrypt/core.hpp"

namespace lbscrypt::test {

inline std::uint8_t fake_keystream(std::uint8_t key, std::uint64_t iv, std::uint64_t j) {
  return static_cast<std::uint8_t>((key + 29 * iv + 7 * j + j / 256) % 256);
}

inline std::uint64_t fake_iv(const CryptSide &side, std::uint64_t skip,
                             std::uint64_t sector_start) {
  const std::uint64_t iv = skip + sector_start / 512;
  return side.iv_large_sectors ? iv / (side.sector_size / 512) : iv;
}

// bytes hold whole sectors starting at data byte `position`.
inline void fake_crypt(const CryptSide &side, std::uint8_t key, std::uint64_t skip,
                       std::uint64_t position, std::span<std::uint8_t> bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::uint64_t at = position + i;
    const std::uint64_t start = at - at % side.sector_size;
    bytes[i] ^= fake_keystream(key, fake_iv(side, skip, start), at - start);
  }
}

}  // namespace lbscrypt::test
