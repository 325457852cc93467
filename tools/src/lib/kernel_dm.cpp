// SPDX-License-Identifier: GPL-2.0-only
// Kernel adapter on libdevmapper.
#include <libdevmapper.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "lbscrypt/kernel.hpp"

namespace lbscrypt {

namespace {

constexpr int kLogLevelMask = 0x7;
constexpr int kLogErrorLevel = 3;  // libdevmapper's _LOG_ERR

// The last error libdevmapper reported; it goes into our error messages instead of stderr.
std::string &last_dm_error() {
  static std::string message;
  return message;
}

extern "C" void capture_dm_log(int level, const char * /*file*/, int /*line*/, int /*dm_errno*/,
                               const char *format, ...) {
  if ((level & kLogLevelMask) > kLogErrorLevel) {
    return;
  }
  // libdevmapper's logging interface is a C printf-style callback.
  std::array<char, 512> buffer{};
  va_list args;  // NOLINT(cppcoreguidelines-pro-type-vararg)
  va_start(args, format);
  // clang-analyzer 14 does not see va_start in an extern "C" variadic function
  // and calls args uninitialised here: a false positive.
  // NOLINTBEGIN(clang-analyzer-valist.Uninitialized)
  // NOLINTNEXTLINE(clang-diagnostic-format-nonliteral, cppcoreguidelines-pro-type-vararg)
  const int written = std::vsnprintf(buffer.data(), buffer.size(), format, args);
  // NOLINTEND(clang-analyzer-valist.Uninitialized)
  va_end(args);
  if (written > 0) {
    last_dm_error() = buffer.data();
  }
}

struct TaskDeleter {
  void operator()(dm_task *task) const { dm_task_destroy(task); }
};
using Task = std::unique_ptr<dm_task, TaskDeleter>;

bool udev_running() { return access("/run/udev/control", F_OK) == 0; }

// A private device: no blkid probe, no /dev/disk links, no other rules (systemd, mdadm, ...).
constexpr std::uint16_t kPrivateUdevFlags = DM_UDEV_DISABLE_SUBSYSTEM_RULES_FLAG |
                                            DM_UDEV_DISABLE_DISK_RULES_FLAG |
                                            DM_UDEV_DISABLE_OTHER_RULES_FLAG;

// The category an errno of a failed ioctl falls in (cryptsetup's exit codes follow it).
Errc errno_category(int error, Errc fallback) {
  switch (error) {
    case EBUSY:
      return Errc::busy;
    case EEXIST:
      return Errc::exists;
    case ENXIO:
    case ENODEV:
      return Errc::not_found;
    case EPERM:
    case EACCES:
      return Errc::permission;
    default:
      return fallback;
  }
}

Error dm_failure(Errc code, std::string_view what, dm_task *task = nullptr) {
  const int error = task != nullptr ? dm_task_get_errno(task) : 0;
  if (task != nullptr) {
    code = errno_category(error, code);
  }
  if (code == Errc::kernel && geteuid() != 0) {
    code = Errc::permission;
  }
  std::string detail = last_dm_error();
  if (code == Errc::permission && geteuid() != 0) {
    // Without root, libdevmapper cannot open its control node and blames the kernel's
    // version ("Incompatible libdevmapper ... and kernel driver"): say what is wrong.
    detail = "device-mapper needs root: run lbscrypt as root";
  } else if (detail.empty()) {
    detail = "device-mapper gave no reason (is dm_mod loaded and are you root?)";
  }
  return make_error(code, fmt::format("{}: {}", what, detail), error);
}

// The entry of target_type in a task's version list (DM_DEVICE_LIST_VERSIONS, or the one entry
// of DM_DEVICE_GET_TARGET_VERSION); nullopt when it is not there.
std::optional<TargetVersion> find_version(dm_task *task, std::string_view target_type) {
  dm_versions *entry = dm_task_get_versions(task);
  while (entry != nullptr) {
    if (target_type == entry->name) {
      return TargetVersion{entry->version[0], entry->version[1], entry->version[2]};
    }
    if (entry->next == 0) {
      break;
    }
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    entry = reinterpret_cast<dm_versions *>(reinterpret_cast<char *>(entry) + entry->next);
  }
  return std::nullopt;
}

// A module's name as modprobe compares them: '-' and '_' are the same.
std::string module_key(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

class DevmapperKernel final : public Kernel {
 public:
  DevmapperKernel() : use_udev_(udev_running()) {
    dm_log_with_errno_init(capture_dm_log);
    if (!use_udev_) {
      // No udev: libdevmapper makes the /dev/mapper nodes itself and waits for nobody.
      setenv("DM_DISABLE_UDEV", "1", 0);
      dm_udev_set_sync_support(0);
    }
  }
  DevmapperKernel(const DevmapperKernel &) = delete;
  DevmapperKernel &operator=(const DevmapperKernel &) = delete;
  DevmapperKernel(DevmapperKernel &&) = delete;
  DevmapperKernel &operator=(DevmapperKernel &&) = delete;
  ~DevmapperKernel() override {
    dm_task_update_nodes();
    dm_log_with_errno_init(nullptr);
  }

  Result<std::optional<TargetVersion>> target_version(std::string_view target_type) override {
    const Task task(new_task(DM_DEVICE_LIST_VERSIONS));
    if (!task || dm_task_run(task.get()) == 0) {
      return dm_failure(Errc::kernel, "cannot list device-mapper targets");
    }
    return find_version(task.get(), target_type);
  }

  Result<std::optional<TargetVersion>> load_target(std::string_view target_type) override {
    const std::string name(target_type);
    const Task task(new_task(DM_DEVICE_GET_TARGET_VERSION));
    if (!task || dm_task_set_name(task.get(), name.c_str()) == 0) {
      return dm_failure(Errc::kernel, "cannot prepare the target version request");
    }
    if (dm_task_run(task.get()) == 0) {
      // EINVAL: no module registers the target (none installed, or it did not load).
      last_dm_error().clear();
      return std::optional<TargetVersion>{};
    }
    return find_version(task.get(), target_type);
  }

  bool module_installed(std::string_view module) override {
    utsname uts{};
    if (uname(&uts) != 0) {
      return false;
    }
    std::ifstream dep(fmt::format("/lib/modules/{}/modules.dep", uts.release));
    const std::string want = module_key(module);
    std::string line;
    while (std::getline(dep, line)) {
      const std::string_view path = std::string_view(line).substr(0, line.find(':'));
      std::string_view file = path.substr(path.rfind('/') + 1);  // npos + 1 == 0
      for (const std::string_view suffix : {".xz", ".gz", ".zst"}) {
        if (file.ends_with(suffix)) {
          file.remove_suffix(suffix.size());
        }
      }
      if (file.ends_with(".ko") && module_key(file.substr(0, file.size() - 3)) == want) {
        return true;
      }
    }
    return false;
  }

  std::uint32_t page_size() override { return static_cast<std::uint32_t>(sysconf(_SC_PAGESIZE)); }

  // Create, load and resume as three tasks rather than libdevmapper's one-task create: when
  // that one's table load fails, the remove that reverts it resets the task's errno, and the
  // load's errno (EINVAL, ...) is what the caller needs.
  Result<DeviceInfo> create(const CreateRequest &request) override {
    const Task made(named_task(DM_DEVICE_CREATE, request.name));
    if (!made ||
        (!request.uuid.empty() && dm_task_set_uuid(made.get(), request.uuid.c_str()) == 0)) {
      return dm_failure(Errc::kernel, "cannot prepare the create request");
    }
    if (dm_task_run(made.get()) == 0) {
      return dm_failure(Errc::kernel, fmt::format("the kernel refused to create {}", request.name),
                        made.get());
    }
    const Task load(named_task(DM_DEVICE_RELOAD, request.name));
    SecretBuffer params = request.params;  // NUL-terminated copy, wiped on return
    params.append("", 1);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    const auto *text = reinterpret_cast<const char *>(params.data());
    if (!load ||
        dm_task_add_target(load.get(), 0, request.length, request.target_type.c_str(), text) == 0 ||
        dm_task_secure_data(load.get()) == 0 ||
        (request.read_only && dm_task_set_ro(load.get()) == 0)) {
      return undo_create(request.name,
                         dm_failure(Errc::kernel, "cannot prepare the create request"));
    }
    if (dm_task_run(load.get()) == 0) {
      return undo_create(
          request.name,
          dm_failure(Errc::kernel, fmt::format("the kernel refused to create {}", request.name),
                     load.get()));
    }
    const Task resume(named_task(DM_DEVICE_RESUME, request.name));
    const std::uint16_t udev_flags = request.private_device ? kPrivateUdevFlags : std::uint16_t{0};
    if (!resume || !run_with_udev(resume.get(), udev_flags)) {
      return undo_create(
          request.name,
          dm_failure(Errc::kernel, fmt::format("the kernel refused to resume {}", request.name),
                     resume.get()));
    }
    return info(request.name);
  }

  Result<void> remove(std::string_view name) override {
    const Task task(named_task(DM_DEVICE_REMOVE, name));
    if (!task) {
      return dm_failure(Errc::kernel, "cannot prepare the remove request");
    }
    if (!run_with_udev(task.get())) {
      return dm_failure(Errc::kernel, fmt::format("cannot remove {}", name), task.get());
    }
    return Ok{};
  }

  Result<DeviceInfo> info(std::string_view name) override {
    const Task task(named_task(DM_DEVICE_INFO, name));
    dm_info raw{};
    if (!task || dm_task_run(task.get()) == 0 || dm_task_get_info(task.get(), &raw) == 0) {
      return dm_failure(Errc::kernel, fmt::format("cannot query {}", name));
    }
    if (raw.exists == 0) {
      return make_error(Errc::not_found, fmt::format("no device-mapper device named {}", name));
    }
    DeviceInfo info;
    info.name = std::string(name);
    if (const char *uuid = dm_task_get_uuid(task.get()); uuid != nullptr) {
      info.uuid = uuid;
    }
    info.major = raw.major;
    info.minor = raw.minor;
    info.suspended = raw.suspended != 0;
    info.read_only = raw.read_only != 0;
    info.open_count = raw.open_count;
    info.target_count = static_cast<std::uint32_t>(raw.target_count);
    return info;
  }

  Result<std::vector<std::string>> list() override {
    const Task task(new_task(DM_DEVICE_LIST));
    if (!task || dm_task_run(task.get()) == 0) {
      return dm_failure(Errc::kernel, "cannot list device-mapper devices");
    }
    std::vector<std::string> names;
    dm_names *entry = dm_task_get_names(task.get());
    if (entry == nullptr || entry->dev == 0) {
      return names;  // none
    }
    while (true) {
      names.emplace_back(entry->name);
      if (entry->next == 0) {
        break;
      }
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
      entry = reinterpret_cast<dm_names *>(reinterpret_cast<char *>(entry) + entry->next);
    }
    return names;
  }

  Result<std::vector<TargetLine>> table(std::string_view name) override {
    return targets(DM_DEVICE_TABLE, name);
  }

  Result<void> suspend(std::string_view name, SuspendMode mode) override {
    const Task task(named_task(DM_DEVICE_SUSPEND, name));
    const bool queue = mode == SuspendMode::queue;
    if (!task ||
        (queue && (dm_task_skip_lockfs(task.get()) == 0 || dm_task_no_flush(task.get()) == 0))) {
      return dm_failure(Errc::kernel, "cannot prepare the suspend request");
    }
    if (dm_task_run(task.get()) == 0) {
      return dm_failure(Errc::kernel, fmt::format("the kernel refused to suspend {}", name),
                        task.get());
    }
    return Ok{};
  }

  Result<void> reload(std::string_view name, const std::vector<TargetLine> &lines,
                      bool read_only) override {
    const Task task(named_task(DM_DEVICE_RELOAD, name));
    if (!task || dm_task_secure_data(task.get()) == 0 ||
        (read_only && dm_task_set_ro(task.get()) == 0)) {
      return dm_failure(Errc::kernel, "cannot prepare the table load");
    }
    for (const TargetLine &line : lines) {
      SecretBuffer params = line.params;  // NUL-terminated copy, wiped on return
      params.append("", 1);
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
      const auto *text = reinterpret_cast<const char *>(params.data());
      if (dm_task_add_target(task.get(), line.start, line.length, line.type.c_str(), text) == 0) {
        return dm_failure(Errc::kernel, "cannot prepare the table load");
      }
    }
    if (dm_task_run(task.get()) == 0) {
      return dm_failure(Errc::kernel, fmt::format("the kernel refused the table for {}", name),
                        task.get());
    }
    return Ok{};
  }

  Result<void> resume(std::string_view name) override {
    const Task task(named_task(DM_DEVICE_RESUME, name));
    if (!task || !run_with_udev(task.get())) {
      return dm_failure(Errc::kernel, fmt::format("the kernel refused to resume {}", name),
                        task.get());
    }
    return Ok{};
  }

 private:
  static dm_task *new_task(int type) {
    last_dm_error().clear();
    return dm_task_create(type);
  }

  static dm_task *named_task(int type, std::string_view name) {
    dm_task *task = new_task(type);
    if (task != nullptr && dm_task_set_name(task, std::string(name).c_str()) == 0) {
      dm_task_destroy(task);
      return nullptr;
    }
    return task;
  }

  // Runs a task that makes or removes a device node, synchronised with udev when it runs.
  [[nodiscard]] bool run_with_udev(dm_task *task, std::uint16_t udev_flags = 0) const {
    if (!use_udev_) {
      const bool ok = dm_task_run(task) != 0;
      dm_task_update_nodes();
      return ok;
    }
    std::uint32_t cookie = 0;
    if (dm_task_set_cookie(task, &cookie, udev_flags) == 0) {
      return false;
    }
    const bool ok = dm_task_run(task) != 0;
    dm_udev_wait(cookie);
    return ok;
  }

  // Removes a device whose creation failed half-way; returns the failure.
  Error undo_create(std::string_view name, Error error) {
    static_cast<void>(remove(name));
    return error;
  }

  static Result<std::vector<TargetLine>> targets(int type, std::string_view name) {
    const Task task(named_task(type, name));
    if (!task || dm_task_secure_data(task.get()) == 0 || dm_task_run(task.get()) == 0) {
      return dm_failure(Errc::kernel, fmt::format("cannot read the table of {}", name));
    }
    dm_info raw{};
    if (dm_task_get_info(task.get(), &raw) == 0 || raw.exists == 0) {
      return make_error(Errc::not_found, fmt::format("no device-mapper device named {}", name));
    }
    std::vector<TargetLine> lines;
    void *next = nullptr;
    do {
      std::uint64_t start = 0;
      std::uint64_t length = 0;
      char *target_type = nullptr;
      char *params = nullptr;
      next = dm_get_next_target(task.get(), next, &start, &length, &target_type, &params);
      if (target_type != nullptr) {
        TargetLine line;
        line.start = start;
        line.length = length;
        line.type = target_type;
        line.params.append(params != nullptr ? params : "");
        lines.push_back(std::move(line));
      }
    } while (next != nullptr);
    return lines;
  }

  bool use_udev_;
};

}  // namespace

std::unique_ptr<Kernel> make_devmapper_kernel() { return std::make_unique<DevmapperKernel>(); }

}  // namespace lbscrypt
