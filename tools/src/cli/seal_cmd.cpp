// SPDX-License-Identifier: GPL-2.0-only
#include "seal_cmd.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>
#include <system_error>

#include "lbscrypt/sealed.hpp"
#include "lbscrypt/table.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

namespace {

// The secret to seal: a fresh random key, a key file's bytes, or a passphrase typed twice.
Result<SecretBuffer> secret_to_seal(const SealArgs &args, const Services &services) {
  if (args.random) {
    return random_secret(*args.random);
  }
  if (args.key_file) {
    return read_secret_file(*args.key_file);
  }
  TerminalOptions terminal;
  terminal.prompt = "Enter the passphrase to seal: ";
  terminal.verify = true;
  auto passphrase = services.make_terminal(terminal)(kMaxTerminalPassphrase);
  if (passphrase && passphrase->empty()) {
    return make_error(Errc::invalid_argument,
                      "the passphrase is empty: plain mode would open the volume with any "
                      "empty answer; type one");
  }
  return passphrase;
}

}  // namespace

CLI::App *add_seal_command(CLI::App &app, SealArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand(
      "seal",
      "Seal a key (a fresh random one, a key file, or a passphrase) to this machine's TPM2 "
      "as a systemd credential file, for lbscrypttab's tpm2-device= or open --tpm2-credential");
  cmd->set_help_flag("--help");
  args.pcrs = kDefaultSealPcrs;
  cmd->add_option("--tpm2-pcrs", args.pcrs,
                  "The PCRs whose values the TPM2 must find to unseal it, joined by + "
                  "(7: the Secure Boot state; none: the TPM2 alone)")
      ->capture_default_str();
  add_number(*cmd, "--random", args.random,
             "Seal a fresh random key of this many bytes (64: size=512)");
  add_text(*cmd, "--key-file,-d", args.key_file,
           "Seal this file's bytes (a key, or a passphrase with x-lbscrypt.sealed=passphrase)");
  add_text(*cmd, "--name", args.name,
           "The credential's name (default: the file's name without .cred); a new key for "
           "reencrypt --update-tab takes the name of the line's credential");
  cmd->add_flag("--force", args.force,
                "Replace an existing credential file (a re-seal; never with --random)");
  cmd->add_option("--sysfs", args.sysfs, "Where sysfs is (the PCR values)")->capture_default_str();
  cmd->add_option("--dev", args.dev, "Where /dev is (tpmrm0)")->capture_default_str();
  add_common_flags(*cmd, flags);
  cmd->add_option("output", args.output,
                  "The credential file to write; its name without .cred names the credential")
      ->required();
  return cmd;
}

int seal_command(const SealArgs &args, const CommonFlags &flags, const Services &services,
                 std::ostream &out, std::ostream &err) {
  announce(err, flags);
  if (args.random && args.key_file) {
    return fail(err, make_error(Errc::invalid_argument,
                                "--random draws a fresh key and --key-file seals one you have: "
                                "give one of them"));
  }
  if (!args.random && !args.key_file && (!services.stdin_is_terminal || !services.make_terminal)) {
    return fail(err, make_error(Errc::invalid_argument,
                                "no secret to seal: give --random BYTES for a fresh key, "
                                "--key-file FILE for a key you have, or run it on a terminal to "
                                "type a passphrase"));
  }
  const auto pcrs = parse_pcr_list(args.pcrs);
  if (!pcrs) {
    return fail(err, pcrs.error());
  }
  const SealRequest request{args.output, *pcrs, args.name};
  const auto id = seal_name(request);  // checked before anything is looked at
  if (!id) {
    return fail(err, id.error());
  }
  std::error_code ec;
  const bool exists = std::filesystem::symlink_status(args.output, ec).type() !=
                      std::filesystem::file_type::not_found;
  if (exists && args.random) {
    return fail(err, make_error(Errc::exists,
                                fmt::format("{} exists: a fresh random key would replace the key "
                                            "sealed there, and the volume it opens could not be "
                                            "opened again; give another file",
                                            printable(args.output))));
  }
  if (exists && !args.force) {
    return fail(err, make_error(Errc::exists,
                                fmt::format("{} exists: give --force to replace it (a re-seal of "
                                            "the same key), or another file",
                                            printable(args.output))));
  }
  const std::filesystem::path tpm = std::filesystem::path(args.dev) / kTpmResourceManager;
  if (!std::filesystem::exists(tpm, ec)) {
    return fail(err, make_error(Errc::not_found,
                                fmt::format("no TPM2 here: {} does not exist; load its driver "
                                            "(modprobe tpm_tis or tpm_crb) on a machine with a "
                                            "TPM2, or give a virtual machine one (swtpm)",
                                            tpm.string())));
  }
  const bool has_creds =
      services.has_program ? services.has_program(kSystemdCreds) : in_path(kSystemdCreds);
  if (!has_creds) {
    return fail(err, make_error(Errc::not_found,
                                "systemd-creds is not installed: install systemd 252 or later "
                                "(Debian: apt install systemd libtss2-esys-3.0.2-0 "
                                "libtss2-rc0 libtss2-mu0 libtss2-tcti-device0)"));
  }
  if (!flags.quiet) {
    for (const auto &warning : pcr_warnings(args.sysfs, *pcrs)) {
      print_error(err, warning);
    }
    if (pcrs->empty()) {
      print_error(err,
                  "warning: no PCR: the key is bound to this TPM2 alone, and any system "
                  "booted on this machine can unseal it");
    }
  }
  const auto secret = secret_to_seal(args, services);
  if (!secret) {
    return fail(err, secret.error());
  }
  const ChildRunner run = services.run_child ? services.run_child : ChildRunner(run_child);
  if (auto sealed = seal_secret(request, *secret, run); !sealed) {
    return fail(err, sealed.error());
  }
  if (args.key_file && !flags.quiet) {
    // Sealing a key that exists moves the volume to a sealed key; its clear copies stay.
    print_error(err, fmt::format("warning: {} still holds the key in the clear, as does every "
                                 "initramfs image and backup made with it: keep a copy offline "
                                 "for recovery and remove it here, rebuild the images "
                                 "(update-initramfs -u -k all), and better, reencrypt the volume "
                                 "to a fresh sealed key (lbscrypt reencrypt --new-tpm2-credential)",
                                 printable(*args.key_file)));
  }
  const std::string pcr_text = pcrs->empty() ? "no PCR" : "PCRs " + format_pcr_list(*pcrs);
  if (const auto own = credential_id(args.output); !own || *own != *id) {
    // Sealed to be renamed: reencrypt --update-tab --new-tpm2-credential renames it.
    out << fmt::format(
        "{}: sealed to this TPM2 ({}) as credential {}, not its file's name: it unseals once "
        "renamed to {}{} (reencrypt --update-tab --new-tpm2-credential renames it at the end)\n",
        args.output, pcr_text, *id,
        (std::filesystem::path(args.output).parent_path() / *id).string(), kCredentialSuffix);
    return succeed(err, flags);
  }
  out << fmt::format(
      "{}: sealed to this TPM2 ({}) as credential {}; lbscrypttab: key {}, "
      "options tpm2-device=auto{}\n",
      args.output, pcr_text, *id, args.output,
      args.key_file || args.random ? "" : ",x-lbscrypt.sealed=passphrase");
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
