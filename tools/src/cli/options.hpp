// SPDX-License-Identifier: GPL-2.0-only
// What several commands share: the -v/-q/--debug flags, strict number options, the options
// that say which kernel to plan for, the key and mapping options of table and open, and the
// small steps every command ends with (a refusal, a warning, "Command successful.").
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cli.hpp"
#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/operations.hpp"

namespace lbscrypt::cli {

// -v, -q and --debug change standard error only; they are taken before the command as after
// it (both bind the same flags).
struct CommonFlags {
  bool verbose = false;
  bool quiet = false;
  bool debug = false;
};

void add_common_flags(CLI::App &cmd, CommonFlags &flags);

// Thrown by a number option's check while CLI11 parses; parse() prints its message as the
// refusal. (A message returned from a CLI11 validator comes back prefixed with the option's
// name, which the tool's message already carries.)
class NumberRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The check every number option has: the library's strict decimal parser (digits only, no
// sign, space, junk or overflow past `max`), refusing with "OPTION 'TEXT' is not a number: give
// decimal digits only, 0 to MAX".
[[nodiscard]] CLI::Validator strict_decimal(const std::string &option, std::uint64_t max);

// The value of text strict_decimal() let through (CLI11's own conversion is not used: it reads
// "010" as octal).
[[nodiscard]] std::uint64_t decimal_value(const std::string &text);

// A number option that calls `set` with its value when it is given.
template <class T>
CLI::Option *add_number(CLI::App &cmd, const std::string &names, std::function<void(T)> set,
                        const std::string &description) {
  auto *option = cmd.add_option_function<std::string>(
      names,
      [setter = std::move(set)](const std::string &text) {
        setter(static_cast<T>(decimal_value(text)));
      },
      description);
  option->type_name("UINT");
  option->check(strict_decimal(option->get_name(), std::numeric_limits<T>::max()));
  return option;
}

template <class T>
CLI::Option *add_number(CLI::App &cmd, const std::string &names, T &target,
                        const std::string &description) {
  return add_number<T>(cmd, names, std::function<void(T)>([&target](T v) { target = v; }),
                       description);
}

template <class T>
CLI::Option *add_number(CLI::App &cmd, const std::string &names, std::optional<T> &target,
                        const std::string &description) {
  return add_number<T>(cmd, names, std::function<void(T)>([&target](T v) { target = v; }),
                       description);
}

// A text option that fills `target` only when it is given.
CLI::Option *add_text(CLI::App &cmd, const std::string &names, std::optional<std::string> &target,
                      const std::string &description);

// --assume-version, --assume-page-size (a kernel to plan for instead of this one) and --target.
struct EnvironmentArgs {
  std::optional<std::string> assume_version;
  std::optional<std::uint32_t> assume_page_size;
  std::string target_type = "crypt";
};

void add_environment_options(CLI::App &cmd, EnvironmentArgs &args);
// --target alone (close, status, attach).
void add_target_option(CLI::App &cmd, EnvironmentArgs &args);

// An Environment and the kernel and devices it points at.
struct Session {
  std::unique_ptr<Kernel> kernel;  // none when both facts are assumed
  std::unique_ptr<BlockDevices> devices;
  Environment env;
};

// Checks the target name and the assumed facts, then makes what is not assumed.
[[nodiscard]] Result<Session> make_session(const EnvironmentArgs &args, const Services &services);

// The key and mapping options of table and open.
struct MappingArgs {
  MappingRequest mapping;
  KeyOptions key;
  bool verify = false;     // -y
  unsigned timeout_s = 0;  // --timeout
  EnvironmentArgs environment;
  std::optional<std::string> tpm2_credential;  // --tpm2-credential: a key sealed to the TPM2
  bool sealed_passphrase = false;              // --sealed-passphrase: it holds a passphrase
};

void add_mapping_options(CLI::App &cmd, MappingArgs &args, CommonFlags &flags);

// The request and key options as the library takes them: the key's size is checked against
// the cipher before the key, and -q drops the key's warnings.
[[nodiscard]] MappingRequest mapping_request(const MappingArgs &args);
[[nodiscard]] KeyOptions key_options(const MappingArgs &args, const CommonFlags &flags);

// --type: plain, or luks (luks1, luks2).
[[nodiscard]] Result<MappingType> mapping_type(const std::string &type);

// The key, asked for only after the table is known to load; its warnings on `err`.
[[nodiscard]] Result<SecretBuffer> ask_key(const MappingArgs &args, const CommonFlags &flags,
                                           const Services &services, std::ostream &err);

// --debug: the version, first.
void announce(std::ostream &err, const CommonFlags &flags);
// --debug: the table before its key.
void show_planned(std::ostream &err, const CommonFlags &flags, const CryptTable &table);

// The refusal on `err`; its exit code.
int fail(std::ostream &err, const Error &error);

// The warning that a power failure can tear a sector: standard error, unless -q (the tool's
// -q drops warnings and notes).
void warn_torn(std::ostream &err, const CommonFlags &flags,
               const std::optional<std::string> &warning);

// "Command successful." is chatter: standard error, so a command's standard output stays
// what it produces (a table line for dmsetup, JSON, a status).
int succeed(std::ostream &err, const CommonFlags &flags);

// Where tab list and generate-units find what the boot needs (boot_volumes.hpp): the files
// and trees the initramfs hook and the generator read, each overridable for tests or a chroot.
struct BootArgs {
  std::string fstab = kFstab;
  std::string mountinfo = kMountinfo;
  std::string resume_conf = kResumeConf;
  std::string cmdline = kKernelCmdline;
  std::string sysfs = "/sys";
  std::string dev = "/dev";
};

// --fstab, --mountinfo, --resume-conf, --cmdline, --sysfs and --dev.
void add_boot_options(CLI::App &cmd, BootArgs &args);

// The volumes the boot needs, the files read through services.read_file (a missing one is
// none); a file that exists but cannot be read is a warning line on `err`, as `program`.
[[nodiscard]] BootVolumes read_boot_volumes(const BootArgs &args, const Services &services,
                                            std::ostream &err, std::string_view program);

}  // namespace lbscrypt::cli
