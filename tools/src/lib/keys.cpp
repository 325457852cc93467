// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/keys.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cryptsetup_handle.hpp"
#include "file_descriptor.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

constexpr std::uint32_t kMaxKeyBits = 8192;  // libcryptsetup refuses plain keys above 1024 bytes

using detail::CryptDevice;
using detail::CryptSafeBuffer;

bool is_stdin(const std::optional<std::string> &key_file) { return !key_file || *key_file == "-"; }

Error key_file_error(const std::string &path, int error) {
  return make_error(Errc::key,
                    fmt::format("cannot read the key file {}: {}", path, std::strerror(error)));
}

// What a key file or standard input may hold before it is refused as too large, and so the
// most --keyfile-offset skips by reading where nothing can be sought: cryptsetup's default
// key file limit (8 MiB).
constexpr std::uint64_t kMaxKeyFileBytes = 8ULL * 1024 * 1024;

// Reads up to `size` bytes into `buffer`, until end of file; the count read, or -errno.
ssize_t read_full(int fd, std::uint8_t *buffer, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    const ssize_t n = read(fd, buffer + done, size - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return -errno;
    }
    if (n == 0) {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

// Reads and drops `offset` bytes of a FIFO or character device (which cannot seek), in
// bounded steps: at most kMaxKeyFileBytes, so /dev/zero with a huge offset fails at once.
Result<void> skip_by_reading(int fd, const std::string &path, std::uint64_t offset) {
  if (offset > kMaxKeyFileBytes) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--keyfile-offset {} is too large for {}: a FIFO or character "
                                  "device is skipped by reading, at most {} bytes; give a smaller "
                                  "offset, or keep the key in a regular file or block device",
                                  offset, path, kMaxKeyFileBytes));
  }
  SecretBuffer scratch(4096);  // what is skipped is key material too
  std::uint64_t left = offset;
  while (left > 0) {
    const auto step = static_cast<std::size_t>(std::min<std::uint64_t>(left, scratch.size()));
    const ssize_t n = read_full(fd, scratch.data(), step);
    if (n < 0) {
      return key_file_error(path, static_cast<int>(-n));
    }
    left -= static_cast<std::uint64_t>(n);
    if (static_cast<std::size_t>(n) < step) {
      return make_error(Errc::key, fmt::format("key file {} ended after {} bytes, before "
                                               "--keyfile-offset {}: give a smaller offset",
                                               path, offset - left, offset));
    }
  }
  return Ok{};
}

// The size of a regular file or block device open on `fd`; nullopt for what has no size
// (a FIFO, a character device, a socket).
Result<std::optional<std::uint64_t>> sized(int fd, const struct stat &st, const std::string &path) {
  if (S_ISREG(st.st_mode)) {
    return std::optional<std::uint64_t>(static_cast<std::uint64_t>(st.st_size));
  }
  if (!S_ISBLK(st.st_mode)) {
    return std::optional<std::uint64_t>();
  }
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0 || lseek(fd, 0, SEEK_SET) != 0) {
    return key_file_error(path, errno);
  }
  return std::optional<std::uint64_t>(static_cast<std::uint64_t>(end));
}

