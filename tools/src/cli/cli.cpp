// SPDX-License-Identifier: GPL-2.0-only
#include "cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ostream>

#include "lbscrypt/numbers.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/version.hpp"
#include "output.hpp"
#include "tty.hpp"

namespace lbscrypt::cli {

namespace {

// Everything the options fill in.
struct Options {
  MappingRequest mapping;
  KeyOptions key;
  std::string type = "plain";
  std::string assume_version;
  std::uint32_t assume_page_size = 0;
  std::string target_type = "crypt";
  std::string name;
  std::uint64_t check_sector_size = 0;
  bool json = false;
  bool read_only = false;
};

struct Parsed {
  CLI::Option *size = nullptr;
  CLI::Option *hash = nullptr;
  CLI::Option *key_file = nullptr;
  CLI::Option *keyfile_size = nullptr;
  CLI::Option *assume_version = nullptr;
  CLI::Option *assume_page_size = nullptr;
  CLI::Option *check_sector_size = nullptr;
};

void add_environment_options(CLI::App &cmd, Options &o, Parsed &p) {
  p.assume_version = cmd.add_option("--assume-version", o.assume_version,
                                    "Crypt target version X.Y.Z to plan for instead of the "
                                    "running kernel's");
  p.assume_page_size = cmd.add_option("--assume-page-size", o.assume_page_size,
                                      "Page size in bytes to plan for instead of this kernel's");
  cmd.add_option("--target", o.target_type,
                 "Device-mapper target name (crypt_lbs when loaded beside the stock module)")
      ->capture_default_str();
}

void add_mapping_options(CLI::App &cmd, Options &o, Parsed &p) {
  MappingRequest &m = o.mapping;
  KeyOptions &k = o.key;
  cmd.add_option("--cipher,-c", m.cipher, "Cipher specification")->capture_default_str();
  cmd.add_option("--key-size,-s", k.key_size_bits, "Key size in bits")->capture_default_str();
  p.hash = cmd.add_option("--hash,-h", k.hash.emplace(),
                          "Passphrase hash (default ripemd160, as cryptsetup 2.6 plain)");
  p.key_file = cmd.add_option("--key-file,-d", k.key_file.emplace(),
                              "Read the key from a file (used as is) or '-' for stdin");
  cmd.add_option("--keyfile-offset", k.keyfile_offset, "Bytes to skip in the key file");
  p.keyfile_size = cmd.add_option("--keyfile-size,-l", k.keyfile_size.emplace(),
                                  "Bytes to read from the key file");
  cmd.add_option("--offset,-o", m.offset, "Start on the device, in 512-byte sectors");
  cmd.add_option("--skip,-p", m.skip, "IV offset, in 512-byte sectors");
  p.size = cmd.add_option("--size,-b", m.size.emplace(),
                          "Size in 512-byte sectors (default: the rest of the device)");
  cmd.add_option("--sector-size", m.sector_size, "Encryption sector size in bytes")
      ->capture_default_str();
  cmd.add_flag("--iv-large-sectors", m.iv_large_sectors, "IV counts sector-size units");
  cmd.add_flag("--allow-discards", m.allow_discards, "Pass discards through");
  cmd.add_flag("--perf-same_cpu_crypt", m.same_cpu_crypt, "dm-crypt same_cpu_crypt");
  cmd.add_flag("--perf-submit_from_crypt_cpus", m.submit_from_crypt_cpus,
               "dm-crypt submit_from_crypt_cpus");
  cmd.add_flag("--perf-no_read_workqueue", m.no_read_workqueue, "dm-crypt no_read_workqueue");
  cmd.add_flag("--perf-no_write_workqueue", m.no_write_workqueue, "dm-crypt no_write_workqueue");
  add_environment_options(cmd, o, p);
}

// Unset optional options go back to "absent" after parsing.
void settle(Options &o, const Parsed &p) {
  if (p.size != nullptr && p.size->count() == 0) {
    o.mapping.size.reset();
  }
  if (p.hash != nullptr && p.hash->count() == 0) {
    o.key.hash.reset();
  }
  if (p.key_file != nullptr && p.key_file->count() == 0) {
    o.key.key_file.reset();
  }
  if (p.keyfile_size != nullptr && p.keyfile_size->count() == 0) {
    o.key.keyfile_size.reset();
  }
}

Result<Environment> make_environment(const Options &o, const Parsed &p, const Services &services,
                                     std::unique_ptr<Kernel> &kernel,
                                     std::unique_ptr<BlockDevices> &devices) {
  Environment env;
  env.target_type = o.target_type;
  if (p.assume_version != nullptr && p.assume_version->count() != 0) {
    auto version = parse_target_version(o.assume_version);
    if (!version) {
      return version.error();
    }
    env.assume_version = *version;
  }
  if (p.assume_page_size != nullptr && p.assume_page_size->count() != 0) {
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

Result<CryptTable> planned_table(const Options &o, const Environment &env, const Services &services,
                                 std::ostream &err) {
  const TerminalReader terminal = services.terminal;
  auto key = derive_plain_key(o.key, services.stdin_is_terminal, terminal);
  if (!key) {
    return key.error();
  }
  for (const auto &warning : key->plan.warnings) {
    err << warning << '\n';
  }
  return build_table(o.mapping, std::move(key->key), env);
}

int fail(std::ostream &err, const Error &error) {
  err << "lbscrypt: " << error.message << '\n';
  return exit_code(error.code);
}

}  // namespace

int exit_code(Errc code) {
  switch (code) {
    case Errc::invalid_argument:
      return kExitInvalid;
    case Errc::refused:
      return kExitRefused;
    case Errc::luks_refused:
      return kExitLuksRefused;
    case Errc::key:
      return kExitKey;
    case Errc::device:
      return kExitDevice;
    case Errc::kernel:
      return kExitKernel;
    case Errc::not_found:
      return kExitNotFound;
  }
  return kExitKernel;
}

Services system_services() {
  Services s;
  s.make_kernel = make_devmapper_kernel;
  s.make_devices = make_system_block_devices;
  s.stdin_is_terminal = stdin_is_terminal();
  s.terminal = terminal_reader("Enter passphrase: ");
  return s;
}

// NOLINTNEXTLINE(readability-function-cognitive-complexity)
int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        const Services &services) {
  CLI::App app{"lbscrypt: dm-crypt plain mappings with sector sizes up to the page size",
               "lbscrypt"};
  app.set_help_flag("--help", "Print this help and exit");
  app.set_version_flag("--version", std::string("lbscrypt ") + kToolVersion);
  app.require_subcommand(1);
  Options o;
  Parsed table_p;
  Parsed open_p;
  Parsed check_p;

  auto *table = app.add_subcommand("table", "Print a crypt table line for dmsetup create");
  table->set_help_flag("--help");
  add_mapping_options(*table, o, table_p);
  table->add_flag("--json", o.json, "JSON output");
  table->add_option("device", o.mapping.device, "Backing device")->required();

  auto *open = app.add_subcommand("open", "Open a plain mapping (libdevmapper)");
  open->set_help_flag("--help");
  add_mapping_options(*open, o, open_p);
  open->add_option("--type", o.type, "Mapping type: plain")->capture_default_str();
  open->add_flag("--readonly,-r", o.read_only, "Read-only mapping");
  open->add_option("device", o.mapping.device, "Backing device")->required();
  open->add_option("name", o.name, "Mapping name")->required();

  auto *close = app.add_subcommand("close", "Remove a mapping");
  close->set_help_flag("--help");
  close->add_option("--target", o.target_type, "Device-mapper target name")->capture_default_str();
  close->add_option("name", o.name, "Mapping name")->required();

  auto *status = app.add_subcommand("status", "Report a mapping");
  status->set_help_flag("--help");
  status->add_option("--target", o.target_type, "Device-mapper target name")->capture_default_str();
  status->add_flag("--json", o.json, "JSON output");
  status->add_option("name", o.name, "Mapping name")->required();

  auto *check_cmd = app.add_subcommand("check", "What this kernel allows");
  check_cmd->set_help_flag("--help");
  check_p.check_sector_size =
      check_cmd->add_option("--sector-size", o.check_sector_size, "Sector size to try, bytes");
  check_cmd->add_option("--type", o.type, "plain or luks")->capture_default_str();
  check_cmd->add_flag("--json", o.json, "JSON output");
  add_environment_options(*check_cmd, o, check_p);

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
  } catch (const CLI::ParseError &e) {
    err << "lbscrypt: " << e.what() << " (see lbscrypt --help)\n";
    return kExitUsage;
  }
  // close and status always ask the running kernel: no --assume-* there.
  const Parsed none;
  const Parsed &p = table->parsed()       ? table_p
                    : open->parsed()      ? open_p
                    : check_cmd->parsed() ? check_p
                                          : none;
  settle(o, p);

