// SPDX-License-Identifier: GPL-2.0-only
// The cleanup of a killed run's private mappings (reencrypt/leftovers.hpp): the decision is
// plan_leftover_removal, unit-tested on a made-up listing; the kernel calls stay thin.
#include "lbscrypt/reencrypt/leftovers.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "lbscrypt/device.hpp"
#include "lbscrypt/reencrypt/io.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

Result<std::vector<std::string>> plan_leftover_removal(
    std::string_view run_id, const std::vector<LeftoverMapping> &mappings) {
  const std::string name_prefix = reencrypt_mapping_name_prefix(run_id);
  const std::string uuid_prefix = reencrypt_mapping_uuid_prefix(run_id);
  std::vector<std::string> remove;
  for (const LeftoverMapping &mapping : mappings) {
    const bool ours = mapping.uuid.starts_with(uuid_prefix);
    if (!ours) {
      if (mapping.name.starts_with(name_prefix)) {
        return make_error(Errc::exists,
                          fmt::format("a device-mapper device named {} has the run's name but not "
                                      "its uuid ('{}'), so it is not the run's: remove or rename "
                                      "it (dmsetup), then resume",
                                      printable(mapping.name), printable(mapping.uuid)));
      }
      continue;
    }
    if (mapping.open_count > 0) {
      const std::string by =
          mapping.holders.empty()
              ? fmt::format("open count {}: a program or a mount; fuser -vm /dev/{} names them",
                            mapping.open_count, mapping.node)
              : fmt::format("held by {}", fmt::join(mapping.holders, ", "));
      return make_error(Errc::busy,
                        fmt::format("the run's private mapping {} ({}) is open ({}): close what "
                                    "has it open, then resume; it is left as it is",
                                    printable(mapping.name), mapping.node, by));
    }
    remove.push_back(mapping.name);
  }
  // "...-new" sorts before "...-old": the new side first, as the run removes them.
  std::sort(remove.begin(), remove.end());
  return remove;
}

Result<std::vector<std::string>> remove_run_leftovers(Kernel &kernel,
                                                      const std::filesystem::path &sysfs,
                                                      std::string_view run_id,
                                                      std::string_view keep) {
  auto names = kernel.list();
  if (!names) {
    return names.error();
  }
  std::vector<LeftoverMapping> mappings;
  for (const std::string &name : *names) {
    if (!keep.empty() && name == keep) {
      continue;
    }
    auto info = kernel.info(name);
    if (!info) {
      if (info.error().code == Errc::not_found) {
        continue;  // gone since the list
      }
      return info.error();
    }
    LeftoverMapping mapping;
    mapping.name = name;
    mapping.uuid = info->uuid;
    mapping.node = fmt::format("dm-{}", info->minor);
    mapping.open_count = info->open_count;
    mapping.holders = block_device_holders(sysfs, info->major, info->minor);
    mappings.push_back(std::move(mapping));
  }
  auto plan = plan_leftover_removal(run_id, mappings);
  if (!plan) {
    return plan.error();
  }
  for (const std::string &name : *plan) {
    if (auto removed = remove_reencrypt_mapping(kernel, name);
        !removed && removed.error().code != Errc::not_found) {
      return removed.error();
    }
  }
  return plan;
}

}  // namespace lbscrypt
