// SPDX-License-Identifier: GPL-2.0-only
// The one open sequence `lbscrypt open` and `lbscrypt attach` share, in this order: a device
// with a reencrypt run in progress (env.reencrypt_registry) is refused; every
// check of the table and the running kernel (nothing is asked for a table that cannot load);
// a mapping already active as asked is success without a key; a device in use is refused;
// then the key, the mapping and, where one is given, a check of its content that closes it
// again when it fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lbscrypt/operations.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

struct VolumeRequest {
  std::string name;             // the mapping
  MappingRequest mapping;       // its device a path
  std::uint32_t key_bytes = 0;  // compared with the key size of a mapping already active
  bool read_only = false;
  bool shared = false;  // map a device already in use (cryptsetup's --shared)
};

struct VolumeSteps {
  // Shown the table before its key once it is known to load (open --debug). Optional.
  std::function<void(const CryptTable &)> planned;
  // The key for try `attempt` (1, 2, ...), asked for only after every check has passed.
  std::function<Result<SecretBuffer>(std::uint32_t attempt)> key;
  // Looks at the new mapping's content (attach's check=). Optional. When it fails, the mapping
  // is closed again and its message says whether that worked.
  std::function<Result<void>(const OpenResult &)> check;
  // Whether a check that failed with Errc::key (a wrong key) on try `attempt` asks for the key
  // again. Optional: never.
  std::function<bool(std::uint32_t attempt)> again;
};

struct VolumeOutcome {
  OpenResult opened;  // the mapping made, or the one found active as asked (its torn-sector
                      // warning either way)
  bool already_active = false;     // found so: nothing done, no key asked for
  std::vector<std::string> notes;  // each failed check that asked again, one line
};

[[nodiscard]] Result<VolumeOutcome> open_volume(const VolumeRequest &request,
                                                const Environment &env, const VolumeSteps &steps);

}  // namespace lbscrypt
