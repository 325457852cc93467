// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt --update-tab`: a volume /etc/lbscrypttab lists is reencrypted, and at the
// final switch its line gets the new parameters (cipher=, size=, sector-size=, hash=) and a
// rotated key file (or, for a sealed line, a new credential) replaces the one the line reads,
// before the registry entry and the state go. Everything is checked at the start, before a byte is
// written; each step of the switch sees whether it was done already, so a --resume after a cut in
// the switch finishes it. The line is read and written by crypttab.hpp's parser and writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/keys.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/sealed.hpp"
#include "lbscrypt/secret.hpp"

namespace lbscrypt {

// How the new key is given (for the line's key field and hash=).
struct TabUpdate {
  // sealed: the new key is sealed to the TPM2 in a credential (--new-tpm2-credential).
  enum class NewKey { kept, file, passphrase, sealed };
  NewKey new_key = NewKey::kept;
  // NewKey::file: the new key file as given (not "-"); NewKey::sealed: the new credential.
  std::string new_key_file;
  std::uint64_t new_keyfile_offset = 0;
  // hash= of the line: NewKey::passphrase, and NewKey::sealed with sealed_passphrase.
  std::string new_hash = kDefaultPlainHash;
  bool sealed_passphrase = false;  // NewKey::sealed: the credential holds a passphrase
  // NewKey::sealed: how a credential is unsealed (systemd-creds decrypt, sealed_secret; faked
  // in the tests). The new credential, and the line's once it was renamed over it, are
  // unsealed under the name of the line's credential (SealedKey::name).
  std::function<Result<SecretBuffer>(const SealedKey &)> unseal;
};

// What the final switch does to the line.
struct TabChange {
  unsigned line = 0;
  std::string name;
  std::string options;  // the line's new options field
  // The line's key file and the new key file renamed over it (NewKey::file, another path), or
  // the line's credential and the new credential (NewKey::sealed).
  std::optional<std::filesystem::path> key_file;
  std::optional<std::filesystem::path> new_key_file;
};

// What the switch did, for the summary.
struct TabOutcome {
  std::string name;
  unsigned line = 0;
  bool rewritten = false;     // false: the line had the new parameters already (a resume)
  bool key_replaced = false;  // the new key file was renamed over the line's key file now
  std::optional<std::filesystem::path> key_file;
  std::vector<std::string> warnings;  // the line is gone: nothing to rewrite
};

// The lines that name `device`: the same path, or a block device with the same number.
[[nodiscard]] std::vector<const TabEntry *> tab_entries_for(const Lbscrypttab &tab,
                                                            const std::string &device);

// Whether the line can follow the run: Errc::refused or Errc::invalid_argument saying what to
// do for a new iv_large_sectors (lbscrypttab has no word for it), a new key given otherwise
// than the line reads it (a key file line needs --new-key-file in the key file's directory, at
// its keyfile-offset=; a sealed line --new-tpm2-credential in its credential's directory,
// holding a passphrase where the line's does; a passphrase line a new passphrase), a key on a
// device, or new options the parser would refuse. `tab_path` names the file in messages.
[[nodiscard]] Result<TabChange> plan_tab_change(const TabEntry &entry, const CryptSide &new_side,
                                                const TabUpdate &update, std::string_view tab_path);

// The new key as the device's line will read it once the final switch has renamed a new key
// file over the line's key file: from the new key file while it is there, else from the
// line's key file (the rename was made), each read as the line reads its key (not checked
// here); a new credential and the line's likewise, unsealed under the line's credential's
// name. nullopt where nothing of the kind can be read (no file or no single line for the
// device, a passphrase, the key kept): the caller asks for the key.
[[nodiscard]] Result<std::optional<SecretBuffer>> tab_switch_key(
    const std::filesystem::path &tab_path, const std::string &device, const CryptSide &new_side,
    const TabUpdate &update);

// The new key of a run that seals it (NewKey::sealed) for a sealed line: unsealed from the new
// credential under the name of the line's credential, which it replaces at the end, and made
// as the line makes its key. Errc::key saying to seal it under that name (lbscrypt seal
// --name) when the TPM2 does not unseal it so. nullopt when `tab` has no single sealed line
// for `device` (or the key is not sealed): the caller unseals it under its own name.
[[nodiscard]] Result<std::optional<SecretBuffer>> tab_new_sealed_key(const Lbscrypttab &tab,
                                                                     std::string_view tab_path,
                                                                     const std::string &device,
                                                                     const CryptSide &new_side,
                                                                     const TabUpdate &update);

// The final switch's part in lbscrypttab: reads the file again, rewrites the device's line
// when its options differ (write_lbscrypttab: atomic, mode and owner kept), then renames the
// new key file (a new credential) over the line's key file (credential) once it shows it
// holds the new key (its verifier); when the new file is gone, the line's must verify as the
// new key (renamed before a cut), else Errc::key. No file or no line for the device (gone since the
// start): an outcome with an empty name and a warning.
[[nodiscard]] Result<TabOutcome> apply_tab_change(const std::filesystem::path &tab_path,
                                                  const std::string &device,
                                                  const CryptSide &new_side,
                                                  const TabUpdate &update,
                                                  const KeyVerifier &new_verifier);

}  // namespace lbscrypt
