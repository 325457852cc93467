// SPDX-License-Identifier: GPL-2.0-only
// Typed errors and a small result type: the library reports, the CLI decides what to print.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace lbscrypt {

// Error categories. The CLI maps each to a stable exit code (see main.cpp / lbscrypt.rst).
enum class Errc {
  invalid_argument,  // malformed input: a table line, a number, an option value
  refused,           // well-formed but would not load here (gate, alignment, page size)
  luks_refused,      // sector size above 4096 on a device holding a LUKS header
  key,               // key material could not be read or derived
  device,            // the block device could not be opened or measured
  kernel,            // device-mapper failed or is unavailable
  not_found,         // no such mapping (or the device named is not there)
  exists,            // a mapping of that name already exists
  busy,              // the mapping is in use
  permission,        // not allowed: not root, or /dev/mapper/control refused
};

struct Error {
  Errc code;
  std::string message;  // one line, says what was wrong and what to do
  int os_errno = 0;     // the errno of the failed system call or ioctl, when known
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] T &value() & { return std::get<T>(v_); }
  [[nodiscard]] const T &value() const & { return std::get<T>(v_); }
  [[nodiscard]] T &&value() && { return std::get<T>(std::move(v_)); }
  [[nodiscard]] const Error &error() const { return std::get<Error>(v_); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Ok /*unused*/) {}  // NOLINT(google-explicit-constructor)
  Result(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  [[nodiscard]] const Error &error() const { return error_; }

 private:
  Error error_{Errc::invalid_argument, {}};
  bool ok_ = true;
};

[[nodiscard]] inline Error make_error(Errc code, std::string message, int os_errno = 0) {
  return Error{code, std::move(message), os_errno};
}

}  // namespace lbscrypt
