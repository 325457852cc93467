// SPDX-License-Identifier: GPL-2.0-only
// What a killed reencrypt run leaves in device-mapper: its private mappings
// (reencrypt/io.hpp), which hold the device and would refuse the next --resume. --resume
// removes them itself, under the state lock, before its checks: only the run's own (its uuid
// prefix, which carries the whole run id) and never one that is open.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/kernel.hpp"
#include "lbscrypt/result.hpp"

namespace lbscrypt {

// A device-mapper mapping as the cleanup sees it.
struct LeftoverMapping {
  std::string name;
  std::string uuid;
  std::string node;                  // "dm-N"
  std::int32_t open_count = 0;       // the kernel's
  std::vector<std::string> holders;  // sysfs holders/ (block_device_holders)
};

// Which of `mappings` to remove for run `run_id`: every mapping whose uuid begins with the
// run's uuid prefix, new ones before old (the order the run removes them). All or nothing:
// - one of them open (open count above 0) is Errc::busy naming it and its holders (or, when
//   no device holds it, its open count: a program or a mount);
// - a mapping with the run's name prefix but another uuid is Errc::exists: it is not the
//   run's, and the run could not make its own beside it.
[[nodiscard]] Result<std::vector<std::string>> plan_leftover_removal(
    std::string_view run_id, const std::vector<LeftoverMapping> &mappings);

// The mappings there are (Kernel::list and info, holders from `sysfs`), planned as above and
// removed; a mapping named `keep` is left out (an online resume's hotzone device, which the
// users' mapping still routes through). Returns the names removed.
[[nodiscard]] Result<std::vector<std::string>> remove_run_leftovers(
    Kernel &kernel, const std::filesystem::path &sysfs, std::string_view run_id,
    std::string_view keep = {});

}  // namespace lbscrypt
