// SPDX-License-Identifier: GPL-2.0-only
#include "cli.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>
#include <string_view>

#include "boot_cmd.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/table.hpp"
#include "lbscrypt/torn.hpp"
#include "lbscrypt/version.hpp"
#include "matrix_cmd.hpp"
#include "output.hpp"
#include "tab_cmd.hpp"
#include "tty.hpp"

namespace lbscrypt::cli {

namespace {

// Numbers are taken as text and go through the library's one strict decimal parser: a sign,
// a space, junk or overflow is refused instead of wrapping.
struct Numbers {
  std::string offset;
  std::string skip;
  std::string size;
  std::string sector_size = "512";
  std::string key_size;
  std::string keyfile_offset;
  std::string keyfile_size;
  std::string assume_page_size;
  std::string check_sector_size;
  std::string timeout;
  std::string bytes;
};

// Everything the options fill in.
struct Options {
  MappingRequest mapping;
  KeyOptions key;
  Numbers numbers;
  std::string type = "plain";
  std::string assume_version;
  std::uint32_t assume_page_size = 0;
  std::string target_type = "crypt";
  std::string name;
  std::optional<std::uint64_t> check_sector_size;
  std::optional<std::string> check_device;
  BenchmarkRequest benchmark;
  bool json = false;
  bool read_only = false;
  bool shared = false;
  bool show_keys = false;
  bool verify = false;
  unsigned timeout_s = 0;
  bool quiet = false;
  bool verbose = false;
  bool debug = false;
};

struct Parsed {
  CLI::Option *cipher = nullptr;
  CLI::Option *key_size = nullptr;
  CLI::Option *hash = nullptr;
  CLI::Option *key_file = nullptr;
  CLI::Option *offset = nullptr;
  CLI::Option *skip = nullptr;
  CLI::Option *size = nullptr;
  CLI::Option *sector_size = nullptr;
  CLI::Option *keyfile_offset = nullptr;
  CLI::Option *keyfile_size = nullptr;
  CLI::Option *assume_version = nullptr;
  CLI::Option *assume_page_size = nullptr;
  CLI::Option *check_sector_size = nullptr;
  CLI::Option *check_device = nullptr;
  CLI::Option *timeout = nullptr;
  CLI::Option *bytes = nullptr;
  CLI::Option *driver = nullptr;
};

bool given(const CLI::Option *option) { return option != nullptr && option->count() != 0; }

// -v, -q and --debug change standard error only; they are taken before the command as after it.
void add_common_flags(CLI::App &cmd, Options &o) {
  cmd.add_flag("--verbose,-v", o.verbose,
               "Say \"Command successful.\" at the end (on standard error)");
  cmd.add_flag("--debug", o.debug, "Print what is decided, and why, on standard error");
  cmd.add_flag("--batch-mode,-q", o.quiet, "No warnings or notes");
}

void add_environment_options(CLI::App &cmd, Options &o, Parsed &p) {
  p.assume_version = cmd.add_option("--assume-version", o.assume_version,
                                    "Crypt target version X.Y.Z to plan for instead of the "
                                    "running kernel's");
  p.assume_page_size = cmd.add_option("--assume-page-size", o.numbers.assume_page_size,
                                      "Page size in bytes to plan for instead of this kernel's");
  cmd.add_option("--target", o.target_type,
                 "Device-mapper target name (crypt_lbs when loaded beside the stock module)")
      ->capture_default_str();
}

void add_mapping_options(CLI::App &cmd, Options &o, Parsed &p) {
  MappingRequest &m = o.mapping;
  KeyOptions &k = o.key;
  Numbers &n = o.numbers;
  p.cipher = cmd.add_option("--cipher,-c", m.cipher,
                            "Cipher specification (default aes-xts-plain64, as cryptsetup 2.7; "
                            "2.6: aes-cbc-essiv:sha256)");
  p.key_size = cmd.add_option("--key-size,-s", n.key_size, "Key size in bits (default 256)");
  p.hash = cmd.add_option("--hash,-h", k.hash.emplace(),
                          "Passphrase hash (default sha256, as cryptsetup 2.7; 2.6: ripemd160)");
  p.key_file = cmd.add_option("--key-file,-d", k.key_file.emplace(),
                              "Read the key from a file (used as is) or '-' for stdin");
  p.keyfile_offset =
      cmd.add_option("--keyfile-offset", n.keyfile_offset, "Bytes to skip in the key file");
  p.keyfile_size =
      cmd.add_option("--keyfile-size,-l", n.keyfile_size, "Bytes to read from the key file");
  p.offset = cmd.add_option("--offset,-o", n.offset, "Start on the device, in 512-byte sectors");
  p.skip = cmd.add_option("--skip,-p", n.skip, "IV offset, in 512-byte sectors");
  p.size = cmd.add_option("--size,-b", n.size,
                          "Size in 512-byte sectors (default: the rest of the device)");
  p.sector_size = cmd.add_option("--sector-size", n.sector_size,
                                 "Encryption sector size in bytes (default 512)");
  for (const FlagWord &flag : kFlagWords) {
    if (!flag.cli.empty()) {
      cmd.add_flag(std::string(flag.cli), m.flags.*flag.member,
                   fmt::format("dm-crypt {}", flag.table));
    }
  }
  cmd.add_flag("--verify-passphrase,-y", o.verify, "Ask for the passphrase twice");
  p.timeout = cmd.add_option("--timeout,-t", n.timeout,
                             "Seconds to wait for a passphrase on a terminal (0: no limit)");
  add_environment_options(cmd, o, p);
  add_common_flags(cmd, o);
}

template <class T>
Result<T> number(std::string_view option, const std::string &text) {
  const auto value = parse_decimal_u64(text);
  if (!value || *value > std::numeric_limits<T>::max()) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} '{}' is not a number: give decimal digits only, 0 to {}",
                                  option, text, std::numeric_limits<T>::max()));
  }
  return static_cast<T>(*value);
}