// The key file, opened once (a FIFO's writer is read, never lost between two opens): exactly
// `key_bytes` bytes after `offset`, as cryptsetup reads a plain key file. A regular file or a
// block device is sought to the offset and must hold the whole key after it; a FIFO or a
// character device is read from, never sought (skip_by_reading).
Result<SecretBuffer> read_key_file(const std::string &path, std::uint64_t offset,
                                   std::size_t key_bytes) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const detail::FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    return key_file_error(path, errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return key_file_error(path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    return key_file_error(path, EISDIR);
  }
  if (isatty(fd.get()) == 1) {
    return make_error(Errc::key, fmt::format("key file {} is a terminal: a key file is read as "
                                             "it is; to type a passphrase, leave out --key-file",
                                             path));
  }
  const auto size = sized(fd.get(), st, path);
  if (!size) {
    return size.error();
  }
  if (*size) {
    const std::uint64_t total = **size;
    if (offset >= total) {
      return make_error(Errc::key, fmt::format("key file {} holds {} bytes; --keyfile-offset {} "
                                               "is past its end",
                                               path, total, offset));
    }
    if (total - offset < key_bytes) {
      return make_error(Errc::key,
                        fmt::format("key file {} holds {} bytes after --keyfile-offset {}, the "
                                    "key needs {} (--key-size {}): give a longer key file, a "
                                    "smaller offset or a smaller key size",
                                    path, total - offset, offset, key_bytes, key_bytes * 8));
    }
    if (lseek(fd.get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
      return key_file_error(path, errno);
    }
  } else if (auto skipped = skip_by_reading(fd.get(), path, offset); !skipped) {
    return skipped.error();
  }
  SecretBuffer key(key_bytes);
  const ssize_t n = read_full(fd.get(), key.data(), key.size());
  if (n < 0) {
    return key_file_error(path, static_cast<int>(-n));
  }
  if (static_cast<std::size_t>(n) < key_bytes) {
    return make_error(Errc::key,
                      fmt::format("key file {} gave {} bytes after --keyfile-offset {}, the key "
                                  "needs {} (--key-size {}): give a longer key",
                                  path, n, offset, key_bytes, key_bytes * 8));
  }
  return key;
}

// Standard input as the key's source: it must be open for reading, and an offset that would
// be skipped by reading is bounded as for a key file.
Result<void> check_stdin(std::uint64_t offset) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
  const int flags = fcntl(STDIN_FILENO, F_GETFL);
  // NOLINTNEXTLINE(hicpp-signed-bitwise)
  if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY) {
    return make_error(Errc::key,
                      "standard input is closed: give the passphrase (or the key) there, or "
                      "name a key file with --key-file");
  }
  struct stat st {};
  if (offset > kMaxKeyFileBytes && fstat(STDIN_FILENO, &st) == 0 && !S_ISREG(st.st_mode) &&
      !S_ISBLK(st.st_mode)) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--keyfile-offset {} is too large for standard input: it is "
                                  "skipped by reading, at most {} bytes; give a smaller offset, "
                                  "or the key in a regular file",
                                  offset, kMaxKeyFileBytes));
  }
  return Ok{};
}

}  // namespace

Result<void> check_hash_spec(std::string_view spec, std::size_t key_bytes, std::string_view field) {
  const auto colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  // "--hash 'sha256:0'", or as lbscrypttab writes it, "hash=sha256:0".
  const std::string given = field.ends_with('=') ? fmt::format("{}{}", field, printable(spec))
                                                 : fmt::format("{} '{}'", field, printable(spec));
  const auto refuse = [&](std::string_view why) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} {}: give a hash name (sha256, sha512, ripemd160, ...) or "
                                  "plain, optionally :N with N from 1 to {}, the key's bytes "
                                  "made from it",
                                  given, why, key_bytes));
  };
  if (name.empty()) {
    return refuse("has no hash name");
  }
  for (const char c : spec) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      return refuse("contains whitespace or a byte that is not printable ASCII");
    }
  }
  if (colon == std::string_view::npos) {
    return Ok{};
  }
  const auto length = parse_decimal_u64(spec.substr(colon + 1));
  if (!length) {
    return refuse("has a length that is not decimal digits");
  }
  if (*length == 0) {
    return refuse("takes no byte of the passphrase: the key would be all zeros");
  }
  if (*length > key_bytes) {
    return refuse(fmt::format("is longer than the {}-byte key", key_bytes));
  }
  return Ok{};
}

