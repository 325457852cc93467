// SPDX-License-Identifier: GPL-2.0-only
#include "reencrypt_request.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/keys.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

namespace {

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

// --update-tab: what the line's key becomes at the final switch.
TabUpdate tab_update(const ReencryptArgs &args, const Services &services) {
  TabUpdate update;
  if (args.keep_key) {
    update.new_key = TabUpdate::NewKey::kept;
  } else if (args.new_tpm2_credential) {
    update.new_key = TabUpdate::NewKey::sealed;
    update.new_key_file = *args.new_tpm2_credential;
    update.sealed_passphrase = args.new_sealed_passphrase;
    update.new_hash = args.new_hash.value_or(kDefaultPlainHash);
    update.unseal = services.attach.unseal;
  } else if (args.new_key_file && *args.new_key_file != "-") {
    update.new_key = TabUpdate::NewKey::file;
    update.new_key_file = *args.new_key_file;
    update.new_keyfile_offset = args.new_keyfile_offset;
  } else {
    update.new_key = TabUpdate::NewKey::passphrase;
    update.new_hash = args.new_hash.value_or(kDefaultPlainHash);
  }
  return update;
}

}  // namespace

Result<ReencryptRequest> reencrypt_request(const ReencryptArgs &args, const Services &services) {
  ReencryptRequest request;
  request.state = args.state;
  request.resume = args.resume || args.abort;
  request.abort = args.abort;
  if (args.active_name) {
    request.active_name = mapping_name(*args.active_name);
  }
  request.force = args.force;
  for (const auto &file :
       {args.old_side.key.key_file, args.new_key_file, args.new_tpm2_credential}) {
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
    return make_error(
        Errc::invalid_argument,
        fmt::format("--new-key-size {} is not a whole number of bytes", *args.new_key_bits));
  }
  if (services.read_file) {
    auto tab = services.read_file(kLbscrypttab);
    if (tab) {
      request.tab_text = std::move(tab).value();
    } else if (tab.error().code != Errc::not_found) {
      return tab.error();
    }
  }
  request.tab_path = kLbscrypttab;
  if (args.update_tab) {
    request.update_tab = tab_update(args, services);
  }
  if (args.hotzone_bytes != 0) {
    request.hotzone_bytes = args.hotzone_bytes;
  }
  request.verifier_iterations = args.pbkdf_iterations.value_or(kVerifierIterations);
  if (services.reencrypt_registry) {
    request.registry_dir = *services.reencrypt_registry;
  }
  if (services.reencrypt.sysfs) {
    request.sysfs = *services.reencrypt.sysfs;
  }
  return request;
}

void add_key_steps(ReencryptSteps &steps, const ReencryptArgs &args, const CommonFlags &flags,
                   const Services &services, std::ostream &err, SecretBuffer &old_copy) {
  steps.old_key = [&args, &flags, &services, &err,
                   &old_copy](std::uint32_t key_bytes) -> Result<SecretBuffer> {
    MappingArgs old_args = args.old_side;
    old_args.key.key_size_bits = key_bytes * 8;
    auto key = ask_key(old_args, flags, services, err);
    if (key && args.keep_key) {
      old_copy = *key;
    }
    return key;
  };
  steps.new_key = [&args, &flags, &services, &err,
                   &old_copy](std::uint32_t key_bytes) -> Result<SecretBuffer> {
    if (args.keep_key) {
      return old_copy;
    }
    if (args.new_tpm2_credential) {
      // Unsealed under the credential file's own name, as --tpm2-credential is (the run
      // unseals one sealed for an lbscrypttab line under the line's name itself).
      MappingArgs sealed;
      sealed.tpm2_credential = args.new_tpm2_credential;
      sealed.sealed_passphrase = args.new_sealed_passphrase;
      sealed.key = new_key_options(args, flags, key_bytes);
      return ask_key(sealed, flags, services, err);
    }
    return ask_new_key(args, flags, services, err, key_bytes);
  };
}

}  // namespace lbscrypt::cli
