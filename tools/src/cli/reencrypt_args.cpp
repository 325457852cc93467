// SPDX-License-Identifier: GPL-2.0-only
#include "reencrypt_args.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "lbscrypt/reencrypt/core.hpp"

namespace lbscrypt::cli {

namespace {

// Whether a key would be read from standard input.
bool reads_stdin(const std::optional<std::string> &key_file, bool stdin_is_terminal) {
  return key_file ? *key_file == "-" && !stdin_is_terminal : !stdin_is_terminal;
}

// --new-tpm2-credential is the new key's source, as --tpm2-credential is the old one's.
Result<void> check_new_credential_args(const ReencryptArgs &args) {
  if (args.new_sealed_passphrase && !args.new_tpm2_credential) {
    return make_error(Errc::invalid_argument,
                      "--new-sealed-passphrase says what a --new-tpm2-credential holds: give the "
                      "credential file too");
  }
  if (!args.new_tpm2_credential) {
    return Ok{};
  }
  if (args.new_key_file || args.new_keyfile_offset != 0 || args.new_keyfile_size) {
    return make_error(Errc::invalid_argument,
                      "--new-tpm2-credential is the new key's source: drop --new-key-file, "
                      "--new-keyfile-offset and --new-keyfile-size");
  }
  if (args.new_hash && !args.new_sealed_passphrase) {
    return make_error(Errc::invalid_argument,
                      "--new-hash hashes a passphrase, and the new credential holds a key: drop "
                      "--new-hash, or give --new-sealed-passphrase if it holds a passphrase");
  }
  return Ok{};
}

}  // namespace

Result<void> check_reencrypt_args(const ReencryptArgs &args, bool stdin_is_terminal) {
  const EnvironmentArgs &environment = args.old_side.environment;
  if (environment.assume_version || environment.assume_page_size) {
    return make_error(Errc::invalid_argument,
                      "--assume-version and --assume-page-size are for table and check; "
                      "reencrypt always asks the running kernel");
  }
  const bool device_given = !args.old_side.mapping.device.empty();
  const bool resume = args.resume || args.abort;
  if (args.abort && !args.active_name) {
    return make_error(Errc::invalid_argument,
                      "--abort puts an online run's mapping right: give --active-name NAME and "
                      "the run's --state");
  }
  if (resume && device_given) {
    return make_error(Errc::invalid_argument,
                      "--resume takes the device and the parameters from the state file: give "
                      "only --state and the keys");
  }
  if (!resume && !device_given && !args.active_name) {
    return make_error(Errc::invalid_argument,
                      "give the volume's device, or --active-name NAME for an open one (or "
                      "--resume)");
  }
  if (resume && args.pbkdf_iterations) {
    return make_error(Errc::invalid_argument,
                      "--pbkdf-force-iterations sets a new run's key verifiers; the state file "
                      "holds them: drop it with --resume");
  }
  if (args.pbkdf_iterations && *args.pbkdf_iterations < kVerifierMinIterations) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("--pbkdf-force-iterations {} is below {}: give {} or more",
                    *args.pbkdf_iterations, kVerifierMinIterations, kVerifierMinIterations));
  }
  if (args.keep_key && (args.new_key_file || args.new_hash || args.new_key_bits ||
                        args.new_tpm2_credential || args.new_sealed_passphrase)) {
    return make_error(Errc::invalid_argument,
                      "--keep-key keeps the old key: drop the --new-key options");
  }
  if (auto r = check_new_credential_args(args); !r) {
    return r;
  }
  // A sealed key comes through a pipe from systemd-creds, never from standard input.
  const bool old_stdin =
      !args.old_side.tpm2_credential && reads_stdin(args.old_side.key.key_file, stdin_is_terminal);
  const bool new_stdin =
      !args.new_tpm2_credential && reads_stdin(args.new_key_file, stdin_is_terminal);
  if (!args.keep_key && old_stdin && new_stdin) {
    return make_error(Errc::invalid_argument,
                      "both keys would be read from standard input: give at least one with "
                      "--key-file or --new-key-file");
  }
  return Ok{};
}

}  // namespace lbscrypt::cli