Result<KeyPlan> plan_plain_key(const KeyOptions &options, bool stdin_is_terminal) {
  if (options.key_size_bits == 0 || options.key_size_bits % 8 != 0 ||
      options.key_size_bits > kMaxKeyBits) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--key-size {} is not a multiple of 8 bits between 8 and {}",
                                  options.key_size_bits, kMaxKeyBits));
  }
  KeyPlan plan;
  plan.key_bytes = options.key_size_bits / 8;
  plan.hash = options.hash.value_or(kDefaultPlainHash);
  if (!is_stdin(options.key_file)) {
    plan.source = KeyPlan::Source::file;
    plan.hash.reset();
    if (options.hash) {
      plan.warnings.emplace_back(
          "WARNING: The --hash parameter is being ignored in plain mode with keyfile specified.");
    }
  } else if (stdin_is_terminal) {
    // cryptsetup prompts on a terminal whether or not --key-file=- was given.
    plan.source = KeyPlan::Source::terminal;
  } else {
    plan.source = options.key_file ? KeyPlan::Source::stdin_all : KeyPlan::Source::stdin_line;
  }
  if (plan.hash) {
    if (auto valid = check_hash_spec(*plan.hash, plan.key_bytes); !valid) {
      return valid.error();
    }
  }
  if (plan.hash == "plain") {
    plan.hash.reset();
  }
  switch (plan.source) {
    case KeyPlan::Source::file:
      if (options.keyfile_size) {
        plan.warnings.emplace_back(
            "WARNING: The --keyfile-size option is being ignored, the read size is the same as "
            "the encryption key size.");
      }
      plan.read_limit = plan.key_bytes;
      break;
    case KeyPlan::Source::terminal:
      plan.read_limit = 0;  // a terminal line is read whole; -l does not cut it
      break;
    case KeyPlan::Source::stdin_all:
      plan.read_limit = plan.hash ? options.keyfile_size.value_or(0) : plan.key_bytes;
      break;
    case KeyPlan::Source::stdin_line:
      plan.read_limit = options.keyfile_size.value_or(0);
      break;
  }
  if (plan.source == KeyPlan::Source::terminal && options.keyfile_offset != 0) {
    return make_error(Errc::invalid_argument,
                      "--keyfile-offset cannot be used with terminal input; drop it or give "
                      "the key with --key-file");
  }
  if (plan.source != KeyPlan::Source::file &&
      (!options.cipher_given || !options.key_size_given || !options.hash)) {
    plan.warnings.emplace_back(fmt::format(
        "WARNING: a passphrase with default plain-mode parameters: cipher {}, key size {} bits, "
        "hash {} (cryptsetup 2.7's; 2.6 used aes-cbc-essiv:sha256 and ripemd160); give --cipher, "
        "--key-size and --hash to be sure the same passphrase opens the same data",
        kDefaultCipher, kDefaultKeyBits, kDefaultPlainHash));
  }
  if (options.quiet) {
    plan.warnings.clear();
  }
  return plan;
}

Result<SecretBuffer> read_key_material(const KeyPlan &plan, const KeyOptions &options,
                                       const TerminalReader &terminal) {
  if (plan.source == KeyPlan::Source::terminal) {
    if (!terminal) {
      return make_error(Errc::key, "no terminal to read a passphrase from");
    }
    return terminal(kMaxTerminalPassphrase);
  }
  if (plan.source == KeyPlan::Source::file) {
    return read_key_file(*options.key_file, options.keyfile_offset, plan.key_bytes);
  }
  if (auto usable = check_stdin(options.keyfile_offset); !usable) {
    return usable.error();
  }
  const std::uint32_t flags =
      plan.source == KeyPlan::Source::stdin_line ? CRYPT_KEYFILE_STOP_EOL : 0;
  detail::silence_libcryptsetup();
  char *raw = nullptr;
  std::size_t raw_size = 0;
  const int r = crypt_keyfile_device_read(nullptr, nullptr, &raw, &raw_size, options.keyfile_offset,
                                          plan.read_limit, flags);
  const CryptSafeBuffer guard(raw);
  if (r == -EPIPE) {
    // libcryptsetup's "Nothing to read on input": standard input ended at once.
    return make_error(Errc::key,
                      "nothing to read on standard input: give the passphrase (or the key) "
                      "there, or name a key file with --key-file");
  }
  if (r == -EINVAL && plan.read_limit != 0) {
    // libcryptsetup's "Cannot read requested amount of data".
    const char *option = plan.hash ? "--keyfile-size" : "--key-size";
    return make_error(Errc::key, fmt::format("standard input gave fewer than the {} bytes to read "
                                             "({}){}: give them all, or a smaller {}",
                                             plan.read_limit, option,
                                             plan.source == KeyPlan::Source::stdin_line
                                                 ? " before its end or first newline"
                                                 : " before its end",
                                             option));
  }
  if (r == -EINVAL) {
    // libcryptsetup's "Maximum keyfile size exceeded".
    return make_error(Errc::key,
                      fmt::format("standard input holds more than {} bytes, too many for a "
                                  "passphrase: give --keyfile-size to read fewer",
                                  kMaxKeyFileBytes));
  }
  if (r < 0) {
    return make_error(
        Errc::key, fmt::format("cannot read the key from standard input: {}", std::strerror(-r)));
  }
  return SecretBuffer(raw, raw_size);
}