// Reads every number option that was given into its typed field.
// NOLINTNEXTLINE(readability-function-cognitive-complexity)
Result<void> settle(Options &o, const Parsed &p) {
  const Numbers &n = o.numbers;
  const auto u64 = [](const char *name, const std::string &text, std::uint64_t &out) {
    auto v = number<std::uint64_t>(name, text);
    if (v) {
      out = *v;
      return Result<void>();
    }
    return Result<void>(v.error());
  };
  const auto u32 = [](const char *name, const std::string &text, std::uint32_t &out) {
    auto v = number<std::uint32_t>(name, text);
    if (v) {
      out = *v;
      return Result<void>();
    }
    return Result<void>(v.error());
  };
  std::uint64_t size = 0;
  std::uint32_t keyfile_size = 0;
  std::uint32_t timeout = 0;
  std::uint64_t check_size = 0;
  std::uint64_t bytes = 0;
  const std::pair<const CLI::Option *, std::function<Result<void>()>> steps[] = {
      {p.offset, [&] { return u64("--offset", n.offset, o.mapping.offset); }},
      {p.skip, [&] { return u64("--skip", n.skip, o.mapping.skip); }},
      {p.size, [&] { return u64("--size", n.size, size); }},
      {p.sector_size, [&] { return u32("--sector-size", n.sector_size, o.mapping.sector_size); }},
      {p.key_size, [&] { return u32("--key-size", n.key_size, o.key.key_size_bits); }},
      {p.keyfile_offset,
       [&] { return u64("--keyfile-offset", n.keyfile_offset, o.key.keyfile_offset); }},
      {p.keyfile_size, [&] { return u32("--keyfile-size", n.keyfile_size, keyfile_size); }},
      {p.assume_page_size,
       [&] { return u32("--assume-page-size", n.assume_page_size, o.assume_page_size); }},
      {p.check_sector_size, [&] { return u64("--sector-size", n.check_sector_size, check_size); }},
      {p.timeout, [&] { return u32("--timeout", n.timeout, timeout); }},
      {p.bytes, [&] { return u64("--bytes", n.bytes, bytes); }},
  };
  for (const auto &[option, step] : steps) {
    if (given(option)) {
      if (auto r = step(); !r) {
        return r;
      }
    }
  }
  if (given(p.size)) {
    o.mapping.size = size;
  }
  if (given(p.keyfile_size)) {
    o.key.keyfile_size = keyfile_size;
  }
  if (given(p.check_sector_size)) {
    o.check_sector_size = check_size;
  }
  if (given(p.bytes)) {
    o.benchmark.bytes = bytes;
  }
  o.timeout_s = timeout;
  if (!given(p.hash)) {
    o.key.hash.reset();
  }
  if (!given(p.key_file)) {
    o.key.key_file.reset();
  }
  if (!given(p.check_device)) {
    o.check_device.reset();
  }
  if (o.key.key_size_bits % 8 == 0) {
    o.mapping.key_bytes = o.key.key_size_bits / 8;  // checked against the cipher before the key
  }
  o.key.cipher_given = given(p.cipher);
  o.key.key_size_given = given(p.key_size);
  o.key.quiet = o.quiet;
  return Ok{};
}

