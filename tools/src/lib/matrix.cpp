// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/matrix.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

// 16 MiB of zeros: every sector size of the matrix divides it.
constexpr std::uint64_t kBackingSectors = 32768;
constexpr std::size_t kKeyBytes = 32;  // aes-xts-plain64 with two 128-bit keys
constexpr std::string_view kCipher = "aes-xts-plain64";
constexpr std::string_view kTablePrefix = "device-mapper: table: ";
constexpr std::string_view kDetailPrefix = "device-mapper: crypt-lbs: ";

// A device-mapper device of the run's own: removed when it goes out of scope, whatever
// the path out. release() removes it now and says whether that worked.
class ScopedDevice {
 public:
  ScopedDevice(Kernel &kernel, std::string name) : kernel_(kernel), name_(std::move(name)) {}
  ScopedDevice(const ScopedDevice &) = delete;
  ScopedDevice &operator=(const ScopedDevice &) = delete;
  ScopedDevice(ScopedDevice &&) = delete;
  ScopedDevice &operator=(ScopedDevice &&) = delete;
  ~ScopedDevice() {
    if (created_) {
      static_cast<void>(kernel_.remove(name_));
    }
  }

  Result<DeviceInfo> create(std::string target_type, std::uint64_t length, SecretBuffer params) {
    CreateRequest request;
    request.name = name_;
    request.target_type = std::move(target_type);
    request.length = length;
    request.params = std::move(params);
    auto created = kernel_.create(request);
    created_ = created.ok();
    return created;
  }

  Result<void> release() {
    if (!created_) {
      return Ok{};
    }
    created_ = false;
    return kernel_.remove(name_);
  }

  [[nodiscard]] const std::string &name() const { return name_; }

 private:
  Kernel &kernel_;
  std::string name_;
  bool created_ = false;
};

SecretBuffer test_key() {
  SecretBuffer key(kKeyBytes);
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    key.data()[i] = static_cast<std::uint8_t>(i);
  }
  return key;
}

CryptTable cell_table(const DeviceInfo &backing, const std::string &sector_size) {
  CryptTable table;
  table.length = kBackingSectors;
  table.cipher = std::string(kCipher);
  table.key = test_key();
  table.device = fmt::format("{}:{}", backing.major, backing.minor);
  table.options.sector_size_arg = sector_size;
  return table;
}

MatrixPrediction prediction(const CryptTable &table, const TargetVersion &version,
                            std::uint32_t page_size) {
  const Prediction p = predict(table, version, page_size);
  if (p.outcome == Outcome::refused) {
    return {"EINVAL", std::nullopt, p.reason};
  }
  return {"ok", p.recorded_sector_size, p.reason};
}

std::string describe(const std::string &outcome, std::optional<std::uint32_t> recorded) {
  return outcome == "ok" && recorded ? fmt::format("ok, recorded {}", *recorded) : outcome;
}

// What differs between the kernel's answer and predict()'s, or "" when nothing does.
std::string disagreement(const MatrixCell &cell) {
  const MatrixPrediction &p = cell.predicted;
  if (cell.outcome != p.outcome || (cell.outcome == "ok" && cell.recorded != p.recorded)) {
    return fmt::format("the kernel: {}; predicted: {}", describe(cell.outcome, cell.recorded),
                       describe(p.outcome, p.recorded));
  }
  if (cell.outcome == "ok" && cell.logical_block_size && cell.logical_block_size != p.recorded) {
    return fmt::format("logical block size {}, predicted {}", *cell.logical_block_size,
                       p.recorded.value_or(0));
  }
  return {};
}

// The sector size the kernel's table shows (512 without the option).
std::optional<std::uint32_t> recorded_sector_size(const std::vector<TargetLine> &lines) {
  if (lines.size() != 1) {
    return std::nullopt;
  }
  const auto table =
      parse_table_params(lines.front().params.view(), lines.front().start, lines.front().length);
  if (!table) {
    return std::nullopt;
  }
  const auto size = table->sector_size();
  return size ? std::optional(*size) : std::nullopt;
}

// The backing device: `zero`, or where the kernel has no zero target (built without
// CONFIG_DM_ZERO) `error`, built into dm core. Neither is read while a table is loaded.
Result<std::pair<DeviceInfo, std::string>> create_backing(ScopedDevice &device) {
  auto zero = device.create("zero", kBackingSectors, SecretBuffer{});
  if (zero) {
    return std::pair{*zero, std::string("zero")};
  }
  if (zero.error().code == Errc::exists) {
    return zero.error();
  }
  auto error = device.create("error", kBackingSectors, SecretBuffer{});
  if (!error) {
    return make_error(error.error().code,
                      fmt::format("cannot create the backing device {} (zero: {}; error: {})",
                                  device.name(), zero.error().message, error.error().message),
                      error.error().os_errno);
  }
  return std::pair{*error, std::string("error")};
}

