// SPDX-License-Identifier: GPL-2.0-only
#include "reencrypt_cmd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>
#include <utility>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/reencrypt.hpp"
#include "lbscrypt/reencrypt_online_checks.hpp"
#include "lbscrypt/reencrypt_run.hpp"
#include "output.hpp"
#include "stop_signal.hpp"

namespace lbscrypt::cli {

namespace {

constexpr double kReencMebibyte = 1024.0 * 1024.0;

// Whether a key would be read from standard input.
bool reads_stdin(const std::optional<std::string> &key_file, bool stdin_is_terminal) {
  return key_file ? *key_file == "-" && !stdin_is_terminal : !stdin_is_terminal;
}

KeyOptions new_key_options(const ReencryptArgs &args, const CommonFlags &flags,
                           std::uint32_t key_bytes) {
  KeyOptions key;
  key.key_size_bits = key_bytes * 8;
  key.hash = args.new_hash;
  key.key_file = args.new_key_file;
  key.keyfile_offset = args.new_keyfile_offset;
  key.keyfile_size = args.new_keyfile_size;
  key.cipher_given = true;  // the defaults' warning is about the old volume's words
  key.key_size_given = true;
  key.quiet = flags.quiet;
  return key;
}

Result<SecretBuffer> ask_new_key(const ReencryptArgs &args, const CommonFlags &flags,
                                 const Services &services, std::ostream &err,
                                 std::uint32_t key_bytes) {
  TerminalOptions terminal_options;
  terminal_options.prompt = "Enter the new passphrase: ";
  terminal_options.verify = true;
  terminal_options.timeout_s = args.old_side.timeout_s;
  const TerminalReader terminal =
      services.make_terminal ? services.make_terminal(terminal_options) : TerminalReader{};
  auto key = derive_plain_key(new_key_options(args, flags, key_bytes), services.stdin_is_terminal,
                              terminal);
  if (!key) {
    return key.error();
  }
  for (const auto &warning : key->plan.warnings) {
    print_error(err, warning);
  }
  return std::move(key->key);
}

std::string reenc_duration(double seconds) {
  const auto whole = static_cast<std::uint64_t>(std::llround(std::max(seconds, 0.0)));
  if (whole >= 3600) {
    return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
  }
  return fmt::format("{}m{:02}s", whole / 60, whole % 60);
}

// Progress: a line rewritten in place on a terminal, a JSON record a line with --json.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream &out, bool terminal, bool as_json)
      : out_(out), terminal_(terminal), json_(as_json), start_(std::chrono::steady_clock::now()) {}

  void operator()(const Progress &p) {
    const double elapsed = seconds();
    const auto moved = static_cast<double>(p.done_bytes - p.start_bytes);
    const double rate = elapsed > 0 ? moved / elapsed : 0;
    const double left = rate > 0 ? static_cast<double>(p.total_bytes - p.done_bytes) / rate : 0;
    if (json_) {
      nlohmann::json record{{"done_bytes", p.done_bytes},
                            {"total_bytes", p.total_bytes},
                            {"bytes_per_second", static_cast<std::uint64_t>(rate)},
                            {"seconds_left", static_cast<std::uint64_t>(left)}};
      write_json(out_, record);
      out_ << '\n' << std::flush;
    } else if (terminal_) {
      const double percent = p.total_bytes == 0 ? 100.0
                                                : 100.0 * static_cast<double>(p.done_bytes) /
                                                      static_cast<double>(p.total_bytes);
      out_ << fmt::format("\rreencrypt: {:.1f} of {:.1f} MiB ({:.1f}%), {:.1f} MiB/s, {} left  ",
                          static_cast<double>(p.done_bytes) / kReencMebibyte,
                          static_cast<double>(p.total_bytes) / kReencMebibyte, percent,
                          rate / kReencMebibyte, reenc_duration(left))
           << std::flush;
      shown_ = true;
    }
  }

  // Ends the terminal's progress line.
  void end_line() {
    if (shown_) {
      out_ << '\n';
      shown_ = false;
    }
  }

