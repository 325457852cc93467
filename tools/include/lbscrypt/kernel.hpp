// SPDX-License-Identifier: GPL-2.0-only
// The running kernel as the tool sees it: device-mapper and the page size. An interface, so
// command logic is tested with a fake; make_devmapper_kernel() is the real one (libdevmapper).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"
#include "lbscrypt/target_version.hpp"

namespace lbscrypt {

struct DeviceInfo {
  std::string name;
  std::string uuid;  // the DM UUID ("CRYPT-PLAIN-<name>" for cryptsetup's plain mappings)
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  bool suspended = false;
  bool read_only = false;
  std::int32_t open_count = 0;
  std::uint32_t target_count = 0;

  // /dev/dm-N: devtmpfs always has it, even without udev.
  [[nodiscard]] std::string dm_node() const { return "/dev/dm-" + std::to_string(minor); }
};

struct TargetLine {
  std::uint64_t start = 0;
  std::uint64_t length = 0;
  std::string type;
  SecretBuffer params;  // a table's parameters carry the key
};

struct CreateRequest {
  std::string name;
  std::string uuid;  // empty: none
  std::string target_type = "crypt";
  std::uint64_t length = 0;  // 512-byte sectors
  SecretBuffer params;
  bool read_only = false;
  // A mapping for the tool's own use (reencrypt's): udev neither probes it nor links it
  // (the udev flags cryptsetup gives its temporary devices).
  bool private_device = false;
};

// How a suspend treats what is above the mapping. Either way the kernel waits for the I/O its
// targets have in flight to complete before the suspend returns, and queues new I/O until resume.
enum class SuspendMode {
  // The filesystem on it is frozen first (FIFREEZE: its dirty data written, its writers held).
  freeze,
  // No freeze and no flush of the queue (DM_SKIP_LOCKFS | DM_NOFLUSH): for a table swap or
  // to hold one device of a stack; the filesystem above goes on with its own work.
  queue,
};

// dm-crypt-lbs's module name: what the units load before attaching (modprobe@.service, as
// loop devices are loaded), and what open and attach look for before loading the in-tree one.
inline constexpr const char *kModuleName = "dm_crypt_lbs";

class Kernel {
 public:
  Kernel() = default;
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  Kernel(Kernel &&) = delete;
  Kernel &operator=(Kernel &&) = delete;
  virtual ~Kernel() = default;

  // The version of a registered target; nullopt when no module provides it yet.
  [[nodiscard]] virtual Result<std::optional<TargetVersion>> target_version(
      std::string_view target_type) = 0;
  // Ask the kernel for a target by name, as a table load does: a target no module has
  // registered yet makes the kernel load module dm-TARGET (modprobe, and so any install rule
  // of /etc/modprobe.d). nullopt when no module provides it.
  [[nodiscard]] virtual Result<std::optional<TargetVersion>> load_target(
      std::string_view target_type) = 0;
  // Whether modprobe knows a module of that name for the running kernel (its modules.dep).
  [[nodiscard]] virtual bool module_installed(std::string_view module) = 0;
  [[nodiscard]] virtual std::uint32_t page_size() = 0;
  // Create + load + resume, waiting for udev where it runs.
  [[nodiscard]] virtual Result<DeviceInfo> create(const CreateRequest &request) = 0;
  // Errc::busy when the mapping is open, Errc::not_found when there is none.
  [[nodiscard]] virtual Result<void> remove(std::string_view name) = 0;
  // Errc::not_found when no such mapping exists.
  [[nodiscard]] virtual Result<DeviceInfo> info(std::string_view name) = 0;
  // The names of every mapping there is (dmsetup ls), in no particular order.
  [[nodiscard]] virtual Result<std::vector<std::string>> list() = 0;
  [[nodiscard]] virtual Result<std::vector<TargetLine>> table(std::string_view name) = 0;
  // Suspends a mapping (SuspendMode says how). A suspended mapping stays suspended.
  [[nodiscard]] virtual Result<void> suspend(std::string_view name, SuspendMode mode) = 0;
  // Loads a table of one or more lines into a mapping's inactive slot; resume makes it live.
  [[nodiscard]] virtual Result<void> reload(std::string_view name,
                                            const std::vector<TargetLine> &lines,
                                            bool read_only) = 0;
  // Resumes a mapping, with its inactive table when one was loaded.
  [[nodiscard]] virtual Result<void> resume(std::string_view name) = 0;
};

[[nodiscard]] std::unique_ptr<Kernel> make_devmapper_kernel();

}  // namespace lbscrypt
