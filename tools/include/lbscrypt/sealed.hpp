// SPDX-License-Identifier: GPL-2.0-only
// Keys sealed to the machine's TPM2 as systemd credentials: `systemd-creds encrypt
// --with-key=tpm2` seals, `systemd-creds decrypt` (or a unit's LoadCredentialEncrypted=, which
// leaves the secret in $CREDENTIALS_DIRECTORY) unseals. The secret goes to and comes from
// systemd-creds through pipes, into and out of SecretBuffers: lbscrypt never writes it to a file.
//
// A credential carries a name that systemd checks when it unseals it: lbscrypt names it after
// the file, its basename without a trailing ".cred" (/etc/lbscrypt/data.cred is "data"), so a
// renamed credential must be sealed again. A credential made to be renamed (the new key of a
// reencrypt, which replaces a line's credential at the end) is sealed under the name it will
// have (seal --name).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

inline constexpr const char *kSystemdCreds = "systemd-creds";
inline constexpr const char *kCredentialSuffix = ".cred";
// The kernel's TPM2 resource manager, which systemd-creds opens (tpm2-device=auto).
inline constexpr const char *kTpmResourceManager = "tpmrm0";
// systemd-creds' own PCR choice when none is given: 7, the Secure Boot state.
inline constexpr const char *kDefaultSealPcrs = "7";
// The most a sealed secret may hold: a key (at most 1024 bytes) or a passphrase, with room.
inline constexpr std::size_t kMaxSealedBytes = 8192;
// The fewest random bytes `seal --random` draws: 128 bits.
inline constexpr std::size_t kMinRandomKeyBytes = 16;
inline constexpr std::size_t kMaxRandomKeyBytes = 1024;
inline constexpr unsigned kMaxPcr = 23;

// The name a credential file carries: its basename without a trailing ".cred". Errc::
// invalid_argument when that is no usable name (check_credential_name).
[[nodiscard]] Result<std::string> credential_id(std::string_view path);

// Whether `id` is a name systemd takes for a credential and a unit's
// LoadCredentialEncrypted=ID:PATH reads as written: Errc::invalid_argument when it is empty,
// "." or "..", longer than 255 bytes, or holds a byte systemd refuses (':', '/', anything but
// printable ASCII) or a unit line would read otherwise ('%', '\\', a quote, a blank).
[[nodiscard]] Result<void> check_credential_name(std::string_view id);

// A PCR list as systemd-creds 252 takes it: decimal PCR numbers 0 to 23 joined by '+' or ','
// ("7", "0+7", "7,14"); "none" or empty: no PCR, the key is bound to the TPM alone. Sorted; a
// PCR given twice is refused.
[[nodiscard]] Result<std::vector<unsigned>> parse_pcr_list(std::string_view text);
// The list as systemd-creds' --tpm2-pcrs= takes it: "0+7", "" for none.
[[nodiscard]] std::string format_pcr_list(const std::vector<unsigned> &pcrs);

// One line for each chosen PCR whose SHA-256 value under `sysfs` (class/tpm/tpm0/pcr-sha256/N,
// Linux 5.12 on) is all zeros, never extended: a policy on it protects nothing. A PCR that
// cannot be read gets a line saying it was not checked.
[[nodiscard]] std::vector<std::string> pcr_warnings(const std::filesystem::path &sysfs,
                                                    const std::vector<unsigned> &pcrs);

// What a child process gave back.
struct ChildOutcome {
  int status = 0;  // its exit status; 128 + N when signal N ended it
  // The first non-empty line it wrote to standard error, skipping the TPM2 library's log lines
  // ("ERROR:tcti:...") before the program's own (the first of those when there is no other).
  std::string error_line;
};

// Runs argv (argv[0] looked up in PATH) with `input` on its standard input (nullptr: /dev/null)
// and its standard output into `output` (nullptr: /dev/null); standard error is caught for
// ChildOutcome::error_line. Faked in the tests.
using ChildRunner = std::function<Result<ChildOutcome>(
    const std::vector<std::string> &argv, const SecretBuffer *input, SecretBuffer *output)>;

// The real runner: fork and exec, no shell, pipes for the three streams.
[[nodiscard]] Result<ChildOutcome> run_child(const std::vector<std::string> &argv,
                                             const SecretBuffer *input, SecretBuffer *output);

// A fresh random key of `bytes` bytes (getrandom), kMinRandomKeyBytes to kMaxRandomKeyBytes.
[[nodiscard]] Result<SecretBuffer> random_secret(std::size_t bytes);

// The whole of a key file (at most kMaxSealedBytes), to seal it.
[[nodiscard]] Result<SecretBuffer> read_secret_file(const std::string &path);

struct SealRequest {
  std::string output;          // the credential file to write
  std::vector<unsigned> pcrs;  // the PCR policy
  // The credential's name (seal --name); nullopt: the file's (credential_id).
  std::optional<std::string> name;
};

// The name request.output is sealed under: request.name, checked, or the file's.
[[nodiscard]] Result<std::string> seal_name(const SealRequest &request);

// systemd-creds encrypt --with-key=tpm2 --tpm2-pcrs=LIST --name=ID - OUTPUT.
[[nodiscard]] Result<std::vector<std::string>> seal_argv(const SealRequest &request);

// Seals `secret` into request.output through systemd-creds. Errc::key naming systemd-creds'
// first error line when it fails.
[[nodiscard]] Result<void> seal_secret(const SealRequest &request, const SecretBuffer &secret,
                                       const ChildRunner &run);

// A sealed key as a line or the command line names it.
struct SealedKey {
  std::string credential;                  // the credential file
  std::optional<std::string> tpm2_device;  // a device path; nullopt for auto
  // The name to unseal it under when it is not the file's: a new credential sealed under the
  // name of the line's credential it replaces (seal --name).
  std::optional<std::string> name;
};

// systemd-creds decrypt --name=ID [--tpm2-device=PATH] FILE -.
[[nodiscard]] Result<std::vector<std::string>> unseal_argv(const SealedKey &key);

// The secret: from `credentials_directory`/ID when that file exists (systemd unsealed it for
// the unit: LoadCredentialEncrypted=), otherwise unsealed by systemd-creds decrypt. A key with
// a name of its own (SealedKey::name) is always unsealed by systemd-creds: what a unit loaded
// under that name came from another file (the line's), and may be another key. Errc::key
// naming the credential and systemd-creds' first error line when the TPM refuses.
[[nodiscard]] Result<SecretBuffer> sealed_secret(
    const SealedKey &key, const std::optional<std::filesystem::path> &credentials_directory,
    const ChildRunner &run);

}  // namespace lbscrypt