Result<Environment> make_environment(const Options &o, const Parsed &p, const Services &services,
                                     std::unique_ptr<Kernel> &kernel,
                                     std::unique_ptr<BlockDevices> &devices) {
  Environment env;
  if (auto r = check_target_name(o.target_type); !r) {
    return r.error();
  }
  env.target_type = o.target_type;
  if (given(p.assume_version)) {
    auto version = parse_target_version(o.assume_version);
    if (!version) {
      return version.error();
    }
    env.assume_version = *version;
  }
  if (given(p.assume_page_size)) {
    if (o.assume_page_size < 4096 || !is_power_of_two(o.assume_page_size)) {
      return make_error(Errc::invalid_argument,
                        fmt::format("--assume-page-size {} is not a power of two of at least 4096",
                                    o.assume_page_size));
    }
    env.assume_page_size = o.assume_page_size;
  }
  if (!env.assume_version || !env.assume_page_size) {
    kernel = services.make_kernel();
    env.kernel = kernel.get();
  }
  devices = services.make_devices();
  env.devices = devices.get();
  return env;
}

Result<MappingType> mapping_type(const std::string &type) {
  if (type == "plain") {
    return MappingType::plain;
  }
  if (type == "luks" || type == "luks1" || type == "luks2") {
    return MappingType::luks;
  }
  return make_error(Errc::invalid_argument,
                    fmt::format("--type {} is not known: use plain or luks", type));
}

// The key, asked for only after the table is known to load (prepare_table).
Result<SecretBuffer> ask_key(const Options &o, const Services &services, std::ostream &err) {
  TerminalOptions terminal_options;
  terminal_options.verify = o.verify;
  terminal_options.timeout_s = o.timeout_s;
  const TerminalReader terminal =
      services.make_terminal ? services.make_terminal(terminal_options) : TerminalReader{};
  auto key = derive_plain_key(o.key, services.stdin_is_terminal, terminal);
  if (!key) {
    return key.error();
  }
  for (const auto &warning : key->plan.warnings) {
    err << one_line(warning) << '\n';
  }
  return std::move(key->key);
}

Result<CryptTable> planned_table(const Options &o, const Environment &env, const Services &services,
                                 std::ostream &err) {
  auto table = prepare_table(o.mapping, env);
  if (!table) {
    return table.error();
  }
  if (o.debug) {
    err << "# table (before the key): " << format_table_line(*table, KeyDisplay::hide).view()
        << '\n';
  }
  auto key = ask_key(o, services, err);
  if (!key) {
    return key.error();
  }
  table->key = std::move(key).value();
  return table;
}

int fail(std::ostream &err, const Error &error) {
  print_error(err, error.message);
  return exit_code(error.code);
}

// The path `status` names, as cryptsetup does: the argument when it is a path, otherwise
// /dev/mapper/NAME.
std::string status_path(const std::string &argument) {
  return argument.find('/') != std::string::npos ? argument : "/dev/mapper/" + argument;
}

// The warning that a power failure can tear a sector: standard error, unless -q (the tool's
// -q drops warnings and notes).
void warn_torn(std::ostream &err, const Options &o, const std::optional<std::string> &warning) {
  if (warning && !o.quiet) {
    print_error(err, *warning);
  }
}

// "Command successful." is chatter: standard error, so a command's standard output stays
// what it produces (a table line for dmsetup, JSON, a status).
int succeed(std::ostream &err, const Options &o) {
  if (o.verbose) {
    err << "Command successful.\n";
  }
  return kExitOk;
}

