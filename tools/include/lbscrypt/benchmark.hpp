// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt benchmark`: the kernel's cipher per encryption unit, one request per unit with its
// own IV as dm-crypt issues them, through a small CryptoApi interface (AF_ALG for real, a fake
// in the tests); and the sector size to use on this machine, decided by the library's gate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/cipher.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

enum class Direction { encrypt, decrypt };

// One keyed transform of the kernel's crypto API.
class Skcipher {
 public:
  Skcipher() = default;
  Skcipher(const Skcipher &) = delete;
  Skcipher &operator=(const Skcipher &) = delete;
  Skcipher(Skcipher &&) = delete;
  Skcipher &operator=(Skcipher &&) = delete;
  virtual ~Skcipher() = default;

  // One request: `data` encrypted or decrypted in place with `iv`.
  [[nodiscard]] virtual Result<void> crypt(Direction direction, std::span<const std::uint8_t> iv,
                                           std::span<std::uint8_t> data) = 0;
};

class CryptoApi {
 public:
  CryptoApi() = default;
  CryptoApi(const CryptoApi &) = delete;
  CryptoApi &operator=(const CryptoApi &) = delete;
  CryptoApi(CryptoApi &&) = delete;
  CryptoApi &operator=(CryptoApi &&) = delete;
  virtual ~CryptoApi() = default;

  // A transform of `algorithm` (a crypto API name such as xts(aes), or a driver name), keyed.
  // Errc::kernel when the interface is missing, Errc::invalid_argument when the kernel has no
  // such algorithm or refuses the key.
  [[nodiscard]] virtual Result<std::unique_ptr<Skcipher>> open(
      const std::string &algorithm, std::span<const std::uint8_t> key) = 0;
  // Monotonic seconds.
  [[nodiscard]] virtual double now() = 0;
};

// The kernel's crypto API through AF_ALG sockets ("skcipher").
[[nodiscard]] std::unique_ptr<CryptoApi> make_af_alg_crypto();

// Whether /proc/crypto's text lists `algorithm` (by name or driver name) only as
// asynchronous skciphers: Linux 7.x's AF_ALG serves synchronous software ciphers alone
// ("crypto: af_alg - Drop support for off-CPU cryptography"), so an offload engine's
// driver is found by the kernel but not by AF_ALG.
[[nodiscard]] bool only_async_skcipher(std::string_view proc_crypto, std::string_view algorithm);

// What a dm-crypt cipher specification asks of the crypto API.
struct KernelCipher {
  std::string algorithm;  // xts(aes), essiv(cbc(aes),sha256), or the --driver name
  std::string ivmode;     // plain64, plain, plain64be, benbi, null, essiv
  std::size_t iv_bytes = 16;
  std::size_t block_bytes = 16;  // benbi counts cipher blocks
};

// Maps `spec` to the crypto API name dm-crypt would use (or `driver` when given), refusing
// what one AF_ALG request per unit cannot do (IV modes that need more than the sector number,
// key counts above 1) with Errc::invalid_argument.
[[nodiscard]] Result<KernelCipher> kernel_cipher(const CipherSpec &spec,
                                                 const std::optional<std::string> &driver);

// The IV of the unit that starts at 512-byte sector `sector`.
[[nodiscard]] std::vector<std::uint8_t> unit_iv(const KernelCipher &cipher, std::uint64_t sector);

// 512, 1024, ... up to the page size: every unit size the page size allows.
[[nodiscard]] std::vector<std::uint32_t> unit_sizes(std::uint32_t page_size);

struct BenchmarkRequest {
  std::string cipher = kDefaultCipher;
  std::optional<std::string> driver;  // a driver name to use instead of the spec's algorithm
  std::uint32_t key_bits = kDefaultKeyBits;
  double seconds = 0.2;                // per measurement, when `bytes` is not given
  std::optional<std::uint64_t> bytes;  // per measurement instead of a time
  std::uint64_t buffer_bytes = 1U << 20;
};

struct Measurement {
  std::uint64_t bytes = 0;
  std::uint64_t requests = 0;
  double seconds = 0;
  [[nodiscard]] double mib_per_s() const;
};

struct UnitResult {
  std::uint32_t unit = 0;
  Measurement encrypt;
  Measurement decrypt;
};

struct Recommendation {
  std::uint32_t sector_size = 4096;
  std::uint32_t page_size = 0;
  std::uint32_t max_plain = 0;  // the gate's largest plain sector size here
  std::uint32_t max_luks = 0;
  KnownCapabilities known;
  // Measured throughput at sector_size over 4096 (encrypt and decrypt together), minus 1.
  std::optional<double> gain_over_4096;
  // The largest measured size and its gain, when the gate allows less than it.
  std::optional<std::uint32_t> blocked_size;
  std::optional<double> blocked_gain;
  std::string reason;  // one sentence: why this size
};

struct BenchmarkReport {
  std::string cipher;  // the spec as given
  KernelCipher kernel;
  std::optional<std::string> driver;
  std::uint32_t key_bits = 0;
  std::vector<UnitResult> results;
  Recommendation recommendation;
};

// Measures every unit size up to the page size, each direction, and recommends a sector size
// by the gate's rules (check() on `env`; an unreachable device-mapper counts as below 1.30.0).
[[nodiscard]] Result<BenchmarkReport> run_benchmark(const BenchmarkRequest &request,
                                                    const Environment &env, CryptoApi &crypto);

// The recommendation alone: the largest measured size `allowed` (check()'s report) permits
// for a plain mapping, and what it gained over 4096.
[[nodiscard]] Recommendation recommend(const std::vector<UnitResult> &results,
                                       const CheckReport &allowed);

}  // namespace lbscrypt
