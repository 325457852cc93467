// SPDX-License-Identifier: GPL-2.0-only
#include "options.hpp"

#include <fmt/format.h>

#include <ostream>

#include "lbscrypt/numbers.hpp"
#include "lbscrypt/table.hpp"
#include "lbscrypt/target_version.hpp"
#include "lbscrypt/version.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

void add_common_flags(CLI::App &cmd, CommonFlags &flags) {
  cmd.add_flag("--verbose,-v", flags.verbose,
               "Say \"Command successful.\" at the end (on standard error)");
  cmd.add_flag("--debug", flags.debug, "Print what is decided, and why, on standard error");
  cmd.add_flag("--batch-mode,-q", flags.quiet, "No warnings or notes");
}

CLI::Validator strict_decimal(const std::string &option, std::uint64_t max) {
  return {[option, max](const std::string &text) -> std::string {
            const auto value = parse_decimal_u64(text);
            if (!value || *value > max) {
              throw NumberRefused(fmt::format(
                  "{} '{}' is not a number: give decimal digits only, 0 to {}", option, text, max));
            }
            return {};
          },
          ""};
}

std::uint64_t decimal_value(const std::string &text) {
  return parse_decimal_u64(text).value_or(0);  // checked by strict_decimal() before
}

CLI::Option *add_text(CLI::App &cmd, const std::string &names, std::optional<std::string> &target,
                      const std::string &description) {
  return cmd.add_option_function<std::string>(
      names, [&target](const std::string &value) { target = value; }, description);
}

void add_target_option(CLI::App &cmd, EnvironmentArgs &args) {
  cmd.add_option("--target", args.target_type,
                 "Device-mapper target name (crypt_lbs when loaded beside the stock module)")
      ->capture_default_str();
}

void add_environment_options(CLI::App &cmd, EnvironmentArgs &args) {
  add_text(cmd, "--assume-version", args.assume_version,
           "Crypt target version X.Y.Z to plan for instead of the running kernel's");
  add_number(cmd, "--assume-page-size", args.assume_page_size,
             "Page size in bytes to plan for instead of this kernel's");
  add_target_option(cmd, args);
}

Result<Session> make_session(const EnvironmentArgs &args, const Services &services) {
  Session session;
  Environment &env = session.env;
  if (auto r = check_target_name(args.target_type); !r) {
    return r.error();
  }
  env.target_type = args.target_type;
  if (args.assume_version) {
    auto version = parse_target_version(*args.assume_version);
    if (!version) {
      return version.error();
    }
    env.assume_version = *version;
  }
  if (args.assume_page_size) {
    const std::uint32_t page = *args.assume_page_size;
    if (page < 4096 || !is_power_of_two(page)) {
      return make_error(
          Errc::invalid_argument,
          fmt::format("--assume-page-size {} is not a power of two of at least 4096", page));
    }
    env.assume_page_size = page;
  }
  if (!env.assume_version || !env.assume_page_size) {
    session.kernel = services.make_kernel();
    env.kernel = session.kernel.get();
  }
  session.devices = services.make_devices();
  env.devices = session.devices.get();
  env.reencrypt_registry = services.reencrypt_registry;
  return session;
}

void add_mapping_options(CLI::App &cmd, MappingArgs &args, CommonFlags &flags) {
  MappingRequest &m = args.mapping;
  KeyOptions &k = args.key;
  cmd.add_option_function<std::string>(
      "--cipher,-c",
      [&m, &k](const std::string &cipher) {
        m.cipher = cipher;
        k.cipher_given = true;
      },
      "Cipher specification (default aes-xts-plain64, as cryptsetup 2.7; 2.6: "
      "aes-cbc-essiv:sha256)");
  add_number<std::uint32_t>(
      cmd, "--key-size,-s",
      [&k](std::uint32_t bits) {
        k.key_size_bits = bits;
        k.key_size_given = true;
      },
      "Key size in bits (default 256)");
  add_text(cmd, "--hash,-h", k.hash,
           "Passphrase hash (default sha256, as cryptsetup 2.7; 2.6: ripemd160)");
  add_text(cmd, "--key-file,-d", k.key_file,
           "Read the key from a file (used as is) or '-' for stdin");
  add_number(cmd, "--keyfile-offset", k.keyfile_offset, "Bytes to skip in the key file");
  add_number(cmd, "--keyfile-size,-l", k.keyfile_size, "Bytes to read from the key file");
  add_number(cmd, "--offset,-o", m.offset, "Start on the device, in 512-byte sectors");
  add_number(cmd, "--skip,-p", m.skip, "IV offset, in 512-byte sectors");
  add_number(cmd, "--size,-b", m.size,
             "Size in 512-byte sectors (default: the rest of the device)");
  add_number(cmd, "--sector-size", m.sector_size, "Encryption sector size in bytes (default 512)");
  for (const FlagWord &flag : kFlagWords) {
    if (!flag.cli.empty()) {
      cmd.add_flag(std::string(flag.cli), m.flags.*flag.member,
                   fmt::format("dm-crypt {}", flag.table));
    }
  }
  add_text(cmd, "--tpm2-credential", args.tpm2_credential,
           "Unseal the key from this credential file with the TPM2 (lbscrypt seal made it)");
  cmd.add_flag("--sealed-passphrase", args.sealed_passphrase,
               "The --tpm2-credential holds a passphrase, hashed with --hash (default sha256)");
  cmd.add_flag("--verify-passphrase,-y", args.verify, "Ask for the passphrase twice");
  add_number<std::uint32_t>(
      cmd, "--timeout,-t", [&args](std::uint32_t seconds) { args.timeout_s = seconds; },
      "Seconds to wait for a passphrase on a terminal (0: no limit)");
  add_environment_options(cmd, args.environment);
  add_common_flags(cmd, flags);
}

