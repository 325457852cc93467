// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt run's authentication: a key derived from both volume keys and the run id, the
// MACs it makes (HMAC-SHA256, OpenSSL's libcrypto), and the state file's seal.
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

constexpr std::size_t kAuthHashBytes = 32;
constexpr std::size_t kAuthMaxBlocks = 255;
constexpr std::string_view kAuthRunKeyLabel = "lbscrypt reencrypt run key v1";
constexpr std::string_view kAuthStateDomain = "state";
constexpr std::string_view kAuthSwitchKeyLabel = "lbscrypt reencrypt switch key v1";
constexpr std::string_view kAuthSwitchDomain = "switch";

struct AuthMacFree {
  void operator()(EVP_MAC *mac) const { EVP_MAC_free(mac); }
};
struct AuthCtxFree {
  void operator()(EVP_MAC_CTX *ctx) const { EVP_MAC_CTX_free(ctx); }
};

Error auth_failure(std::string_view what) {
  return make_error(Errc::refused,
                    fmt::format("libcrypto cannot compute an HMAC-SHA256 ({}): check the OpenSSL "
                                "installation",
                                what));
}

std::span<const std::uint8_t> auth_bytes(std::string_view text) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  return {reinterpret_cast<const std::uint8_t *>(text.data()), text.size()};
}

// HMAC-SHA256 of the concatenation of `parts` under `key`.
Result<RunMac> auth_hmac(std::span<const std::uint8_t> key,
                         std::initializer_list<std::span<const std::uint8_t>> parts) {
  const std::unique_ptr<EVP_MAC, AuthMacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) {
    return auth_failure("no HMAC");
  }
  const std::unique_ptr<EVP_MAC_CTX, AuthCtxFree> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) {
    return auth_failure("no context");
  }
  std::array<char, 7> digest{"SHA256"};
  const std::array<OSSL_PARAM, 2> params{
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest.data(), 0),
      OSSL_PARAM_construct_end()};
  static constexpr std::uint8_t kNothing = 0;  // libcrypto wants a pointer even for 0 bytes
  if (EVP_MAC_init(ctx.get(), key.empty() ? &kNothing : key.data(), key.size(), params.data()) !=
      1) {
    return auth_failure("init");
  }
  for (const auto &part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1) {
      return auth_failure("update");
    }
  }
  RunMac out{};
  std::size_t size = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &size, out.size()) != 1 || size != out.size()) {
    return auth_failure("final");
  }
  return out;
}

std::array<std::uint8_t, 8> auth_u64(std::uint64_t value) {
  std::array<std::uint8_t, 8> out{};
  for (std::size_t i = 0; i < out.size(); ++i) {
    out.at(i) = static_cast<std::uint8_t>(value >> (8 * i));
  }
  return out;
}

}  // namespace

Result<SecretBuffer> hkdf_sha256(std::span<const std::uint8_t> ikm,
                                 std::span<const std::uint8_t> salt,
                                 std::span<const std::uint8_t> info, std::size_t out_bytes) {
  if (out_bytes == 0 || out_bytes > kAuthMaxBlocks * kAuthHashBytes) {
    return make_error(Errc::invalid_argument,
                      fmt::format("HKDF-SHA256 to {} bytes: give 1 to {}", out_bytes,
                                  kAuthMaxBlocks * kAuthHashBytes));
  }
  // RFC 5869: a salt of no bytes is a salt of HashLen zeros (the same HMAC key).
  auto prk = auth_hmac(salt, {ikm});
  if (!prk) {
    return prk.error();
  }
  SecretBuffer out(out_bytes);
  RunMac block{};
  std::size_t done = 0;
  for (std::uint8_t counter = 1; done < out_bytes; ++counter) {
    const std::array<std::uint8_t, 1> count{counter};
    auto next = auth_hmac(
        *prk, {std::span<const std::uint8_t>(block.data(), done == 0 ? 0 : 32), info, count});
    if (!next) {
      secure_wipe(prk->data(), prk->size());
      return next.error();
    }
    block = *next;
    const std::size_t take = std::min(block.size(), out_bytes - done);
    std::copy_n(block.begin(), take, out.data() + done);
    done += take;
  }
  secure_wipe(prk->data(), prk->size());
  secure_wipe(block.data(), block.size());
  return out;
}

Result<RunAuth> RunAuth::derive(const SecretBuffer &old_key, const SecretBuffer &new_key,
                                std::string_view run_id) {
  // Each key length-prefixed, so (old, new) is never read as another split of the same bytes.
  SecretBuffer ikm;
  for (const SecretBuffer *key : {&old_key, &new_key}) {
    const auto size = auth_u64(key->size());
    ikm.append(size.data(), size.size());
    ikm.append(key->data(), key->size());
  }
  auto key =
      hkdf_sha256(ikm.bytes(), auth_bytes(kAuthRunKeyLabel), auth_bytes(run_id), kAuthHashBytes);
  if (!key) {
    return key.error();
  }
  return RunAuth(std::move(key).value());
}

