// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/cipher.hpp"

#include <fmt/format.h>

#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

constexpr std::string_view kCapiPrefix = "capi:";

Error bad_cipher(std::string_view text, std::string_view why) {
  return make_error(Errc::invalid_argument,
                    fmt::format("invalid cipher '{}': {} (expected cipher[:keycount]-chainmode-"
                                "ivmode[:ivopts] or capi:spec-ivmode[:ivopts], for example "
                                "aes-xts-plain64)",
                                text, why));
}

// "ivmode[:ivopts]" into its two parts.
void split_iv(std::string_view iv, CipherSpec &spec) {
  const auto colon = iv.find(':');
  spec.ivmode = std::string(iv.substr(0, colon));
  if (colon != std::string_view::npos) {
    spec.ivopts = std::string(iv.substr(colon + 1));
  }
}

Result<CipherSpec> parse_capi(std::string_view text, std::string_view rest) {
  CipherSpec spec;
  spec.capi = true;
  // The crypto API spec may itself hold '-' only inside parentheses; the IV follows the
  // last '-' that is outside them.
  int depth = 0;
  std::size_t dash = std::string_view::npos;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '(') {
      ++depth;
    } else if (rest[i] == ')') {
      --depth;
    } else if (rest[i] == '-' && depth == 0) {
      dash = i;
    }
  }
  if (depth != 0) {
    return bad_cipher(text, "unbalanced parentheses");
  }
  spec.cipher = std::string(rest.substr(0, dash));
  if (spec.cipher.empty()) {
    return bad_cipher(text, "empty crypto API spec");
  }
  if (dash != std::string_view::npos) {
    split_iv(rest.substr(dash + 1), spec);
  }
  return spec;
}

}  // namespace

Result<CipherSpec> parse_cipher_spec(std::string_view text) {
  if (text.empty()) {
    return bad_cipher(text, "empty");
  }
  if (text.substr(0, kCapiPrefix.size()) == kCapiPrefix) {
    return parse_capi(text, text.substr(kCapiPrefix.size()));
  }
  CipherSpec spec;
  const auto first_dash = text.find('-');
  const std::string_view head = text.substr(0, first_dash);
  const auto colon = head.find(':');
  spec.cipher = std::string(head.substr(0, colon));
  if (spec.cipher.empty()) {
    return bad_cipher(text, "no cipher name");
  }
  if (colon != std::string_view::npos) {
    const auto count = parse_decimal_u32(head.substr(colon + 1));
    if (!count || !is_power_of_two(*count)) {
      return bad_cipher(text, "the key count must be a power of two");
    }
    spec.keycount = *count;
  }
  if (first_dash == std::string_view::npos) {
    return bad_cipher(text, "no chain mode");
  }
  const std::string_view tail = text.substr(first_dash + 1);
  const auto second_dash = tail.find('-');
  spec.chainmode = std::string(tail.substr(0, second_dash));
  if (spec.chainmode.empty()) {
    return bad_cipher(text, "empty chain mode");
  }
  if (second_dash != std::string_view::npos) {
    split_iv(tail.substr(second_dash + 1), spec);
  }
  if (spec.ivmode.empty() && spec.chainmode != "ecb") {
    return bad_cipher(text, "an IV mode is required except with ecb");
  }
  return spec;
}

std::string CipherSpec::to_string() const {
  std::string out = capi ? fmt::format("capi:{}", cipher) : cipher;
  if (!capi) {
    if (keycount != 1) {
      out += fmt::format(":{}", keycount);
    }
    out += fmt::format("-{}", chainmode);
  }
  if (!ivmode.empty()) {
    out += fmt::format("-{}", ivmode);
    if (!ivopts.empty()) {
      out += fmt::format(":{}", ivopts);
    }
  }
  return out;
}

}  // namespace lbscrypt