MappingRequest mapping_request(const MappingArgs &args) {
  MappingRequest request = args.mapping;
  if (args.key.key_size_bits % 8 == 0) {
    request.key_bytes = args.key.key_size_bits / 8;  // checked against the cipher before the key
  }
  return request;
}

KeyOptions key_options(const MappingArgs &args, const CommonFlags &flags) {
  KeyOptions key = args.key;
  key.quiet = flags.quiet;
  return key;
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

namespace {

// The key from --tpm2-credential: unsealed by systemd-creds, never asked for instead.
Result<SecretBuffer> unseal_key(const MappingArgs &args, const CommonFlags &flags,
                                const Services &services) {
  const std::string &credential = *args.tpm2_credential;
  const KeyOptions &k = args.key;
  if (k.key_file || k.keyfile_offset != 0 || k.keyfile_size || args.verify) {
    return make_error(Errc::invalid_argument,
                      "--tpm2-credential is the key's source: drop --key-file, "
                      "--keyfile-offset, --keyfile-size and -y");
  }
  if (k.hash && !args.sealed_passphrase) {
    return make_error(Errc::invalid_argument,
                      "--hash hashes a passphrase, and the credential holds a key: drop --hash, "
                      "or give --sealed-passphrase if it holds a passphrase");
  }
  if (!services.attach.unseal) {
    return make_error(Errc::key, "no way to unseal a credential in this build");
  }
  auto secret = services.attach.unseal(SealedKey{credential, std::nullopt, std::nullopt});
  if (!secret) {
    return secret.error();
  }
  return key_from_sealed(*secret, key_options(args, flags), args.sealed_passphrase, credential);
}

}  // namespace

Result<SecretBuffer> ask_key(const MappingArgs &args, const CommonFlags &flags,
                             const Services &services, std::ostream &err) {
  if (args.tpm2_credential) {
    return unseal_key(args, flags, services);
  }
  if (args.sealed_passphrase) {
    return make_error(Errc::invalid_argument,
                      "--sealed-passphrase says what a --tpm2-credential holds: give the "
                      "credential file too");
  }
  TerminalOptions terminal_options;
  terminal_options.verify = args.verify;
  terminal_options.timeout_s = args.timeout_s;
  const TerminalReader terminal =
      services.make_terminal ? services.make_terminal(terminal_options) : TerminalReader{};
  auto key = derive_plain_key(key_options(args, flags), services.stdin_is_terminal, terminal);
  if (!key) {
    return key.error();
  }
  for (const auto &warning : key->plan.warnings) {
    err << one_line(warning) << '\n';
  }
  return std::move(key->key);
}

void announce(std::ostream &err, const CommonFlags &flags) {
  if (flags.debug) {
    err << "# lbscrypt " << kToolVersion << '\n';
  }
}

void show_planned(std::ostream &err, const CommonFlags &flags, const CryptTable &table) {
  if (flags.debug) {
    err << "# table (before the key): " << format_table_line(table, KeyDisplay::hide).view()
        << '\n';
  }
}

int fail(std::ostream &err, const Error &error) {
  print_error(err, error.message);
  return exit_code(error.code);
}

void warn_torn(std::ostream &err, const CommonFlags &flags,
               const std::optional<std::string> &warning) {
  if (warning && !flags.quiet) {
    print_error(err, *warning);
  }
}

int succeed(std::ostream &err, const CommonFlags &flags) {
  if (flags.verbose) {
    err << "Command successful.\n";
  }
  return kExitOk;
}

void add_boot_options(CLI::App &cmd, BootArgs &args) {
  cmd.add_option("--fstab", args.fstab, "The fstab whose / and /usr lines the boot needs")
      ->capture_default_str();
  cmd.add_option("--mountinfo", args.mountinfo, "The mount table of the running / and /usr")
      ->capture_default_str();
  cmd.add_option("--resume-conf", args.resume_conf,
                 "initramfs-tools' file that names the resume device (RESUME=)")
      ->capture_default_str();
  cmd.add_option("--cmdline", args.cmdline,
                 "The kernel command line (root=, resume=; lbscrypt= for generate-units)")
      ->capture_default_str();
  cmd.add_option("--sysfs", args.sysfs, "Where sysfs is (what a device is built on)")
      ->capture_default_str();
  cmd.add_option("--dev", args.dev, "Where /dev is (the links UUID= and LABEL= name)")
      ->capture_default_str();
}

BootVolumes read_boot_volumes(const BootArgs &args, const Services &services, std::ostream &err,
                              std::string_view program) {
  const auto text = [&](const std::string &path) -> std::optional<std::string> {
    if (!services.read_file) {
      return std::nullopt;
    }
    auto read = services.read_file(path);
    if (read) {
      return std::move(read).value();
    }
    if (read.error().code != Errc::not_found) {
      print_error(err,
                  fmt::format("warning: {} (the volumes it names are not looked for)",
                              read.error().message),
                  program);
    }
    return std::nullopt;
  };
  BootInputs inputs;
  inputs.fstab = text(args.fstab);
  inputs.mountinfo = text(args.mountinfo);
  inputs.resume_conf = text(args.resume_conf);
  inputs.cmdline = text(args.cmdline);
  inputs.fstab_path = args.fstab;
  inputs.resume_conf_path = args.resume_conf;
  inputs.sysfs = args.sysfs;
  inputs.dev = args.dev;
  return find_boot_volumes(inputs);
}

}  // namespace lbscrypt::cli
