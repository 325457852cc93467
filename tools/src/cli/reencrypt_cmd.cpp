// SPDX-License-Identifier: GPL-2.0-only
#include "reencrypt_cmd.hpp"

#include <fmt/format.h>

#include <memory>
#include <ostream>
#include <string>

#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/reencrypt/online_checks.hpp"
#include "lbscrypt/reencrypt/run.hpp"
#include "reencrypt_args.hpp"
#include "reencrypt_report.hpp"
#include "reencrypt_request.hpp"
#include "stop_signal.hpp"

namespace lbscrypt::cli {

CLI::App *add_reencrypt_command(CLI::App &app, ReencryptArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand(
      "reencrypt", "Change a plain volume's key, cipher or sector size in place, closed or open");
  cmd->set_help_flag("--help");
  add_mapping_options(*cmd, args.old_side, flags);
  add_text(*cmd, "--new-cipher", args.new_cipher, "The new cipher (default: the old one)");
  add_number(*cmd, "--new-key-size", args.new_key_bits,
             "The new key's size in bits (default: the old one's)");
  add_number(*cmd, "--new-sector-size", args.new_sector_size,
             "The new encryption sector size in bytes (default: the old one)");
  cmd->add_flag("--new-iv-large-sectors", args.new_iv_large_sectors,
                "dm-crypt iv_large_sectors with the new parameters");
  add_text(*cmd, "--new-hash", args.new_hash, "The new passphrase's hash (default sha256)");
  add_text(*cmd, "--new-key-file", args.new_key_file,
           "Read the new key from a file (used as is) or '-' for stdin");
  add_text(*cmd, "--new-tpm2-credential", args.new_tpm2_credential,
           "Unseal the new key from this credential file with the TPM2 (lbscrypt seal; with "
           "--update-tab and a sealed line, sealed under the name of the line's credential)");
  cmd->add_flag("--new-sealed-passphrase", args.new_sealed_passphrase,
                "The --new-tpm2-credential holds a passphrase, hashed with --new-hash (default "
                "sha256)");
  add_number(*cmd, "--new-keyfile-offset", args.new_keyfile_offset,
             "Bytes to skip in the new key file");
  add_number(*cmd, "--new-keyfile-size", args.new_keyfile_size,
             "Bytes to read from the new key file");
  cmd->add_flag("--keep-key", args.keep_key,
                "Keep the old key (a change of cipher mode or sector size alone)");
  cmd->add_option("--state", args.state,
                  "The run's state file, on another filesystem than the volume (its journal "
                  "is STATE.journal beside it)")
      ->required();
  cmd->add_flag("--resume", args.resume,
                "Go on with the run of --state (after a stop, a crash or a power cut)");
  add_text(*cmd, "--active-name", args.active_name,
           "Online: the volume is open as this mapping (and may be mounted); it stays open");
  cmd->add_flag("--abort", args.abort,
                "With --active-name: resume the mapping with the run's present table and stop, "
                "keeping the run");
  cmd->add_flag("--force", args.force,
                "Go on when no filesystem or other signature proves the old key");
  cmd->add_flag("--update-tab", args.update_tab,
                "A volume lbscrypttab lists: rewrite its line with the new parameters at the "
                "end (a new key file or credential replaces the line's then)");
  add_number(*cmd, "--hotzone-size", args.hotzone_bytes,
             "Bytes converted per step (default 64 MiB; the journal's size)");
  add_number(*cmd, "--pbkdf-force-iterations", args.pbkdf_iterations,
             fmt::format("PBKDF2 iterations of the state file's key verifiers (default {}, at "
                         "least {})",
                         kVerifierIterations, kVerifierMinIterations));
  cmd->add_flag("--json", args.json, "Progress and summary as JSON, a record a line");
  cmd->add_option("device", args.old_side.mapping.device, "The volume's block device");
  return cmd;
}

int reencrypt_command(const ReencryptArgs &args, const CommonFlags &flags, const Services &services,
                      std::ostream &out, std::ostream &err) {
  announce(err, flags);
  if (auto checked = check_reencrypt_args(args, services.stdin_is_terminal); !checked) {
    return fail(err, checked.error());
  }
  const EnvironmentArgs &environment = args.old_side.environment;
  auto session = make_session(environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  session->env.load_target = true;  // it loads tables: the kernel may load the target for them
  const auto built = reencrypt_request(args, services);
  if (!built) {
    return fail(err, built.error());
  }
  ReencryptRequest request = *built;
  if (request.tab_text) {
    // The volumes this system's boot needs: refused as x-initrd.attach ones are.
    request.boot = read_boot_volumes(BootArgs{}, services, err, "lbscrypt");
  }

  SecretBuffer old_copy;  // --keep-key: the new key is the old one
  ReencryptSteps steps;
  add_key_steps(steps, args, flags, services, err, old_copy);
  if (!services.reencrypt.make_io || !services.reencrypt.make_prober) {
    return fail(err, make_error(Errc::kernel, "reencrypt is not available in this build"));
  }
  steps.make_io = services.reencrypt.make_io(*session->kernel, environment.target_type);
  const std::unique_ptr<FilesystemProber> prober = services.reencrypt.make_prober();
  steps.probe = [&prober](const std::string &node) { return prober->probe(node); };
  steps.now_utc = services.reencrypt.now_utc;
  steps.lock_memory = [] { return lock_memory_for_online(); };

  ReencryptProgress progress(out, services.stdout_is_terminal, args.json);
  steps.hooks.progress = [&progress](const Progress &p) { progress(p); };
  steps.hooks.stop = [] { return StopOnSignal::stop_requested(); };
  steps.started = [&](const ReencryptState &state) {
    print_reencrypt_started(err, args, flags, state, request.active_name);
  };
  Result<ReencryptOutcome> outcome = make_error(Errc::kernel, "not run");
  {
    const StopOnSignal stop_on_signal;
    outcome = reencrypt_offline(request, session->env, steps);
    print_reencrypt_outcome(out, err, progress, outcome, args, flags, request.active_name);
  }  // a signal that stopped the run is raised again here
  if (!outcome) {
    return exit_code(outcome.error().code);
  }
  if (outcome->report.outcome == EngineOutcome::stopped && !args.abort) {
    return kExitInvalid;
  }
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
