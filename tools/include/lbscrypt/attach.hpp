// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt attach`: what a generated unit runs to open one lbscrypttab volume. The key comes
// from its file or, for a passphrase, from systemd-ask-password (console, Plymouth and agents
// answer it), hashed as a typed line; an optional content check closes the mapping again when
// the key was wrong. A volume already open as the line describes is left as it is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

struct PassphraseQuestion {
  std::string name;    // the volume
  std::string device;  // as the line names it
  std::optional<std::uint32_t> timeout_s;
  bool accept_cached = true;  // false after a wrong passphrase
};

// How attach reaches the world outside the kernel; faked in the tests.
struct AttachServices {
  // The answer, without its line end (systemd-ask-password's stdout).
  std::function<Result<SecretBuffer>(const PassphraseQuestion &)> ask_passphrase;
  // Runs a program (argv[0] a path or a name looked up in PATH); its exit status.
  std::function<Result<int>(const std::vector<std::string> &argv)> run;
  // Whether a path exists (the check program under kCheckDir).
  std::function<bool(const std::string &path)> exists;
  // The mode bits of a regular key file, nullopt when it is not one (or cannot be looked at).
  std::function<std::optional<unsigned>(const std::string &path)> key_file_mode;
};

// The arguments the unit passes, as lbscrypttab has them.
struct AttachRequest {
  std::string name;
  std::string device;
  std::string key;
  std::string options;
};

struct AttachOutcome {
  DeviceInfo device;
  bool already_active = false;
  std::vector<std::string> notes;  // warnings and retries, one line each, for standard error
};

// The argv of the content check for the opened mapping at `node`: Debian's check program
// (kCheckDir/NAME, or the absolute path given) with the device and checkargs=; blkid itself
// (blkid -p) when check=blkid and Debian's program is not installed.
[[nodiscard]] std::vector<std::string> check_command(const VolumeOptions &volume,
                                                     const std::string &node,
                                                     const AttachServices &services);

[[nodiscard]] Result<AttachOutcome> attach_volume(const AttachRequest &request,
                                                  const Environment &env,
                                                  const AttachServices &services);

// The real services: systemd-ask-password, fork and exec, stat.
[[nodiscard]] AttachServices system_attach_services();

}  // namespace lbscrypt
