// SPDX-License-Identifier: GPL-2.0-only
// The sector_size acceptance matrix: load one crypt table per sector_size spelling over a
// throwaway device-mapper device and report what the kernel did with each, beside what
// predict() says it would do. The kernel log and sysfs are read through KernelObserver, so the
// logic runs against fakes in the unit tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/gating.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/target_version.hpp"

namespace lbscrypt {

// What the matrix reads beside device-mapper.
class KernelObserver {
 public:
  KernelObserver() = default;
  KernelObserver(const KernelObserver &) = delete;
  KernelObserver &operator=(const KernelObserver &) = delete;
  KernelObserver(KernelObserver &&) = delete;
  KernelObserver &operator=(KernelObserver &&) = delete;
  virtual ~KernelObserver() = default;

  // Forgets what the kernel logged so far; messages() returns what it logs from now on.
  virtual void mark() = 0;
  // The kernel log's messages since mark(), oldest first, without their prefix fields.
  // nullopt when the log cannot be read (no /dev/kmsg, or no permission).
  [[nodiscard]] virtual std::optional<std::vector<std::string>> messages() = 0;
  // The logical block size of a mapped device (sysfs queue/logical_block_size).
  [[nodiscard]] virtual std::optional<std::uint32_t> logical_block_size(
      const DeviceInfo &device) = 0;
};

// The real one: /dev/kmsg (read from its end, non-blocking, so nothing is cleared) and
// /sys/dev/block/MAJ:MIN.
[[nodiscard]] std::unique_ptr<KernelObserver> make_system_observer();

// The matrix's spellings: every power of two from 512 to 131072, a value stock dm-crypt
// truncates to 4096 (69632), non-powers, zero, and a sign or junk around 4096.
[[nodiscard]] std::vector<std::string> default_matrix_sizes();

struct MatrixOptions {
  std::vector<std::string> targets{"crypt"};
  std::vector<std::string> sizes = default_matrix_sizes();
  std::string name_prefix = "lbscrypt-matrix";  // the devices are <prefix>-zero, <prefix>-cell
  // Polled between cells: true stops the run (a signal arrived); what ran is reported.
  const std::atomic<bool> *stop = nullptr;
};

struct MatrixPrediction {
  std::string outcome;  // "ok" or "EINVAL"
  std::optional<std::uint32_t> recorded;
  std::string reason;
};

struct MatrixCell {
  std::string target;
  TargetVersion version;
  std::string sector_size;                // the argument as written
  std::string outcome;                    // "ok", or the errno's name ("EINVAL", "EBUSY", ...)
  std::optional<std::uint32_t> recorded;  // the kernel's table: sector_size, 512 if none
  std::optional<std::uint32_t> logical_block_size;  // of the mapped device
  // The kernel's message for a refusal: the ti->error text, with the detail line
  // dm-crypt-lbs logs before it in brackets.
  std::optional<std::string> error;
  MatrixPrediction predicted;
  std::string disagreement;  // empty when the kernel did what predict() said

  [[nodiscard]] bool agrees() const { return disagreement.empty(); }
  // The kernel loaded the table but kept another value than the one written.
  [[nodiscard]] bool truncated() const {
    return outcome == "ok" && recorded && std::to_string(*recorded) != sector_size;
  }
};

struct MatrixReport {
  std::uint32_t page_size = 0;
  std::string backing_target;  // "zero", or "error" where the kernel has no zero target
  std::vector<MatrixCell> cells;
  bool interrupted = false;
  bool log_readable = true;  // false: no kernel messages (the log could not be read)

  [[nodiscard]] std::size_t disagreements() const;
};

// Runs the matrix. Both devices are removed on every return path; a leftover device of the
// same names (an earlier run killed hard) is Errc::exists. Errc::refused when a target is not
// registered.
[[nodiscard]] Result<MatrixReport> run_matrix(Kernel &kernel, KernelObserver &observer,
                                              const MatrixOptions &options);

// The kernel's message for a refused table, from the log lines since the load: the last
// "device-mapper: table: <dev>: <target>: <text>" line's text, and the "device-mapper:
// crypt-lbs: <detail>" line just before it (if any) in brackets.
[[nodiscard]] std::optional<std::string> table_error_message(
    const std::vector<std::string> &messages);

// "EINVAL" for EINVAL; "errno N" where the C library knows no name.
[[nodiscard]] std::string errno_name(int error);

}  // namespace lbscrypt