Result<SecretBuffer> make_plain_key(const KeyPlan &plan, const SecretBuffer &material) {
  if (!plan.hash) {
    // As libcryptsetup: the material cut to the key size, or padded with zeros when shorter
    // (a passphrase with --hash plain; a key file that is too short was refused on reading).
    SecretBuffer key(plan.key_bytes);
    if (!material.empty()) {
      std::memcpy(key.data(), material.data(), std::min(material.size(), plan.key_bytes));
    }
    return key;
  }
  detail::silence_libcryptsetup();
  crypt_device *raw_cd = nullptr;
  if (const int r = crypt_init(&raw_cd, nullptr); r < 0) {
    return make_error(Errc::key,
                      fmt::format("libcryptsetup: cannot initialise: {}", std::strerror(-r)));
  }
  const CryptDevice cd(raw_cd);
  crypt_params_plain params{};
  params.hash = plan.hash->c_str();
  params.sector_size = 512;
  // The cipher only labels the context; the hash alone makes the key.
  if (const int r = crypt_format(cd.get(), CRYPT_PLAIN, "aes", "xts-plain64", nullptr, nullptr,
                                 plan.key_bytes, &params);
      r < 0) {
    return make_error(
        Errc::key, fmt::format("libcryptsetup refuses hash '{}' for a {}-byte key: {}", *plan.hash,
                               plan.key_bytes, std::strerror(-r)));
  }
  SecretBuffer key(plan.key_bytes);
  std::size_t key_size = key.size();
  // libcryptsetup speaks char; our buffers hold bytes.
  auto *key_chars = reinterpret_cast<char *>(key.data());  // NOLINT(*-reinterpret-cast)
  // An empty passphrase is hashed like any other, as cryptsetup does: libcryptsetup needs a
  // pointer to it, and an empty buffer has none.
  const auto *pass_chars = material.empty()
                               ? ""
                               : reinterpret_cast<const char *>(  // NOLINT(*-reinterpret-cast)
                                     material.data());
  const int r = crypt_volume_key_get(cd.get(), CRYPT_ANY_SLOT, key_chars, &key_size, pass_chars,
                                     material.size());
  if (r < 0 || key_size != plan.key_bytes) {
    return make_error(
        Errc::key, fmt::format("cannot hash the passphrase with '{}' (unknown hash?)", *plan.hash));
  }
  return key;
}

Result<void> check_plain_hash(const KeyPlan &plan) {
  if (!plan.hash) {
    return Ok{};
  }
  const SecretBuffer probe("lbscrypt", 8);
  if (const auto key = make_plain_key(plan, probe); !key) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--hash '{}' is not a hash libcryptsetup can make a {}-byte key "
                                  "with: give one it knows (sha256, sha512, sha1, ripemd160, "
                                  "whirlpool, ...), HASH:N with N at most its size, or plain",
                                  *plan.hash, plan.key_bytes));
  }
  return Ok{};
}

Result<PlainKey> derive_plain_key(const KeyOptions &options, bool stdin_is_terminal,
                                  const TerminalReader &terminal) {
  auto plan = plan_plain_key(options, stdin_is_terminal);
  if (!plan) {
    return plan.error();
  }
  if (auto usable = check_plain_hash(*plan); !usable) {
    return usable.error();
  }
  const auto material = read_key_material(*plan, options, terminal);
  if (!material) {
    return material.error();
  }
  auto key = make_plain_key(*plan, *material);
  if (!key) {
    return key.error();
  }
  return PlainKey{std::move(key).value(), std::move(plan).value()};
}

}  // namespace lbscrypt