Result<RunAuth> RunAuth::derive_switch(const SecretBuffer &new_key, std::string_view run_id) {
  auto key = hkdf_sha256(new_key.bytes(), auth_bytes(kAuthSwitchKeyLabel), auth_bytes(run_id),
                         kAuthHashBytes);
  if (!key) {
    return key.error();
  }
  return RunAuth(std::move(key).value());
}

Result<RunMac> RunAuth::mac(std::string_view domain, std::uint64_t position,
                            std::span<const std::uint8_t> bytes) const {
  static constexpr std::array<std::uint8_t, 1> kSeparator{0};
  const auto at = auth_u64(position);
  return auth_hmac(key_.bytes(), {auth_bytes(domain), kSeparator, at, bytes});
}

namespace {

// The state file's JSON without the fields named, keys sorted, compact, non-ASCII escaped.
std::string state_text_without(const ReencryptState &state,
                               std::initializer_list<std::string_view> fields) {
  // nlohmann::json keeps an object's keys sorted: the same state, the same text.
  nlohmann::json doc = nlohmann::json::parse(state_to_json(state));
  for (const std::string_view field : fields) {
    doc.erase(std::string(field));
  }
  return doc.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

// Whether `stored` is the MAC of `text` under `auth` (compared in constant time).
Result<bool> auth_mac_matches(const RunAuth &auth, std::string_view domain, std::uint64_t position,
                              const std::string &text, const std::vector<std::uint8_t> &stored) {
  const auto mac = auth.mac(domain, position, auth_bytes(text));
  if (!mac) {
    return mac.error();
  }
  return stored.size() == mac->size() &&
         CRYPTO_memcmp(stored.data(), mac->data(), mac->size()) == 0;
}

}  // namespace

std::string state_mac_text(const ReencryptState &state) {
  return state_text_without(state, {"mac"});
}

Result<void> seal_state(ReencryptState &state, const RunAuth &auth) {
  const std::string text = state_mac_text(state);
  const auto mac = auth.mac(kAuthStateDomain, 0, auth_bytes(text));
  if (!mac) {
    return mac.error();
  }
  state.mac.assign(mac->begin(), mac->end());
  return Ok{};
}

Result<void> check_state_seal(const ReencryptState &state, const RunAuth &auth,
                              const std::filesystem::path &origin) {
  const auto matches =
      auth_mac_matches(auth, kAuthStateDomain, 0, state_mac_text(state), state.mac);
  if (!matches) {
    return matches.error();
  }
  if (!*matches) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: the state's MAC does not verify with both keys: a field "
                                  "of it was changed since the run wrote it, or it is another "
                                  "run's: nothing was written; give the state file the run "
                                  "wrote, unchanged",
                                  printable(origin.string())));
  }
  return Ok{};
}

std::string state_switch_text(const ReencryptState &state) {
  return state_text_without(state, {"mac", "switch_mac"});
}

Result<void> seal_switch(ReencryptState &state, const RunAuth &switch_auth) {
  const std::string text = state_switch_text(state);
  const auto mac = switch_auth.mac(kAuthSwitchDomain, state.data_bytes, auth_bytes(text));
  if (!mac) {
    return mac.error();
  }
  state.switch_mac.assign(mac->begin(), mac->end());
  return Ok{};
}

Result<void> check_switch_seal(const ReencryptState &state, const RunAuth &switch_auth,
                               const std::filesystem::path &origin) {
  const auto matches = auth_mac_matches(switch_auth, kAuthSwitchDomain, state.data_bytes,
                                        state_switch_text(state), state.switch_mac);
  if (!matches) {
    return matches.error();
  }
  if (!*matches) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: the state's final-switch MAC does not verify with the new "
                                  "key: a field of it was changed since the run wrote it, or it "
                                  "is another run's: nothing was written; give the state file "
                                  "the run wrote, unchanged",
                                  printable(origin.string())));
  }
  return Ok{};
}

std::vector<std::uint64_t> unit_samples(std::uint64_t length, std::uint64_t unit) {
  std::vector<std::uint64_t> out;
  if (unit == 0 || length < unit) {
    return out;
  }
  const std::uint64_t units = length / unit;
  // Each sample costs a --resume up to two unit reads (the raw bytes, then through the new
  // parameters), and the next hotzone's first unit two more.
  const std::uint64_t budget = kResumeCheckBytes / (2 * unit);
  const std::uint64_t room = budget > 1 ? budget - 1 : 1;
  const std::uint64_t count =
      std::max<std::uint64_t>(1, std::min({units, std::uint64_t{kMaxUnitSamples}, room}));
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t index = count == 1 ? 0 : i * (units - 1) / (count - 1);
    out.push_back(index * unit);
  }
  return out;
}

}  // namespace lbscrypt
