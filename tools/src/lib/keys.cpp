// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/keys.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>

#include "cryptsetup_handle.hpp"
#include "file_descriptor.hpp"

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

// Opens the key file as libcryptsetup will, to report why it cannot be read.
Result<void> check_key_file(const std::string &path, std::uint64_t offset) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const detail::FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
  if (S_ISREG(st.st_mode) && offset >= static_cast<std::uint64_t>(st.st_size)) {
    return make_error(Errc::key, fmt::format("key file {} holds {} bytes; --keyfile-offset {} is "
                                             "past its end",
                                             path, st.st_size, offset));
  }
  return Ok{};
}

}  // namespace

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
  const char *path = plan.source == KeyPlan::Source::file ? options.key_file->c_str() : nullptr;
  if (path != nullptr) {
    // libcryptsetup reports a file it cannot open as EINVAL: open it here first, so the
    // error keeps the OS's reason (ENOENT, EACCES, EISDIR, ...) with the path.
    if (auto checked = check_key_file(*options.key_file, options.keyfile_offset); !checked) {
      return checked.error();
    }
  }
  const std::uint32_t flags =
      plan.source == KeyPlan::Source::stdin_line ? CRYPT_KEYFILE_STOP_EOL : 0;
  detail::silence_libcryptsetup();
  char *raw = nullptr;
  std::size_t raw_size = 0;
  const int r = crypt_keyfile_device_read(nullptr, path, &raw, &raw_size, options.keyfile_offset,
                                          plan.read_limit, flags);
  const CryptSafeBuffer guard(raw);
  if (r == -EPIPE && path == nullptr) {
    // libcryptsetup's "Nothing to read on input": standard input ended at once.
    return make_error(Errc::key,
                      "nothing to read on standard input: give the passphrase (or the key) "
                      "there, or name a key file with --key-file");
  }
  if (r < 0) {
    return make_error(Errc::key,
                      fmt::format("cannot read the key from {}: {}",
                                  path != nullptr ? path : "standard input", std::strerror(-r)));
  }
  if (plan.source == KeyPlan::Source::file && raw_size < plan.key_bytes) {
    return make_error(Errc::key, fmt::format("key file {} holds {} bytes after offset {}, the key "
                                             "needs {}",
                                             *options.key_file, raw_size, options.keyfile_offset,
                                             plan.key_bytes));
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
