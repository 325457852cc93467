// SPDX-License-Identifier: GPL-2.0-only
// Where the operations learn about the machine they act on: the kernel and block-device
// interfaces and the facts a user may assume instead of asking them (operations.hpp, torn.hpp
// and the reencrypt planner all take one).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "lbscrypt/device.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/target_version.hpp"

namespace lbscrypt {

// Where facts about the target kernel come from. `kernel` may be null when both facts are
// assumed (a table for another machine).
struct Environment {
  Kernel *kernel = nullptr;
  BlockDevices *devices = nullptr;
  std::optional<TargetVersion> assume_version;
  std::optional<std::uint32_t> assume_page_size;
  std::string target_type = "crypt";
  // open and attach: when no module has registered the crypt target and a sector size above
  // 4096 needs its version, have the kernel load it (as a table load would) unless
  // dm-crypt-lbs is installed, whose place it would take (the user is told to load that).
  bool load_target = false;
  // open and attach: the registry of reencrypt runs in progress (reencrypt/registry.hpp); a
  // device with a run there is refused before its key is asked for. A directory that does not
  // exist holds no run; nullopt consults none.
  std::optional<std::filesystem::path> reencrypt_registry{
      std::filesystem::path(kReencryptRegistry)};
};

}  // namespace lbscrypt