void add_benchmark_options(CLI::App &cmd, Options &o, Parsed &p) {
  p.cipher = cmd.add_option("--cipher,-c", o.mapping.cipher,
                            "Cipher specification (default aes-xts-plain64)");
  p.key_size =
      cmd.add_option("--key-size,-s", o.numbers.key_size, "Key size in bits (default 256)");
  p.driver = cmd.add_option(
      "--driver", o.benchmark.driver.emplace(),
      "Kernel driver to use instead of the cipher's algorithm (e.g. lbs-engine-xts-aes)");
  auto *time = cmd.add_option("--time", o.benchmark.seconds,
                              "Seconds per unit size and direction (default 0.2)")
                   ->check(CLI::Range(0.01, 60.0));
  p.bytes = cmd.add_option("--bytes", o.numbers.bytes,
                           "Bytes per unit size and direction, instead of a time");
  time->excludes(p.bytes);
  cmd.add_flag("--json", o.json, "JSON records, one a line");
  add_environment_options(cmd, o, p);
  add_common_flags(cmd, o);
}

int benchmark(const Options &o, const Parsed &p, const Environment &env, const Services &services,
              std::ostream &out, std::ostream &err) {
  BenchmarkRequest request = o.benchmark;
  request.cipher = o.mapping.cipher;
  request.key_bits = o.key.key_size_bits;
  if (!given(p.driver)) {
    request.driver.reset();
  }
  const auto crypto = services.make_crypto ? services.make_crypto() : nullptr;
  if (!crypto) {
    return fail(err, make_error(Errc::kernel, "no crypto API to measure"));
  }
  const auto report = run_benchmark(request, env, *crypto);
  if (!report) {
    return fail(err, report.error());
  }
  print_benchmark(out, *report, o.target_type, o.json);
  return succeed(err, o);
}

// A whole text file; Errc::not_found when it does not exist.
Result<std::string> read_text_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    return make_error(error == ENOENT ? Errc::not_found : Errc::device,
                      fmt::format("cannot read {}: {}", path, std::strerror(error)), error);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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

// Whether `program` is an executable in one of PATH's directories.
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
  return s;
}

namespace {

// Every command, its options and what they fill in.
struct Commands {
  Options o;
  Parsed table_p;
  Parsed open_p;
  Parsed check_p;
  Parsed bench_p;
  MatrixArgs matrix_args;
  GenerateArgs generate_args;
  TabArgs tab_args;
  AttachArgs attach_args;
  CLI::App *table = nullptr;
  CLI::App *open = nullptr;
  CLI::App *close = nullptr;
  CLI::App *status = nullptr;
  CLI::App *check = nullptr;
  CLI::App *matrix = nullptr;
  CLI::App *bench = nullptr;
  CLI::App *generate = nullptr;
  CLI::App *tab = nullptr;
  CLI::App *attach = nullptr;