  [[nodiscard]] double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::ostream &out_;
  bool terminal_;
  bool json_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
};

void print_summary(std::ostream &out, const ReencryptOutcome &outcome, double seconds, bool as_json,
                   std::uint64_t moved) {
  const ReencryptState &s = outcome.state;
  const bool finished = outcome.report.outcome == EngineOutcome::finished;
  const double rate = seconds > 0 ? static_cast<double>(moved) / seconds : 0;
  if (as_json) {
    nlohmann::json record{{"device", s.device},
                          {"active_name", outcome.active_name.value_or("")},
                          {"finished", finished},
                          {"done_bytes", outcome.report.progress.done_bytes},
                          {"total_bytes", s.data_bytes},
                          {"seconds", seconds},
                          {"bytes_per_second", static_cast<std::uint64_t>(rate)},
                          {"recovered", outcome.report.recovered}};
    if (outcome.tab) {
      record["tab"] = nlohmann::json{{"name", outcome.tab->name},
                                     {"line", outcome.tab->line},
                                     {"rewritten", outcome.tab->rewritten},
                                     {"key_replaced", outcome.tab->key_replaced}};
    }
    write_json(out, record);
    out << '\n';
    return;
  }
  if (!finished) {
    out << fmt::format(
        "stopped at {} of {} bytes of {}{}\n", outcome.report.progress.done_bytes, s.data_bytes,
        s.device,
        outcome.active_name
            ? fmt::format("; {} is resumed with the table of that position", *outcome.active_name)
            : std::string{});
    return;
  }
  out << fmt::format(
      "reencrypted {}: {} bytes in {:.1f} s ({:.1f} MiB/s){}\n", s.device, s.data_bytes, seconds,
      rate / kReencMebibyte,
      outcome.report.recovered ? ", after putting back a hotzone a cut had left" : "");
  if (outcome.active_name) {
    out << fmt::format("{} now has the new parameters, under the same name\n",
                       *outcome.active_name);
  }
  if (outcome.tab) {
    const TabOutcome &tab = *outcome.tab;
    out << fmt::format("lbscrypttab: {} (line {}) {} the new parameters{}\n", tab.name, tab.line,
                       tab.rewritten ? "now has" : "already had",
                       tab.key_file ? fmt::format("; {} holds the new key", tab.key_file->string())
                                    : std::string{});
  }
  out << fmt::format(
      "open it with: lbscrypt open --cipher {} --key-size {} --sector-size {}{}{}{} "
      "{} NAME\n",
      s.new_side.cipher, s.new_side.key_bytes * 8, s.new_side.sector_size,
      s.new_side.iv_large_sectors ? " --iv-large-sectors" : "",
      s.offset != 0 ? fmt::format(" --offset {}", s.offset) : std::string{},
      s.skip != 0 ? fmt::format(" --skip {}", s.skip) : std::string{}, s.device);
}

}  // namespace

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
                "end (a new key file replaces the line's key file then)");
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
  const EnvironmentArgs &environment = args.old_side.environment;
  if (environment.assume_version || environment.assume_page_size) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--assume-version and --assume-page-size are for table and "
                                "check; reencrypt always asks the running kernel"));
  }
  const bool device_given = !args.old_side.mapping.device.empty();
  const bool resume = args.resume || args.abort;
  if (args.abort && !args.active_name) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--abort puts an online run's mapping right: give --active-name "
                                "NAME and the run's --state"));
  }
  if (resume && device_given) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--resume takes the device and the parameters from the state "
                                "file: give only --state and the keys"));
  }
  if (!resume && !device_given && !args.active_name) {
    return fail(err, make_error(Errc::invalid_argument,
                                "give the volume's device, or --active-name NAME for an open "
                                "one (or --resume)"));
  }
  if (resume && args.pbkdf_iterations) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--pbkdf-force-iterations sets a new run's key verifiers; the "
                                "state file holds them: drop it with --resume"));
  }
  if (args.pbkdf_iterations && *args.pbkdf_iterations < kVerifierMinIterations) {
    return fail(err, make_error(Errc::invalid_argument,
                                fmt::format("--pbkdf-force-iterations {} is below {}: give {} "
                                            "or more",
                                            *args.pbkdf_iterations, kVerifierMinIterations,
                                            kVerifierMinIterations)));
  }
  if (args.keep_key && (args.new_key_file || args.new_hash || args.new_key_bits)) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--keep-key keeps the old key: drop the --new-key options"));
  }
  const bool old_stdin = reads_stdin(args.old_side.key.key_file, services.stdin_is_terminal);
  if (!args.keep_key && old_stdin && reads_stdin(args.new_key_file, services.stdin_is_terminal)) {
    return fail(err, make_error(Errc::invalid_argument,
                                "both keys would be read from standard input: give at least "
                                "one with --key-file or --new-key-file"));
  }
  auto session = make_session(environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  session->env.load_target = true;  // it loads tables: the kernel may load the target for them

  ReencryptRequest request;
  request.state = args.state;
  request.resume = resume;
  request.abort = args.abort;
  if (args.active_name) {
    request.active_name = mapping_name(*args.active_name);
  }
  request.force = args.force;
  for (const auto &file : {args.old_side.key.key_file, args.new_key_file}) {
    if (file && *file != "-") {
      request.key_files.emplace_back(*file);
    }
  }
  request.old_mapping = mapping_request(args.old_side);
  request.new_side = CryptSide{
      args.new_cipher.value_or(request.old_mapping.cipher),
      args.new_key_bits ? *args.new_key_bits / 8 : request.old_mapping.key_bytes,
      args.new_sector_size.value_or(request.old_mapping.sector_size), args.new_iv_large_sectors};
  if (args.new_key_bits && *args.new_key_bits % 8 != 0) {
    return fail(err, make_error(Errc::invalid_argument,
                                fmt::format("--new-key-size {} is not a whole number of bytes",
                                            *args.new_key_bits)));
  }
  if (args.keep_key && request.new_side.key_bytes != request.old_mapping.key_bytes) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--keep-key needs the same key size on both sides"));
  }
  if (services.read_file) {
    auto tab = services.read_file(kLbscrypttab);
    if (tab) {
      request.tab_text = std::move(tab).value();
    } else if (tab.error().code != Errc::not_found) {
      return fail(err, tab.error());
    }
  }
  request.tab_path = kLbscrypttab;
  if (request.tab_text) {
    // The volumes this system's boot needs: refused as x-initrd.attach ones are.
    request.boot = read_boot_volumes(BootArgs{}, services, err, "lbscrypt");
  }
  if (args.update_tab) {
    TabUpdate update;
    if (args.keep_key) {
      update.new_key = TabUpdate::NewKey::kept;
    } else if (args.new_key_file && *args.new_key_file != "-") {
      update.new_key = TabUpdate::NewKey::file;
      update.new_key_file = *args.new_key_file;
      update.new_keyfile_offset = args.new_keyfile_offset;
    } else {
      update.new_key = TabUpdate::NewKey::passphrase;
      update.new_hash = args.new_hash.value_or(kDefaultPlainHash);
    }
    request.update_tab = std::move(update);
  }
  if (args.hotzone_bytes != 0) {
    request.hotzone_bytes = args.hotzone_bytes;
  }
  request.verifier_iterations = args.pbkdf_iterations.value_or(kVerifierIterations);

  SecretBuffer old_copy;  // --keep-key: the new key is the old one
  ReencryptSteps steps;
  steps.old_key = [&](std::uint32_t key_bytes) -> Result<SecretBuffer> {
    MappingArgs old_args = args.old_side;
    old_args.key.key_size_bits = key_bytes * 8;
    auto key = ask_key(old_args, flags, services, err);
    if (key && args.keep_key) {
      old_copy = *key;
    }
    return key;
  };
  steps.new_key = [&](std::uint32_t key_bytes) -> Result<SecretBuffer> {
    if (args.keep_key) {
      return old_copy;
    }
    return ask_new_key(args, flags, services, err, key_bytes);
  };
  if (!services.reencrypt.make_io || !services.reencrypt.make_prober) {
    return fail(err, make_error(Errc::kernel, "reencrypt is not available in this build"));
  }
  steps.make_io = services.reencrypt.make_io(*session->kernel, environment.target_type);
  const std::unique_ptr<FilesystemProber> prober = services.reencrypt.make_prober();
  steps.probe = [&prober](const std::string &node) { return prober->probe(node); };
  steps.now_utc = services.reencrypt.now_utc;
  steps.lock_memory = [] { return lock_memory_for_online(); };
  if (services.reencrypt_registry) {
    request.registry_dir = *services.reencrypt_registry;
  }
  if (services.reencrypt.sysfs) {
    request.sysfs = *services.reencrypt.sysfs;
  }

  ProgressPrinter progress(out, services.stdout_is_terminal, args.json);
  steps.hooks.progress = [&progress](const Progress &p) { progress(p); };
  steps.hooks.stop = [] { return StopOnSignal::stop_requested(); };
  steps.started = [&](const ReencryptState &state) {
    if (!flags.quiet && !args.json) {
      print_error(err, fmt::format("reencrypting {}; if it stops, go on with: lbscrypt reencrypt "
                                   "--resume --state {}{} and both keys",
                                   state.device, args.state,
                                   request.active_name
                                       ? fmt::format(" --active-name {} (or, after a reboot, "
                                                     "without it)",
                                                     *request.active_name)
                                       : std::string{}));
    }
  };
  Result<ReencryptOutcome> outcome = make_error(Errc::kernel, "not run");
  {
    const StopOnSignal stop_on_signal;
    outcome = reencrypt_offline(request, session->env, steps);
    progress.end_line();
    if (outcome) {
      for (const auto &warning : outcome->warnings) {
        if (!flags.quiet) {
          print_error(err, warning);
        }
      }
      const std::uint64_t moved =
          outcome->report.progress.done_bytes - outcome->report.progress.start_bytes;
      print_summary(out, *outcome, progress.seconds(), args.json, moved);
      if (outcome->report.outcome == EngineOutcome::stopped) {
        print_error(err, fmt::format("stopped at a safe point; go on with: lbscrypt reencrypt "
                                     "--resume --state {}{} and both keys",
                                     args.state,
                                     request.active_name
                                         ? fmt::format(" --active-name {}", *request.active_name)
                                         : std::string{}));
      }
      out.flush();
    } else {
      print_error(err, outcome.error().message);  // before a signal's raise ends the process
      err.flush();
    }
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
