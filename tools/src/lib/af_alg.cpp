// SPDX-License-Identifier: GPL-2.0-only
// The kernel's skcipher interface through AF_ALG: a bound socket per algorithm, keyed with
// ALG_SET_KEY; each request is one sendmsg (ALG_SET_OP, ALG_SET_IV and the data) answered by
// read() on the accepted operation socket.
#include "lbscrypt/benchmark.hpp"

#include <fmt/format.h>

#include <linux/if_alg.h>
#include <sys/socket.h>
#include <unistd.h>
#include <ctime>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "file_descriptor.hpp"

#ifndef SOL_ALG
#define SOL_ALG 279  // NOLINT(cppcoreguidelines-macro-usage): older libc headers lack it
#endif

namespace lbscrypt {

namespace {

using Fd = detail::FileDescriptor;

constexpr const char *kLoadHint =
    "load algif_skcipher (modprobe algif_skcipher), or use a kernel with "
    "CONFIG_CRYPTO_USER_API_SKCIPHER";

// Writes one SOL_ALG control message at the start of `slot` (zeroed, CMSG_SPACE(payload)
// bytes at least); returns the rest of the slot.
std::span<std::uint8_t> put_cmsg(std::span<std::uint8_t> slot, int type,
                                 std::span<const std::uint8_t> payload) {
  cmsghdr header{};
  header.cmsg_level = SOL_ALG;
  header.cmsg_type = type;
  header.cmsg_len = CMSG_LEN(payload.size());
  std::memcpy(slot.data(), &header, sizeof(header));
  std::copy(payload.begin(), payload.end(), slot.subspan(CMSG_LEN(0)).begin());
  return slot.subspan(CMSG_SPACE(payload.size()));
}

// /proc/crypto's text, empty where it cannot be read (the caller's message stands then).
std::string read_proc_crypto() {
  std::ifstream in("/proc/crypto");
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

class AfAlgSkcipher final : public Skcipher {
 public:
  AfAlgSkcipher(Fd bound, Fd op) : bound_(std::move(bound)), op_(std::move(op)) {}

  Result<void> crypt(Direction direction, std::span<const std::uint8_t> iv,
                     std::span<std::uint8_t> data) override {
    const std::uint32_t op = direction == Direction::encrypt ? ALG_OP_ENCRYPT : ALG_OP_DECRYPT;
    // struct af_alg_iv: the length, then the IV
    const auto ivlen = static_cast<std::uint32_t>(iv.size());
    iv_message_.assign(sizeof(ivlen) + iv.size(), 0);
    std::memcpy(iv_message_.data(), &ivlen, sizeof(ivlen));
    std::copy(iv.begin(), iv.end(), std::span(iv_message_).subspan(sizeof(ivlen)).begin());
    std::array<std::uint8_t, sizeof(op)> op_bytes{};
    std::memcpy(op_bytes.data(), &op, sizeof(op));
    control_.assign(CMSG_SPACE(sizeof(op)) + CMSG_SPACE(iv_message_.size()), 0);
    put_cmsg(put_cmsg(control_, ALG_SET_OP, op_bytes), ALG_SET_IV, iv_message_);

    iovec vec{data.data(), data.size()};
    msghdr msg{};
    msg.msg_iov = &vec;
    msg.msg_iovlen = 1;
    msg.msg_control = control_.data();
    msg.msg_controllen = control_.size();
    const ssize_t sent = sendmsg(op_.get(), &msg, 0);
    if (sent != static_cast<ssize_t>(data.size())) {
      return failure("sendmsg", data.size(), sent < 0 ? errno : EIO);
    }
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t got = read(op_.get(), data.data() + done, data.size() - done);
      if (got <= 0) {
        return failure("read", data.size(), got < 0 ? errno : EIO);
      }
      done += static_cast<std::size_t>(got);
    }
    return Ok{};
  }

 private:
  static Error failure(const char *call, std::size_t size, int error) {
    return make_error(Errc::kernel, fmt::format("AF_ALG {} of a {}-byte request failed: {}", call,
                                                size, std::strerror(error)));
  }

  Fd bound_;
  Fd op_;
  std::vector<std::uint8_t> iv_message_;
  std::vector<std::uint8_t> control_;
};

class AfAlgCrypto final : public CryptoApi {
 public:
  Result<std::unique_ptr<Skcipher>> open(const std::string &algorithm,
                                         std::span<const std::uint8_t> key) override {
    Fd bound(socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (bound.get() < 0) {
      const int error = errno;
      return make_error(Errc::kernel, fmt::format("AF_ALG is not available (socket: {}): {}",
                                                  std::strerror(error), kLoadHint));
    }
    sockaddr_alg address{};
    address.salg_family = AF_ALG;
    std::memcpy(address.salg_type, "skcipher", sizeof("skcipher"));
    if (algorithm.empty() || algorithm.size() >= sizeof(address.salg_name)) {
      return make_error(Errc::invalid_argument,
                        fmt::format("'{}' is not a crypto API name of 1 to {} characters",
                                    algorithm, sizeof(address.salg_name) - 1));
    }
    std::memcpy(address.salg_name, algorithm.data(), algorithm.size());
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
    if (bind(bound.get(), reinterpret_cast<const sockaddr *>(&address), sizeof(address)) != 0) {
      const int error = errno;
      if (error == ENOENT && only_async_skcipher(read_proc_crypto(), algorithm)) {
        return make_error(
            Errc::invalid_argument,
            fmt::format("'{}' is an asynchronous (offload) driver, and this kernel's AF_ALG "
                        "serves synchronous software ciphers only (Linux 7.x): measure it "
                        "through a mapping instead (fio on a crypt_lbs device)",
                        algorithm));
      }
      if (error == ENOENT) {
        return make_error(Errc::invalid_argument,
                          fmt::format("the kernel has no skcipher '{}' (see /proc/crypto), or "
                                      "AF_ALG's skcipher interface is missing: {}",
                                      algorithm, kLoadHint));
      }
      return make_error(Errc::kernel, fmt::format("AF_ALG bind to skcipher '{}': {}", algorithm,
                                                  std::strerror(error)));
    }
    if (setsockopt(bound.get(), SOL_ALG, ALG_SET_KEY, key.data(),
                   static_cast<socklen_t>(key.size())) != 0) {
      const int error = errno;
      return make_error(Errc::invalid_argument,
                        fmt::format("skcipher '{}' refuses a {}-bit key: {}", algorithm,
                                    key.size() * 8, std::strerror(error)));
    }
    Fd op(accept4(bound.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (op.get() < 0) {
      const int error = errno;
      return make_error(Errc::kernel, fmt::format("AF_ALG accept on skcipher '{}': {}", algorithm,
                                                  std::strerror(error)));
    }
    return std::unique_ptr<Skcipher>(
        std::make_unique<AfAlgSkcipher>(std::move(bound), std::move(op)));
  }

  double now() override {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    constexpr double kNano = 1e-9;
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * kNano;
  }
};

}  // namespace

std::unique_ptr<CryptoApi> make_af_alg_crypto() { return std::make_unique<AfAlgCrypto>(); }

bool only_async_skcipher(std::string_view proc_crypto, std::string_view algorithm) {
  // Entries are blank-line separated "key : value" lines.
  bool found = false;
  bool any_sync = false;
  std::string_view name;
  std::string_view driver;
  std::string_view type;
  std::string_view async;
  auto trim = [](std::string_view text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) {
      return std::string_view();
    }
    return text.substr(first, text.find_last_not_of(" \t") - first + 1);
  };
  auto finish_entry = [&] {
    if ((name == algorithm || driver == algorithm) && type == "skcipher") {
      found = true;
      any_sync = any_sync || async != "yes";
    }
    name = driver = type = async = {};
  };
  while (!proc_crypto.empty()) {
    const auto end = proc_crypto.find('\n');
    const std::string_view line = proc_crypto.substr(0, end);
    proc_crypto.remove_prefix(end == std::string_view::npos ? proc_crypto.size() : end + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      finish_entry();
      continue;
    }
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (key == "name") {
      name = value;
    } else if (key == "driver") {
      driver = value;
    } else if (key == "type") {
      type = value;
    } else if (key == "async") {
      async = value;
    }
  }
  finish_entry();
  return found && !any_sync;
}

}  // namespace lbscrypt
