// SPDX-License-Identifier: GPL-2.0-only
// dm-crypt cipher specification: cipher[:keycount]-chainmode-ivmode[:ivopts] or
// capi:<crypto api spec>-ivmode[:ivopts].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lbscrypt/result.hpp"

namespace lbscrypt {

struct CipherSpec {
  bool capi = false;           // "capi:" form: `cipher` holds the crypto API spec, e.g. xts(aes)
  std::string cipher;          // aes, serpent, ... (or the capi spec)
  std::uint32_t keycount = 1;  // ":keycount" suffix (1 when absent)
  std::string chainmode;       // xts, cbc, ecb, ... (empty for capi)
  std::string ivmode;          // plain64, essiv, ... (may be empty: "ecb" has none)
  std::string ivopts;          // essiv:<hash> -> "sha256"

  // Canonical text, as the kernel prints it back.
  [[nodiscard]] std::string to_string() const;
};

[[nodiscard]] Result<CipherSpec> parse_cipher_spec(std::string_view text);

}  // namespace lbscrypt
