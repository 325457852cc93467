// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/benchmark.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "lbscrypt/gating.hpp"
#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// IV modes whose IV is a function of the sector number alone: one request per unit does them.
constexpr std::array<std::string_view, 6> kBenchmarkIvModes = {"plain", "plain64", "plain64be",
                                                               "benbi", "null",    "essiv"};

// Ciphers with 64-bit blocks (their IV is 8 bytes); the others dm-crypt users meet have 128.
constexpr std::array<std::string_view, 4> kSmallBlockCiphers = {"des", "des3_ede", "blowfish",
                                                                "cast5"};

Error cannot(const CipherSpec &spec, std::string_view why) {
  return make_error(
      Errc::invalid_argument,
      fmt::format("cipher {} cannot be benchmarked through AF_ALG: {}", spec.to_string(), why));
}

void put_le64(std::span<std::uint8_t> out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8 && i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

void put_be64_tail(std::span<std::uint8_t> out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8 && i < out.size(); ++i) {
    out[out.size() - 1 - i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

// A key of `bits` bits whose halves differ (XTS refuses equal halves where weak keys are
// forbidden); its value does not matter for a throughput.
std::vector<std::uint8_t> benchmark_key(std::uint32_t bits) {
  std::vector<std::uint8_t> key(bits / 8);
  constexpr unsigned kStep = 157;
  constexpr unsigned kStart = 91;
  for (std::size_t i = 0; i < key.size(); ++i) {
    key[i] = static_cast<std::uint8_t>((i * kStep + kStart) & 0xffU);
  }
  return key;
}

Result<Measurement> measure(Skcipher &tfm, const KernelCipher &cipher, Direction direction,
                            std::uint32_t unit, std::span<std::uint8_t> buffer,
                            const BenchmarkRequest &request, CryptoApi &crypto) {
  Measurement m;
  const std::uint64_t units = buffer.size() / unit;
  const double start = crypto.now();
  for (std::uint64_t i = 0;; ++i) {
    const std::uint64_t index = i % units;
    const auto iv = unit_iv(cipher, index * (unit / kSectorBytes));
    if (auto r = tfm.crypt(direction, iv, buffer.subspan(index * unit, unit)); !r) {
      return r.error();
    }
    m.bytes += unit;
    ++m.requests;
    m.seconds = crypto.now() - start;
    if (request.bytes ? m.bytes >= *request.bytes : m.seconds >= request.seconds) {
      return m;
    }
  }
}

// Encrypt and decrypt together: bytes over time.
double combined(const UnitResult &r) {
  const double seconds = r.encrypt.seconds + r.decrypt.seconds;
  return seconds > 0 ? static_cast<double>(r.encrypt.bytes + r.decrypt.bytes) / seconds : 0.0;
}

std::optional<double> gain(const std::vector<UnitResult> &results, std::uint32_t unit) {
  const auto find = [&](std::uint32_t u) {
    return std::find_if(results.begin(), results.end(),
                        [u](const UnitResult &r) { return r.unit == u; });
  };
  const auto at = find(unit);
  const auto base = find(kPortableMaxSectorSize);
  if (at == results.end() || base == results.end() || combined(*base) <= 0) {
    return std::nullopt;
  }
  return combined(*at) / combined(*base) - 1.0;
}

std::string percent(std::optional<double> g) {
  return g ? fmt::format("{:+.0f}%", *g * 100.0) : std::string("not measured");
}

std::string target_text(const KnownCapabilities &known) {
  if (!known.target_reachable) {
    return "device-mapper could not be asked for the crypt target's version";
  }
  if (!known.target_loaded) {
    return "no crypt target is loaded";
  }
  return fmt::format("the crypt target is v{}", to_string(known.caps.version));
}

// What check() would say with device-mapper out of reach: the rules every crypt target
// shares (a version below 1.30.0), on this page size.
CheckReport unreachable_target(const Environment &env) {
  CheckReport report;
  report.known.target_reachable = false;
  report.known.target_loaded = false;
  report.known.caps.page_size =
      env.assume_page_size ? *env.assume_page_size : env.kernel->page_size();
  report.max_plain = max_sector_size(report.known.caps, MappingType::plain);
  report.max_luks = max_sector_size(report.known.caps, MappingType::luks);
  return report;
}

}  // namespace

Result<KernelCipher> kernel_cipher(const CipherSpec &spec,
                                   const std::optional<std::string> &driver) {
  if (spec.keycount != 1) {
    return cannot(spec,
                  "a key count above 1 takes one transform per key; give the cipher "
                  "without :keycount");
  }
  KernelCipher k;
  k.ivmode = spec.ivmode;
  if (std::find(kSmallBlockCiphers.begin(), kSmallBlockCiphers.end(), spec.cipher) !=
      kSmallBlockCiphers.end()) {
    k.block_bytes = k.iv_bytes = 8;
  }
  if (spec.ivmode.empty()) {
    k.iv_bytes = 0;  // ecb: no IV
  } else if (std::find(kBenchmarkIvModes.begin(), kBenchmarkIvModes.end(), spec.ivmode) ==
             kBenchmarkIvModes.end()) {
    return cannot(spec, fmt::format("IV mode {} needs more than the sector number per request; "
                                    "AF_ALG measures {}",
                                    spec.ivmode, fmt::join(kBenchmarkIvModes, ", ")));
  }
  const std::string inner = driver      ? *driver
                            : spec.capi ? spec.cipher
                                        : fmt::format("{}({})", spec.chainmode, spec.cipher);
  if (spec.ivmode == "essiv") {
    if (spec.ivopts.empty()) {
      return cannot(spec, "essiv needs a hash, for example essiv:sha256");
    }
    // The kernel's essiv template: it encrypts the sector number with the hashed key.
    k.algorithm = fmt::format("essiv({},{})", inner, spec.ivopts);
  } else {
    k.algorithm = inner;
  }
  return k;
}

std::vector<std::uint8_t> unit_iv(const KernelCipher &cipher, std::uint64_t sector) {
  std::vector<std::uint8_t> iv(cipher.iv_bytes, 0);
  const std::string &mode = cipher.ivmode;
  if (mode == "plain") {
    put_le64(std::span(iv).first(std::min<std::size_t>(4, iv.size())), sector & 0xffffffffU);
  } else if (mode == "plain64" || mode == "essiv") {
    put_le64(iv, sector);
  } else if (mode == "plain64be") {
    put_be64_tail(iv, sector);
  } else if (mode == "benbi") {
    // The number of the unit's first cipher block, counted from 1, big-endian.
    put_be64_tail(iv, sector * (kSectorBytes / cipher.block_bytes) + 1);
  }
  return iv;
}

std::vector<std::uint32_t> unit_sizes(std::uint32_t page_size) {
  std::vector<std::uint32_t> sizes;
  const std::uint32_t top = std::max(page_size, kPortableMaxSectorSize);
  for (std::uint32_t s = kMinSectorSize; s <= top && s <= kBlockLayerMaxSectorSize; s *= 2) {
    sizes.push_back(s);
  }
  return sizes;
}

double Measurement::mib_per_s() const {
  return seconds > 0 ? static_cast<double>(bytes) / kMiB / seconds : 0.0;
}

Recommendation recommend(const std::vector<UnitResult> &results, const CheckReport &allowed) {
  const KnownCapabilities &known = allowed.known;
  Recommendation rec;
  rec.known = known;
  rec.page_size = known.caps.page_size;
  rec.max_plain = allowed.max_plain;
  rec.max_luks = allowed.max_luks;
  std::uint32_t largest = 0;
  for (const auto &r : results) {
    if (r.unit <= rec.max_plain) {
      rec.sector_size = std::max(rec.sector_size, r.unit);
    }
    largest = std::max(largest, r.unit);
  }
  rec.gain_over_4096 = gain(results, rec.sector_size);
  if (largest > rec.sector_size) {
    rec.blocked_size = largest;
    rec.blocked_gain = gain(results, largest);
  }
  const std::string luks = "LUKS stays at 4096 on every kernel";
  if (rec.sector_size > kPortableMaxSectorSize) {
    rec.reason = fmt::format(
        "{} is the largest plain sector size here ({}, page size {}): one request per {} bytes "
        "instead of {} of 4096, measured {} over 4096; {}, and sizes above 4096 need a crypt "
        "target of v{} or later",
        rec.sector_size, target_text(known), rec.page_size, rec.sector_size,
        rec.sector_size / kPortableMaxSectorSize, percent(rec.gain_over_4096), luks,
        to_string(kLargeSectorVersion));
  } else if (rec.blocked_size) {
    rec.reason = fmt::format(
        "4096 is the largest plain sector size here because {}; {} measured {} over 4096 on "
        "this page size {}: sizes above 4096 need a crypt target of v{} or later (load "
        "dm-crypt-lbs); {}",
        target_text(known), *rec.blocked_size, percent(rec.blocked_gain), rec.page_size,
        to_string(kLargeSectorVersion), luks);
  } else {
    rec.reason = fmt::format(
        "4096 is the page size here, the largest sector size any crypt target takes on this "
        "kernel; {}",
        luks);
  }
  return rec;
}

Result<BenchmarkReport> run_benchmark(const BenchmarkRequest &request, const Environment &env,
                                      CryptoApi &crypto) {
  if (request.key_bits == 0 || request.key_bits % 8 != 0) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("--key-size {} is not a positive multiple of 8 bits", request.key_bits));
  }
  const auto spec = parse_cipher_spec(request.cipher);
  if (!spec) {
    return spec.error();
  }
  auto cipher = kernel_cipher(*spec, request.driver);
  if (!cipher) {
    return cipher.error();
  }
  auto allowed = check(env, std::nullopt, MappingType::plain);
  if (!allowed) {
    if (allowed.error().code == Errc::invalid_argument || env.kernel == nullptr) {
      return allowed.error();
    }
    allowed = unreachable_target(env);
  }
  BenchmarkReport report;
  report.cipher = request.cipher;
  report.kernel = *cipher;
  report.driver = request.driver;
  report.key_bits = request.key_bits;
  const auto key = benchmark_key(request.key_bits);
  auto tfm = crypto.open(cipher->algorithm, key);
  if (!tfm) {
    return tfm.error();
  }
  const auto sizes = unit_sizes(allowed->known.caps.page_size);
  const std::uint32_t largest = sizes.back();
  const std::uint64_t buffer_bytes =
      std::max<std::uint64_t>(request.buffer_bytes / largest, 1) * largest;
  std::vector<std::uint8_t> buffer(buffer_bytes, 0x5a);
  for (const auto unit : sizes) {
    UnitResult r;
    r.unit = unit;
    for (const auto direction : {Direction::encrypt, Direction::decrypt}) {
      auto m = measure(**tfm, *cipher, direction, unit, buffer, request, crypto);
      if (!m) {
        return m.error();
      }
      (direction == Direction::encrypt ? r.encrypt : r.decrypt) = *m;
    }
    report.results.push_back(r);
  }
  report.recommendation = recommend(report.results, *allowed);
  return report;
}

}  // namespace lbscrypt
