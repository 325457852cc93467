// SPDX-License-Identifier: GPL-2.0-only
// The lbscrypt command line: CLI11 parsing, the operations, output, and exit codes. Kept out
// of main.cpp so the tests can drive it with fakes and string streams.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/attach.hpp"
#include "lbscrypt/benchmark.hpp"
#include "lbscrypt/device.hpp"
#include "lbscrypt/kernel.hpp"
#include "lbscrypt/keys.hpp"
#include "lbscrypt/matrix.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/reencrypt/run.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/sealed.hpp"
#include "tty.hpp"

namespace lbscrypt::cli {

// Exit codes: cryptsetup's (documented in Documentation/lbscrypt.rst).
enum ExitCode : int {
  kExitOk = 0,
  kExitInvalid = 1,     // wrong parameters, refusals, failures of the kernel
  kExitPermission = 2,  // no permission (not root), passphrases that do not match
  kExitNoMemory = 3,    // out of memory
  kExitDevice = 4,      // wrong device: missing, not a block device, mapping not active
  kExitBusy = 5,        // the mapping already exists or is in use
};

[[nodiscard]] int exit_code(Errc code);

// For reencrypt: the private mappings' I/O on a kernel, the filesystem probe, the clock, and
// where the registry and sysfs are (tests point them at a temporary directory).
struct ReencryptServices {
  using MakeIo = std::function<Result<std::unique_ptr<DeviceReencryptIo>>(
      const ReencryptState &, const SecretBuffer &, const SecretBuffer &)>;
  std::function<MakeIo(Kernel &, const std::string &target_type)> make_io;
  std::function<std::unique_ptr<FilesystemProber>()> make_prober;
  std::function<std::string()> now_utc;
  std::optional<std::filesystem::path> sysfs;
};

struct Services {
  std::function<std::unique_ptr<Kernel>()> make_kernel;
  std::function<std::unique_ptr<BlockDevices>()> make_devices;
  bool stdin_is_terminal = false;
  bool stdout_is_terminal = false;  // the key is not printed to a terminal without --showkeys
  std::function<TerminalReader(const TerminalOptions &)> make_terminal;
  std::function<std::unique_ptr<CryptoApi>()> make_crypto;  // AF_ALG, for benchmark

  // For attach: systemd-ask-password, the check program, the key file's mode.
  AttachServices attach;
  // For generate-units: lbscrypttab's text (Errc::not_found when there is none) and the
  // lbscrypt the units run.
  std::function<Result<std::string>(const std::string &path)> read_file;
  std::string installed_tool;
  // For open, attach and tab list: the registry of reencrypt runs in progress (nullopt: none
  // is consulted).
  std::optional<std::filesystem::path> reencrypt_registry{
      std::filesystem::path(kReencryptRegistry)};

  // For matrix: the kernel log and sysfs; it refuses to run without root.
  std::function<std::unique_ptr<KernelObserver>()> make_observer;
  bool is_root = false;

  ReencryptServices reencrypt;

  // For seal, and open with --tpm2-credential: systemd-creds through pipes (sealed.hpp;
  // unset: run_child), and whether a program is installed (unset: in_path).
  ChildRunner run_child;
  std::function<bool(std::string_view program)> has_program;
};

// Whether `program` is an executable in one of PATH's directories.
[[nodiscard]] bool in_path(std::string_view program);

// The real services: libdevmapper, the system's block devices, the controlling terminal.
[[nodiscard]] Services system_services();

// Runs one command line; everything goes to `out` / `err`; returns the exit code.
[[nodiscard]] int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
                      const Services &services);

}  // namespace lbscrypt::cli
