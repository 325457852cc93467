// SPDX-License-Identifier: GPL-2.0-only
// What sector sizes a crypt target accepts, and what a given kernel would do with a table.
#pragma once

#include <cstdint>
#include <string>

#include "lbscrypt/result.hpp"
#include "lbscrypt/table.hpp"
#include "lbscrypt/target_version.hpp"

namespace lbscrypt {

enum class MappingType { plain, luks };

// The largest sector size the block layer takes for a logical block (BLK_MAX_BLOCK_SIZE).
inline constexpr std::uint32_t kBlockLayerMaxSectorSize = 65536;
// The largest sector size LUKS (and dm-crypt before 1.30.0) allows.
inline constexpr std::uint32_t kPortableMaxSectorSize = 4096;
inline constexpr std::uint32_t kMinSectorSize = 512;

struct Capabilities {
  TargetVersion version;
  std::uint32_t page_size = 0;
};

// The largest sector size a mapping of this type may use on a kernel with these capabilities:
// LUKS always 4096; plain 4096 below 1.30.0, min(page size, 65536) from 1.30.0.
[[nodiscard]] std::uint32_t max_sector_size(const Capabilities &caps, MappingType type);

// Decides whether `sector_size` may be used here; the error says why not and what to do.
[[nodiscard]] Result<void> check_sector_size(std::uint64_t sector_size, const Capabilities &caps,
                                             MappingType type);

// The same, where no crypt target may be registered yet (`target_loaded` false: its version is
// not known, `caps.version` means nothing): a plain size above 4096 that a 1.30.0 target would
// take is refused, naming the version it needs; every other size is judged as above.
[[nodiscard]] Result<void> check_sector_size(std::uint64_t sector_size, const Capabilities &caps,
                                             MappingType type, bool target_loaded);

enum class Outcome {
  accepted,            // loads, with the sector size as written
  refused,             // -EINVAL
  accepted_different,  // loads, but the kernel records a different sector size
};

struct Prediction {
  Outcome outcome = Outcome::refused;
  std::uint32_t recorded_sector_size = 0;  // what the kernel would record (when it loads)
  std::string reason;                      // why refused / what changed
};

// What a crypt target of `version` on a kernel with `page_size` does with the table's
// sector_size and length. Before 1.30.0 the kernel reads the value with sscanf("%hu"): no
// sign, no trailing characters, the number truncated to 16 bits (69632 -> 4096). From 1.30.0
// it is a full unsigned number, never truncated.
[[nodiscard]] Prediction predict(const CryptTable &table, const TargetVersion &version,
                                 std::uint32_t page_size);

[[nodiscard]] const char *to_string(Outcome outcome);
[[nodiscard]] const char *to_string(MappingType type);

}  // namespace lbscrypt
