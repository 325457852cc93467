// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt attach`: what a generated unit runs to open one lbscrypttab volume. The key comes
// from its file, from a credential sealed to the TPM2 (tpm2-device=) or, for a passphrase, from
// systemd-ask-password (console, Plymouth and agents answer it), hashed as a typed line; an
// optional content check closes the mapping again when the key was wrong. A volume already open
// as the line describes is left as it is.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/sealed.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

struct PassphraseQuestion {
  std::string name;                         // the volume
  std::string device;                       // as the line names it
  std::optional<std::uint64_t> timeout_us;  // this prompt's limit (timeout=); none or 0: no limit
  bool keep = true;            // the answer goes to the kernel keyring (password-cache=no: not)
  bool accept_cached = false;  // a kept answer is taken without asking (first try only)
};

// Whether the first try takes a passphrase another volume's answer left in the kernel keyring:
// with check= (a wrong one fails the check and is asked for again) or password-cache=yes; never
// otherwise, as plain mode would open the volume with any passphrase, silently.
[[nodiscard]] bool accepts_cached_passphrase(const VolumeOptions &volume);

// How attach reaches the world outside the kernel; faked in the tests.
struct AttachServices {
  // The answer, without its line end (systemd-ask-password's stdout).
  std::function<Result<SecretBuffer>(const PassphraseQuestion &)> ask_passphrase;
  // Runs a program (argv[0] a path or a name looked up in PATH); its exit status.
  std::function<Result<int>(const std::vector<std::string> &argv)> run;
  // Whether a path exists (the check program under kCheckDir).
  std::function<bool(const std::string &path)> exists;
  // The path a link resolves to (every link followed), nullopt when it does not exist: for a
  // device path a table line cannot hold as written (udev's \xNN names).
  std::function<std::optional<std::string>(const std::string &path)> device_behind;
  // The mode bits of a regular key file, nullopt when it is not one (or cannot be looked at).
  std::function<std::optional<unsigned>(const std::string &path)> key_file_mode;
  // A sealed key's secret (tpm2-device=): from $CREDENTIALS_DIRECTORY when the unit's
  // LoadCredentialEncrypted= put it there, else unsealed by systemd-creds (sealed.hpp).
  std::function<Result<SecretBuffer>(const SealedKey &key)> unseal;
};

// The volume key from a sealed secret: a key is used as a key file is, its first
// key.key_size_bits / 8 bytes; a passphrase (`passphrase`: x-lbscrypt.sealed=passphrase,
// open's --sealed-passphrase) is hashed with key.hash (default sha256). Errc::key when a key is
// shorter than that.
[[nodiscard]] Result<SecretBuffer> key_from_sealed(const SecretBuffer &secret,
                                                   const KeyOptions &key, bool passphrase,
                                                   std::string_view credential);

// The SealedKey a line's key field and tpm2-device= name.
[[nodiscard]] SealedKey sealed_key_of(const std::string &key, const VolumeOptions &volume);

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
  // When a power failure can tear a sector of the mapping, opened or found (torn.hpp), as
  // `open` reports it.
  std::optional<std::string> torn_warning;
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
// The same with the options already parsed from request.options.
[[nodiscard]] Result<AttachOutcome> attach_volume(const AttachRequest &request,
                                                  VolumeOptions volume, const Environment &env,
                                                  const AttachServices &services);

// The real services: systemd-ask-password, fork and exec, stat.
[[nodiscard]] AttachServices system_attach_services();

}  // namespace lbscrypt
