// SPDX-License-Identifier: GPL-2.0-only
// The real I/O of an offline reencrypt run: two private device-mapper mappings over the
// device, `lbscrypt-reenc-<run id's first 16 hex>-old` (read-only, the old parameters) and
// `...-new` (read-write, the new ones), and the device itself; all three opened O_DIRECT.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "lbscrypt/kernel.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

class DeviceReencryptIo : public ReencryptIo {
 public:
  // Closes the descriptors and removes both mappings (a mapping still busy is retried a few
  // times); the error says which mapping is left and how to remove it. Destruction does the
  // same, silently, when close() was not called.
  [[nodiscard]] virtual Result<void> close() = 0;
  // The old mapping's node (/dev/dm-N), read-only: what the probe looks at.
  [[nodiscard]] virtual std::string old_node() const = 0;
};

// The names of a run's private mappings begin with "lbscrypt-reenc-<the run id's first 16
// hex>-", their dm uuids with "LBSCRYPT-REENC-<the run id>-" (then "old" or "new").
[[nodiscard]] std::string reencrypt_mapping_name_prefix(std::string_view run_id);
[[nodiscard]] std::string reencrypt_mapping_uuid_prefix(std::string_view run_id);

// Removes a private mapping; one udev or a prober still holds for a moment is retried a few
// times. Errc::not_found when there is none; Errc::busy, saying how to remove it, when it
// stays in use.
[[nodiscard]] Result<void> remove_reencrypt_mapping(Kernel &kernel, const std::string &name);

// Creates the two mappings from state's device, offset, skip, data_bytes, sides and run id,
// and opens them and the device. The kernel must outlive the result. Keys whose sizes are not
// the sides' key_bytes are Errc::key; a mapping that cannot be made is the kernel's error
// (a first mapping already made is removed again).
[[nodiscard]] Result<std::unique_ptr<DeviceReencryptIo>> open_reencrypt_io(
    Kernel &kernel, const ReencryptState &state, const SecretBuffer &old_key,
    const SecretBuffer &new_key, std::string_view target_type = "crypt");

}  // namespace lbscrypt
