// SPDX-License-Identifier: GPL-2.0-only
// Internal: RAII for libcryptsetup contexts, and its logging turned off (the library never
// prints; errors come back as values).
#pragma once

#include <libcryptsetup.h>

#include <memory>

namespace lbscrypt::detail {

struct CryptDeviceDeleter {
  void operator()(crypt_device *cd) const { crypt_free(cd); }
};
using CryptDevice = std::unique_ptr<crypt_device, CryptDeviceDeleter>;

struct CryptSafeDeleter {
  void operator()(char *p) const { crypt_safe_free(p); }
};
using CryptSafeBuffer = std::unique_ptr<char, CryptSafeDeleter>;

inline void silence_libcryptsetup() {
  crypt_set_log_callback(
      nullptr, [](int, const char *, void *) {}, nullptr);
}

}  // namespace lbscrypt::detail