// One cell: load the table, read back what the kernel made of it, remove the device.
Result<MatrixCell> run_cell(Kernel &kernel, KernelObserver &observer, const std::string &name,
                            const DeviceInfo &backing, const std::string &target,
                            const TargetVersion &version, std::uint32_t page_size,
                            const std::string &sector_size, bool &log_readable) {
  MatrixCell cell;
  cell.target = target;
  cell.version = version;
  cell.sector_size = sector_size;
  const CryptTable table = cell_table(backing, sector_size);
  cell.predicted = prediction(table, version, page_size);

  ScopedDevice device(kernel, name);
  observer.mark();
  const auto created = device.create(target, table.length, format_table_params(table));
  if (created) {
    cell.outcome = "ok";
    const auto lines = kernel.table(name);
    if (!lines) {
      return lines.error();
    }
    cell.recorded = recorded_sector_size(*lines);
    cell.logical_block_size = observer.logical_block_size(*created);
    if (auto removed = device.release(); !removed) {
      return removed.error();
    }
  } else {
    if (created.error().code == Errc::exists || created.error().code == Errc::permission) {
      return created.error();
    }
    cell.outcome = created.error().os_errno != 0 ? errno_name(created.error().os_errno) : "other";
    const auto messages = observer.messages();
    log_readable = log_readable && messages.has_value();
    if (messages) {
      cell.error = table_error_message(*messages);
    }
  }
  cell.disagreement = disagreement(cell);
  return cell;
}

}  // namespace

std::vector<std::string> default_matrix_sizes() {
  return {"512",    "1024",  "2048", "4096", "8192",  "16384", "32768",   "65536",
          "131072", "69632", "3000", "0",    "61440", "-4096", "4096abc", "+4096"};
}

std::size_t MatrixReport::disagreements() const {
  return static_cast<std::size_t>(
      std::count_if(cells.begin(), cells.end(), [](const MatrixCell &c) { return !c.agrees(); }));
}

std::string errno_name(int error) {
  if (const char *name = strerrorname_np(error); name != nullptr) {
    return name;
  }
  return fmt::format("errno {}", error);
}

std::optional<std::string> table_error_message(const std::vector<std::string> &messages) {
  std::optional<std::string> last;
  std::string detail;
  for (const auto &message : messages) {
    if (message.starts_with(kDetailPrefix)) {
      detail = message.substr(kDetailPrefix.size());
      continue;
    }
    if (message.starts_with(kTablePrefix)) {
      // "<major:minor>: <target>: <text>"
      const std::string rest = message.substr(kTablePrefix.size());
      const auto device_end = rest.find(": ");
      const auto target_end =
          device_end == std::string::npos ? device_end : rest.find(": ", device_end + 2);
      if (target_end != std::string::npos) {
        const std::string text = rest.substr(target_end + 2);
        last = detail.empty() ? text : fmt::format("{} [{}]", text, detail);
      }
    }
    detail.clear();
  }
  return last;
}

Result<MatrixReport> run_matrix(Kernel &kernel, KernelObserver &observer,
                                const MatrixOptions &options) {
  MatrixReport report;
  report.page_size = kernel.page_size();
  std::vector<std::pair<std::string, TargetVersion>> targets;
  for (const auto &target : options.targets) {
    const auto version = kernel.target_version(target);
    if (!version) {
      return version.error();
    }
    if (!version->has_value()) {
      return make_error(Errc::refused,
                        fmt::format("no device-mapper target named {} is registered: load its "
                                    "module (modprobe dm-crypt, or dm-crypt-lbs)",
                                    target));
    }
    targets.emplace_back(target, **version);
  }

  const std::string cell_name = options.name_prefix + "-cell";
  for (const auto &name : {options.name_prefix + "-zero", cell_name}) {
    if (kernel.info(name)) {
      return make_error(Errc::exists,
                        fmt::format("a device-mapper device named {} exists (left by a run "
                                    "killed hard?); remove it: dmsetup remove {}",
                                    name, name));
    }
  }
  ScopedDevice backing(kernel, options.name_prefix + "-zero");
  auto made = create_backing(backing);
  if (!made) {
    return made.error();
  }
  report.backing_target = made->second;
  for (const auto &[target, version] : targets) {
    for (const auto &size : options.sizes) {
      if (options.stop != nullptr && options.stop->load()) {
        report.interrupted = true;
        return report;
      }
      auto cell = run_cell(kernel, observer, cell_name, made->first, target, version,
                           report.page_size, size, report.log_readable);
      if (!cell) {
        return cell.error();
      }
      report.cells.push_back(std::move(cell).value());
    }
  }
  if (auto removed = backing.release(); !removed) {
    return removed.error();
  }
  return report;
}

}  // namespace lbscrypt
