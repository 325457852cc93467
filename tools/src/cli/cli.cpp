// SPDX-License-Identifier: GPL-2.0-only
// The command line: one CLI11 subcommand per file (*_cmd.cpp), each with its own options
// struct and handler, dispatched from the table in run().
#include "cli.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string_view>

#include "attach_cmd.hpp"
#include "benchmark_cmd.hpp"
#include "check_cmd.hpp"
#include "close_cmd.hpp"
#include "generate_cmd.hpp"
#include "lbscrypt/reencrypt/io.hpp"
#include "lbscrypt/reencrypt/plan.hpp"
#include "lbscrypt/version.hpp"
#include "matrix_cmd.hpp"
#include "open_cmd.hpp"
#include "options.hpp"
#include "output.hpp"
#include "reencrypt_cmd.hpp"
#include "seal_cmd.hpp"
#include "status_cmd.hpp"
#include "tab_cmd.hpp"
#include "table_cmd.hpp"
#include "tty.hpp"

namespace lbscrypt::cli {

namespace {

// No file the tool reads through this (lbscrypttab, fstab, mountinfo, the kernel command
// line, initramfs-tools' resume file) comes near it; /dev/zero named for one is refused once
// this much is read, not read until memory runs out.
constexpr std::size_t kMaxTextFileBytes = std::size_t{64} << 20U;

// A whole text file; Errc::not_found when it does not exist, Errc::device naming the reason
// when it is a directory or a read fails part way, Errc::invalid_argument when it is larger
// than kMaxTextFileBytes.
Result<std::string> read_text_file(const std::string &path) {
  const auto failed = [&](int error) {
    return make_error(error == ENOENT ? Errc::not_found : Errc::device,
                      fmt::format("cannot read {}: {}", path, std::strerror(error)), error);
  };
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return failed(errno);
  }
  std::string text;
  std::array<char, 65536> chunk{};
  while (true) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n > 0) {
      text.append(chunk.data(), static_cast<std::size_t>(n));
      if (text.size() > kMaxTextFileBytes) {
        ::close(fd);
        return make_error(Errc::invalid_argument,
                          fmt::format("cannot read {}: it is larger than {} MiB, which no file "
                                      "lbscrypt reads is: name the right file",
                                      path, kMaxTextFileBytes >> 20U));
      }
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      return failed(error);
    }
  }
  ::close(fd);
  return text;
}

// Now in UTC, ISO 8601 to the second, for the state file's people.
std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc) == nullptr) {
    return {};
  }
  std::array<char, 32> text{};
  const std::size_t n = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {text.data(), n};
}

}  // namespace

int exit_code(Errc code) {
  switch (code) {
    case Errc::invalid_argument:
    case Errc::refused:
    case Errc::luks_refused:
    case Errc::key:
    case Errc::kernel:
      return kExitInvalid;
    case Errc::permission:
      return kExitPermission;
    case Errc::device:
    case Errc::not_found:
      return kExitDevice;
    case Errc::exists:
    case Errc::busy:
      return kExitBusy;
  }
  return kExitInvalid;
}

bool in_path(std::string_view program) {
  const char *path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin";
  while (!dirs.empty()) {
    const auto end = dirs.find(':');
    const auto dir = dirs.substr(0, end);
    const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, program);
    if (access(candidate.c_str(), X_OK) == 0) {
      return true;
    }
    dirs = end == std::string_view::npos ? std::string_view{} : dirs.substr(end + 1);
  }
  return false;
}

Services system_services() {
  Services s;
  s.make_kernel = make_devmapper_kernel;
  s.make_devices = make_system_block_devices;
  s.stdin_is_terminal = stdin_is_terminal();
  s.stdout_is_terminal = isatty(STDOUT_FILENO) == 1;
  s.make_terminal = terminal_reader;
  s.make_observer = make_system_observer;
  s.is_root = geteuid() == 0;
  s.make_crypto = make_af_alg_crypto;
  s.attach = system_attach_services();
  if (s.stdin_is_terminal && !in_path("systemd-ask-password")) {
    // An initramfs without systemd (initramfs-tools): ask on the console, as Debian's
    // cryptroot does, with the terminal on standard input and no echo.
    s.attach.ask_passphrase = [](const PassphraseQuestion &q) {
      TerminalOptions t;
      t.prompt = fmt::format("Passphrase for lbscrypt volume {} ({}): ", q.name, q.device);
      constexpr std::uint64_t kMicro = 1000000;  // the console's limit is in whole seconds
      t.timeout_s = static_cast<unsigned>(std::min<std::uint64_t>(
          (q.timeout_us.value_or(0) + kMicro - 1) / kMicro, std::numeric_limits<unsigned>::max()));
      return terminal_reader(t)(kMaxTerminalPassphrase);
    };
  }
  s.read_file = read_text_file;
  s.installed_tool = kInstalledTool;
  s.reencrypt.make_io = [](Kernel &kernel,
                           const std::string &target_type) -> ReencryptServices::MakeIo {
    return [&kernel, target_type](const ReencryptState &state, const SecretBuffer &old_key,
                                  const SecretBuffer &new_key) {
      return open_reencrypt_io(kernel, state, old_key, new_key, target_type);
    };
  };
  s.reencrypt.make_prober = make_blkid_prober;
  s.reencrypt.now_utc = utc_now;
  s.run_child = run_child;
  s.has_program = in_path;
  return s;
}