  // The options of the command given (close, status and attach take no number options).
  [[nodiscard]] const Parsed &parsed() const {
    static const Parsed none;
    return table->parsed()   ? table_p
           : open->parsed()  ? open_p
           : check->parsed() ? check_p
           : bench->parsed() ? bench_p
                             : none;
  }
};

void add_commands(CLI::App &app, Commands &c) {
  Options &o = c.o;
  add_common_flags(app, o);
  c.table = app.add_subcommand("table", "Print a crypt table line for dmsetup create");
  c.table->set_help_flag("--help");
  add_mapping_options(*c.table, o, c.table_p);
  c.table->add_flag("--json", o.json, "JSON output");
  c.table->add_flag("--showkeys", o.show_keys, "Print the key even when stdout is a terminal");
  c.table->add_option("device", o.mapping.device, "Backing device")->required();

  c.open = app.add_subcommand("open", "Open a plain mapping (libdevmapper)");
  c.open->set_help_flag("--help");
  add_mapping_options(*c.open, o, c.open_p);
  c.open->add_option("--type,-M", o.type, "Mapping type: plain")->capture_default_str();
  c.open->add_flag("--readonly,-r", o.read_only, "Read-only mapping");
  c.open->add_flag("--shared", o.shared,
                   "Map a device that is already in use (another mapping over it), as cryptsetup");
  c.open->add_option("device", o.mapping.device, "Backing device or regular file")->required();
  c.open->add_option("name", o.name, "Mapping name")->required();

  c.close = app.add_subcommand("close", "Remove a mapping");
  c.close->set_help_flag("--help");
  c.close->add_option("--target", o.target_type, "Device-mapper target name")
      ->capture_default_str();
  add_common_flags(*c.close, o);
  c.close->add_option("name", o.name, "Mapping name or /dev/mapper/NAME")->required();

  c.status = app.add_subcommand("status", "Report a mapping");
  c.status->set_help_flag("--help");
  c.status->add_option("--target", o.target_type, "Device-mapper target name")
      ->capture_default_str();
  c.status->add_flag("--json", o.json, "JSON output");
  add_common_flags(*c.status, o);
  c.status->add_option("name", o.name, "Mapping name or /dev/mapper/NAME")->required();

  c.check = app.add_subcommand("check", "What this kernel allows");
  c.check->set_help_flag("--help");
  c.check_p.check_sector_size = c.check->add_option("--sector-size", o.numbers.check_sector_size,
                                                    "Sector size to try, bytes");
  c.check_p.check_device = c.check->add_option(
      "--device", o.check_device.emplace(),
      "Block device a mapping would sit on: warn when a power failure can tear a sector there");
  c.check->add_option("--type", o.type, "plain or luks")->capture_default_str();
  c.check->add_flag("--json", o.json, "JSON output");
  add_environment_options(*c.check, o, c.check_p);
  add_common_flags(*c.check, o);

  c.matrix = add_matrix_command(app, c.matrix_args);
  add_common_flags(*c.matrix, o);

  c.bench = app.add_subcommand("benchmark", "The kernel's cipher per unit size (AF_ALG)");
  c.bench->set_help_flag("--help");
  add_benchmark_options(*c.bench, o, c.bench_p);

  c.tab = add_tab_command(app, c.tab_args);
  c.generate = add_generate_command(app, c.generate_args);
  add_common_flags(*c.generate, o);
  c.attach = add_attach_command(app, c.attach_args);
  c.attach->add_option("--target", o.target_type, "Device-mapper target name")
      ->capture_default_str();
  add_common_flags(*c.attach, o);
}

// Parses the command line; an exit code when that is all there is to do (help, version, an
// error).
std::optional<int> parse(CLI::App &app, const std::vector<std::string> &args, std::ostream &out,
                         std::ostream &err) {
  std::vector<std::string> argv_tail(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::reverse(argv_tail.begin(), argv_tail.end());
  try {
    app.parse(argv_tail);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e, out, err);
  } catch (const CLI::RequiredError &e) {
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

int table_command(const Options &o, const Environment &env, const Services &services,
                  std::ostream &out, std::ostream &err) {
  if (env.devices->is_regular_file(o.mapping.device)) {
    return fail(err,
                make_error(Errc::device, fmt::format("{} is a regular file; a table needs a block "
                                                     "device: attach it with losetup first "
                                                     "(lbscrypt open does that itself)",
                                                     o.mapping.device)));
  }
  const auto planned = planned_table(o, env, services, err);
  if (!planned) {
    return fail(err, planned.error());
  }
  auto known = capabilities(env);
  if (!known) {
    KnownCapabilities unknown;  // up to 4096 the table did not need the kernel
    unknown.target_reachable = false;
    unknown.target_loaded = false;
    unknown.caps.page_size = env.assume_page_size    ? *env.assume_page_size
                             : env.kernel != nullptr ? env.kernel->page_size()
                                                     : 0;
    known = unknown;
  }
  // dmsetup's convention: a key does not go to a terminal unless --showkeys asks for it.
  const bool hide = services.stdout_is_terminal && !o.show_keys;
  print_table(out, *planned, o.target_type, *known, o.json,
              hide ? KeyDisplay::hide : KeyDisplay::show);
  if (hide && !o.quiet) {
    err << "lbscrypt: the key is shown as zeros on a terminal; pass --showkeys to print it, "
           "or redirect the output\n";
  }
  return succeed(err, o);
}

int open_command(const Options &o, const Environment &env, const Services &services,
                 std::ostream &out, std::ostream &err) {
  const std::string name = mapping_name(o.name);
  auto table = prepare_table(o.mapping, env);
  if (!table) {
    return fail(err, table.error());
  }
  if (o.debug) {
    err << "# table (before the key): " << format_table_line(*table, KeyDisplay::hide).view()
        << '\n';
  }
  // Already open as asked: nothing to do, and no key to ask for (cryptsetup's systemd units
  // succeed likewise when started twice).
  const auto active = active_as(name, *table, o.key.key_size_bits / 8, o.read_only, env);
  if (!active) {
    return fail(err, active.error());
  }
  if (*active) {
    OpenResult same;
    same.device = **active;
    same.table = std::move(table).value();
    print_opened(out, same);
    warn_torn(err, o, torn_sector_warning(place_of(same.table), env));
    if (!o.quiet) {
      print_error(err, fmt::format("{} is already active as requested; nothing done", name));
    }
    return succeed(err, o);
  }
  // Before the passphrase: a device in use is refused without asking for it.
  if (const auto free = check_device_free(o.mapping.device, o.shared, env); !free) {
    return fail(err, free.error());
  }
  auto key = ask_key(o, services, err);
  if (!key) {
    return fail(err, key.error());
  }
  table->key = std::move(key).value();
  const auto opened = open_mapping(name, std::move(table).value(), o.read_only, env, o.shared);
  if (!opened) {
    return fail(err, opened.error());
  }
  print_opened(out, *opened);
  warn_torn(err, o, opened->torn_warning);
  return succeed(err, o);
}

int status_command(const Options &o, const Environment &env, std::ostream &out, std::ostream &err) {
  const auto report = mapping_status(mapping_name(o.name), env);
  if (!report) {
    if (report.error().code == Errc::not_found) {
      // cryptsetup's answer for a mapping that is not there: on stdout, exit 4.
      out << fmt::format("{} is inactive.\n", status_path(o.name));
      return kExitDevice;
    }
    return fail(err, report.error());
  }
  print_status(out, *report, status_path(o.name), o.target_type, o.json);
  warn_torn(err, o, report->torn_warning);
  return succeed(err, o);
}

int check_command(const Options &o, MappingType type, const Environment &env, std::ostream &out,
                  std::ostream &err) {
  const auto report = check(env, o.check_sector_size, type, o.check_device);
  if (!report) {
    return fail(err, report.error());
  }
  print_check(out, *report, o.target_type, o.json);
  warn_torn(err, o, report->torn_warning);
  return report->refusal ? exit_code(report->refusal->code) : succeed(err, o);
}

}  // namespace

int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        const Services &services) {
  CLI::App app{"lbscrypt: dm-crypt plain mappings with sector sizes up to the page size",
               "lbscrypt"};
  app.set_help_flag("--help", "Print this help and exit");
  app.set_version_flag("--version", std::string("lbscrypt ") + kToolVersion);
  app.require_subcommand(1);
  Commands c;
  add_commands(app, c);
  if (const auto done = parse(app, args, out, err)) {
    return *done;
  }
  Options &o = c.o;
  if (c.matrix->parsed()) {
    return matrix_command(c.matrix_args, services, out, err);
  }
  if (c.generate->parsed()) {
    return generate_command(c.generate_args, services, err);
  }
  if (c.tab->parsed()) {
    return tab_command(c.tab_args, services, out, err);
  }
  const Parsed &p = c.parsed();
  if (const auto settled = settle(o, p); !settled) {
    return fail(err, settled.error());
  }
  if (o.debug) {
    err << "# lbscrypt " << kToolVersion << '\n';
  }
  if (c.open->parsed() && (given(p.assume_version) || given(p.assume_page_size))) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--assume-version and --assume-page-size are for table and "
                                "check; open always asks the running kernel"));
  }
  const auto type = mapping_type(o.type);
  if (!type) {
    return fail(err, type.error());
  }
  if (c.open->parsed() && *type != MappingType::plain) {
    return fail(err, make_error(Errc::invalid_argument,
                                "lbscrypt opens plain mappings only; use cryptsetup for LUKS"));
  }
  std::unique_ptr<Kernel> kernel;
  std::unique_ptr<BlockDevices> devices;
  auto env = make_environment(o, p, services, kernel, devices);
  if (!env) {
    return fail(err, env.error());
  }
  if (c.table->parsed()) {
    return table_command(o, *env, services, out, err);
  }
  if (c.check->parsed()) {
    return check_command(o, *type, *env, out, err);
  }
  if (c.bench->parsed()) {
    return benchmark(o, c.bench_p, *env, services, out, err);
  }
  if (c.open->parsed() || c.attach->parsed()) {
    env->load_target = true;  // they load a table: the kernel may load the target for it
    return c.open->parsed() ? open_command(o, *env, services, out, err)
                            : attach_command(c.attach_args, *env, services, out, err);
  }
  if (c.close->parsed()) {
    const auto closed = close_mapping(mapping_name(o.name), *env);
    return closed ? succeed(err, o) : fail(err, closed.error());
  }
  return status_command(o, *env, out, err);
}

}  // namespace lbscrypt::cli