  if (open->parsed() &&
      (open_p.assume_version->count() != 0 || open_p.assume_page_size->count() != 0)) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--assume-version and --assume-page-size are for table and "
                                "check; open always asks the running kernel"));
  }
  std::unique_ptr<Kernel> kernel;
  std::unique_ptr<BlockDevices> devices;
  auto env = make_environment(o, p, services, kernel, devices);
  if (!env) {
    return fail(err, env.error());
  }
  const auto type = mapping_type(o.type);
  if (!type) {
    return fail(err, type.error());
  }

  if (table->parsed()) {
    const auto planned = planned_table(o, *env, services, err);
    if (!planned) {
      return fail(err, planned.error());
    }
    const auto known = capabilities(*env);
    if (!known) {
      return fail(err, known.error());
    }
    print_table(out, *planned, o.target_type, *known, o.json);
    return kExitOk;
  }
  if (check_cmd->parsed()) {
    const std::optional<std::uint64_t> size =
        p.check_sector_size->count() != 0 ? std::optional(o.check_sector_size) : std::nullopt;
    const auto report = check(*env, size, *type);
    if (!report) {
      return fail(err, report.error());
    }
    print_check(out, *report, o.target_type, o.json);
    return report->refusal ? exit_code(report->refusal->code) : kExitOk;
  }
  if (open->parsed()) {
    if (*type != MappingType::plain) {
      return fail(err, make_error(Errc::invalid_argument,
                                  "lbscrypt opens plain mappings only; use cryptsetup for LUKS"));
    }
    const auto planned = planned_table(o, *env, services, err);
    if (!planned) {
      return fail(err, planned.error());
    }
    const auto opened = open_mapping(o.name, *planned, o.read_only, *env);
    if (!opened) {
      return fail(err, opened.error());
    }
    print_opened(out, *opened);
    return kExitOk;
  }
  if (close->parsed()) {
    const auto closed = close_mapping(o.name, *env);
    return closed ? kExitOk : fail(err, closed.error());
  }
  const auto report = mapping_status(o.name, *env);
  if (!report) {
    return fail(err, report.error());
  }
  print_status(out, *report, o.target_type, o.json);
  return kExitOk;
}

}  // namespace lbscrypt::cli