namespace {

// The names of the commands, for a line that says which there are.
std::string command_names(const CLI::App &app) {
  std::string names;
  for (const CLI::App *sub : app.get_subcommands({})) {
    if (!names.empty()) {
      names += ", ";
    }
    names += sub->get_name();
  }
  return names;
}

// What to say when no command was parsed: none was given, or the first word that is not an
// option names none.
std::string no_command(const CLI::App &app) {
  const auto extra = app.remaining(true);
  const auto word = std::find_if(extra.begin(), extra.end(),
                                 [](const std::string &arg) { return !arg.starts_with('-'); });
  if (word == extra.end() && !extra.empty()) {
    return std::string(CLI::ExtrasError(extra).what()) + " (see lbscrypt --help)";
  }
  return fmt::format("{}: give one of {} (lbscrypt --help says what each does)",
                     word == extra.end() ? std::string("no command given")
                                         : fmt::format("'{}' is not a command", *word),
                     command_names(app));
}

// Parses the command line; an exit code when that is all there is to do (help, version, an
// error).
std::optional<int> parse(CLI::App &app, const std::vector<std::string> &args, std::ostream &out,
                         std::ostream &err) {
  std::vector<std::string> argv_tail(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::reverse(argv_tail.begin(), argv_tail.end());
  try {
    app.parse(argv_tail);
  } catch (const NumberRefused &e) {
    print_error(err, e.what());
    return kExitInvalid;
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e, out, err);
  } catch (const CLI::RequiredError &e) {
    if (app.get_subcommands().empty()) {
      print_error(err, no_command(app));
      return kExitInvalid;
    }
    // CLI11 checks what is required before what is unknown: a misspelt option
    // ("table --sector-sise 8192 /dev/x") would otherwise be reported as a
    // missing device. Name the unknown argument first.
    if (const auto extra = app.remaining(true); !extra.empty()) {
      print_error(err, std::string(CLI::ExtrasError(extra).what()) + " (see lbscrypt --help)");
      return kExitInvalid;
    }
    print_error(err, std::string(e.what()) + " (see lbscrypt --help)");
    return kExitInvalid;
  } catch (const CLI::ParseError &e) {
    print_error(err, std::string(e.what()) + " (see lbscrypt --help)");
    return kExitInvalid;
  }
  return std::nullopt;
}

// Every command's options, filled in by the parse.
struct Args {
  CommonFlags flags;
  TableArgs table;
  OpenArgs open;
  CloseArgs close;
  CloseArgs detach;
  StatusArgs status;
  CheckArgs check;
  MatrixArgs matrix;
  BenchmarkArgs benchmark;
  TabArgs tab;
  GenerateArgs generate;
  AttachArgs attach;
  ReencryptArgs reencrypt;
  SealArgs seal;
};

struct Command {
  CLI::App *app = nullptr;
  std::function<int()> run;
};

}  // namespace

int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        const Services &services) {
  CLI::App app{"lbscrypt: dm-crypt plain mappings with sector sizes up to the page size",
               "lbscrypt"};
  app.set_help_flag("--help", "Print this help and exit");
  app.set_version_flag("--version", std::string("lbscrypt ") + kToolVersion);
  app.require_subcommand(1);
  Args a;
  CommonFlags &f = a.flags;
  add_common_flags(app, f);
  const std::vector<Command> commands = {
      {add_table_command(app, a.table, f),
       [&] { return table_command(a.table, f, services, out, err); }},
      {add_open_command(app, a.open, f),
       [&] { return open_command(a.open, f, services, out, err); }},
      {add_close_command(app, a.close, f),
       [&] { return close_command(a.close, f, services, err); }},
      {add_detach_command(app, a.detach, f),
       [&] { return close_command(a.detach, f, services, err); }},
      {add_status_command(app, a.status, f),
       [&] { return status_command(a.status, f, services, out, err); }},
      {add_check_command(app, a.check, f),
       [&] { return check_command(a.check, f, services, out, err); }},
      {add_matrix_command(app, a.matrix, f),
       [&] { return matrix_command(a.matrix, services, out, err); }},
      {add_benchmark_command(app, a.benchmark, f),
       [&] { return benchmark_command(a.benchmark, f, services, out, err); }},
      {add_tab_command(app, a.tab), [&] { return tab_command(a.tab, services, out, err); }},
      {add_generate_command(app, a.generate, f),
       [&] { return generate_command(a.generate, services, err); }},
      {add_attach_command(app, a.attach, f),
       [&] { return attach_command(a.attach, f, services, out, err); }},
      {add_reencrypt_command(app, a.reencrypt, f),
       [&] { return reencrypt_command(a.reencrypt, f, services, out, err); }},
      {add_seal_command(app, a.seal, f),
       [&] { return seal_command(a.seal, f, services, out, err); }},
  };
  if (const auto done = parse(app, args, out, err)) {
    return *done;
  }
  const auto given = std::find_if(commands.begin(), commands.end(),
                                  [](const Command &c) { return c.app->parsed(); });
  if (given == commands.end()) {  // require_subcommand(1) makes parse() refuse this
    print_error(err, no_command(app));
    return kExitInvalid;
  }
  return given->run();
}

}  // namespace lbscrypt::cli
