// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/tab.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "lbscrypt/attach.hpp"
#include "lbscrypt/sealed.hpp"
#include "reencrypt/files.hpp"

namespace lbscrypt {

namespace {

namespace fs = std::filesystem;

// The path as the rename sees it: absolute, "." and ".." folded, links left alone (a key file
// that is a link is replaced as a link).
fs::path tab_plain_path(const std::string &path) {
  std::error_code error;
  fs::path out = fs::absolute(path, error);
  if (error) {
    out = path;
  }
  return out.lexically_normal();
}

// A credential of the line unsealed under the name of the line's credential, with the line's
// TPM2 device: the new one (sealed under that name to be renamed over it) or the line's own.
Result<SecretBuffer> tab_unseal(const fs::path &file, const TabEntry &entry,
                                const TabUpdate &update) {
  if (!update.unseal) {
    return make_error(Errc::key, "no way to unseal a credential in this build");
  }
  auto id = credential_id(entry.key);
  if (!id) {
    return id.error();
  }
  SealedKey key = sealed_key_of(file.string(), entry.volume);
  key.name = std::move(id).value();
  return update.unseal(key);
}

// A sealed secret made into the new key as the line makes its key: its first key-size bytes,
// or a passphrase hashed with the new hash=.
Result<SecretBuffer> tab_sealed_key(const SecretBuffer &secret, const fs::path &file,
                                    const CryptSide &new_side, const TabUpdate &update) {
  KeyOptions options;
  options.key_size_bits = new_side.key_bytes * 8;
  if (update.sealed_passphrase) {
    options.hash = update.new_hash;
  }
  options.cipher_given = true;
  options.key_size_given = true;
  return key_from_sealed(secret, options, update.sealed_passphrase, file.string());
}

// A key file read as the line reads its key file: the key itself, key-size bytes from
// keyfile-offset; a credential unsealed as the line unseals its credential.
Result<SecretBuffer> tab_read_key(const fs::path &file, const TabEntry &entry,
                                  const CryptSide &new_side, const TabUpdate &update) {
  if (update.new_key == TabUpdate::NewKey::sealed) {
    auto secret = tab_unseal(file, entry, update);
    if (!secret) {
      return secret.error();
    }
    return tab_sealed_key(*secret, file, new_side, update);
  }
  KeyOptions options;
  options.key_size_bits = new_side.key_bytes * 8;
  options.key_file = file.string();
  options.keyfile_offset = entry.volume.key.keyfile_offset;
  options.cipher_given = true;
  options.key_size_given = true;
  options.quiet = true;
  auto key = derive_plain_key(options, true, TerminalReader{});
  if (!key) {
    return key.error();
  }
  return std::move(key->key);
}

// The new key file (credential), read as the line reads its key, checked against the run's
// new verifier.
Result<void> tab_key_is_new(const fs::path &file, const TabEntry &entry, const CryptSide &new_side,
                            const TabUpdate &update, const KeyVerifier &verifier) {
  auto key = tab_read_key(file, entry, new_side, update);
  if (!key) {
    return key.error();
  }
  return check_verifier(verifier, *key, "new");
}

// What the new key's file is called in messages.
std::string_view tab_new_file_word(const TabUpdate &update) {
  return update.new_key == TabUpdate::NewKey::sealed ? "credential" : "key file";
}

std::string tab_where(const TabEntry &entry, std::string_view tab_path) {
  return fmt::format("{} (line {} of {})", entry.name, entry.line, tab_path);
}

// The options the line gets: cipher=, size= and sector-size= of the new side, hash= of a new
// passphrase.
std::vector<OptionEdit> tab_edits(const TabEntry &entry, const CryptSide &new_side,
                                  const TabUpdate &update) {
  std::vector<OptionEdit> edits{
      {"cipher", new_side.cipher},
      {"size", fmt::format("{}", new_side.key_bytes * 8)},
  };
  if (new_side.sector_size != entry.volume.mapping.sector_size ||
      entry.options.find("sector-size=") != std::string::npos) {
    edits.push_back({"sector-size", fmt::format("{}", new_side.sector_size)});
  }
  if (update.new_key == TabUpdate::NewKey::passphrase ||
      (update.new_key == TabUpdate::NewKey::sealed && update.sealed_passphrase)) {
    edits.push_back({"hash", update.new_hash});
  }
  return edits;
}

Result<std::string> tab_read(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::device,
                      fmt::format("cannot read {}: {}", printable(path.string()),
                                  std::strerror(err != 0 ? err : EIO)),
                      err);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return make_error(Errc::device, fmt::format("cannot read {}", printable(path.string())), EIO);
  }
  return text.str();
}

// A sealed line takes a new key only sealed (in a credential it renames over its own), in the
// same form (a key or a passphrase); a new credential suits a sealed line only.
Result<void> tab_check_sealed(const TabEntry &entry, const TabUpdate &update,
                              const std::string &where) {
  using NewKey = TabUpdate::NewKey;
  if (update.new_key == NewKey::kept) {
    return {};
  }
  const bool sealed = update.new_key == NewKey::sealed;
  if (entry.volume.sealed() && !sealed) {
    const auto id = credential_id(entry.key);  // the parser took it: a usable name
    const std::string name = id ? *id : std::string("ID");
    const std::string seal =
        fmt::format("lbscrypt seal --name {}{} {}/{}.new{}", name,
                    entry.volume.sealed_passphrase ? "" : " --random BYTES",
                    tab_plain_path(entry.key).parent_path().string(), name, kCredentialSuffix);
    return make_error(
        Errc::refused,
        fmt::format("{} opens with the key sealed in {} (tpm2-device=), and "
                    "--update-tab would put a clear key in its place: seal the new "
                    "{} under that credential's name ({}) and give it with "
                    "--new-tpm2-credential{}, or give --keep-key",
                    where, entry.key, entry.volume.sealed_passphrase ? "passphrase" : "key", seal,
                    entry.volume.sealed_passphrase ? " --new-sealed-passphrase" : ""));
  }
  if (!entry.volume.sealed() && sealed) {
    return make_error(
        Errc::refused,
        is_passphrase_key(entry.key)
            ? fmt::format("{} asks for a passphrase, and the new key is sealed in {}: give the "
                          "new passphrase (without --new-tpm2-credential), or --keep-key",
                          where, update.new_key_file)
            : fmt::format("{} reads its key from the key file {}, and the new key is sealed in "
                          "{}: give the new key in a key file with --new-key-file (it replaces "
                          "{} at the end), or --keep-key",
                          where, entry.key, update.new_key_file, entry.key));
  }
  if (sealed && update.sealed_passphrase != entry.volume.sealed_passphrase) {
    return make_error(
        Errc::refused,
        entry.volume.sealed_passphrase
            ? fmt::format("{} unseals a passphrase (x-lbscrypt.sealed=passphrase), and {} is "
                          "given as a key: seal the new passphrase and give "
                          "--new-sealed-passphrase",
                          where, update.new_key_file)
            : fmt::format("{} unseals a key, and {} is given as a passphrase "
                          "(--new-sealed-passphrase): seal the new key itself and drop "
                          "--new-sealed-passphrase",
                          where, update.new_key_file));
  }
  return {};
}

}  // namespace

std::vector<const TabEntry *> tab_entries_for(const Lbscrypttab &tab, const std::string &device) {
  std::vector<const TabEntry *> found;
  struct stat ours {};
  const bool is_block = stat(device.c_str(), &ours) == 0 && S_ISBLK(ours.st_mode);
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(device, error);
  for (const TabEntry &entry : tab.entries) {
    struct stat listed {};
    const bool same_number = is_block && stat(entry.path.c_str(), &listed) == 0 &&
                             S_ISBLK(listed.st_mode) && listed.st_rdev == ours.st_rdev;
    std::error_code entry_error;
    const fs::path entry_canonical = fs::weakly_canonical(entry.path, entry_error);
    const bool same_path = !error && !entry_error && entry_canonical == canonical;
    if (same_number || same_path) {
      found.push_back(&entry);
    }
  }
  return found;
}

Result<TabChange> plan_tab_change(const TabEntry &entry, const CryptSide &new_side,
                                  const TabUpdate &update, std::string_view tab_path) {
  const std::string where = tab_where(entry, tab_path);
  if (new_side.iv_large_sectors) {
    return make_error(Errc::refused,
                      fmt::format("{}: lbscrypttab has no option for iv_large_sectors, so "
                                  "--update-tab cannot give the line --new-iv-large-sectors: "
                                  "reencrypt without it, or comment the line out and open the "
                                  "volume by hand",
                                  where));
  }
  TabChange change;
  change.line = entry.line;
  change.name = entry.name;
  const bool passphrase = is_passphrase_key(entry.key);
  using NewKey = TabUpdate::NewKey;
  if (auto r = tab_check_sealed(entry, update, where); !r) {
    return r.error();
  }
  if (passphrase && update.new_key == NewKey::file) {
    return make_error(Errc::refused,
                      fmt::format("{} asks for a passphrase and the new key comes from {}: give "
                                  "the new key as a passphrase (without --new-key-file), or "
                                  "comment the line out and write it again after the run",
                                  where, update.new_key_file));
  }
  if (!passphrase && update.new_key != NewKey::kept) {
    const fs::path key_file = tab_plain_path(entry.key);
    if (key_file.string().starts_with("/dev/")) {
      return make_error(Errc::refused,
                        fmt::format("{} reads its key from the device {}, which lbscrypt does "
                                    "not rewrite: give --keep-key, or comment the line out and "
                                    "write it again after the run",
                                    where, entry.key));
    }
    if (update.new_key == NewKey::passphrase) {
      return make_error(Errc::refused,
                        fmt::format("{} reads its key from {}: give the new key in a file in "
                                    "{} with --new-key-file (it replaces {} at the end), or "
                                    "--keep-key",
                                    where, entry.key, key_file.parent_path().string(), entry.key));
    }
    const fs::path new_file = tab_plain_path(update.new_key_file);
    if (new_file != key_file) {
      if (new_file.parent_path() != key_file.parent_path()) {
        return make_error(
            Errc::refused,
            fmt::format("{} reads its key from {}, and the new {} {} is in another "
                        "directory: move it into {} and give that path (it is renamed over {} "
                        "at the end, which is atomic only within one directory)",
                        where, entry.key, tab_new_file_word(update), update.new_key_file,
                        key_file.parent_path().string(), entry.key));
      }
      if (update.new_key == NewKey::file &&
          update.new_keyfile_offset != entry.volume.key.keyfile_offset) {
        return make_error(
            Errc::refused,
            fmt::format("{} reads its key at keyfile-offset={} of {}, and the new key is read "
                        "at {} of {}: give --new-keyfile-offset {} (the new file replaces the "
                        "old one under the same line)",
                        where, entry.volume.key.keyfile_offset, entry.key,
                        update.new_keyfile_offset, update.new_key_file,
                        entry.volume.key.keyfile_offset));
      }
      change.key_file = key_file;
      change.new_key_file = new_file;
    }
  }
  const std::vector<OptionEdit> edits = tab_edits(entry, new_side, update);
  change.options = edit_volume_options(entry.options, edits);
  if (auto parsed = parse_volume_options(change.options, passphrase); !parsed) {
    return make_error(Errc::refused,
                      fmt::format("{}: its options with the new parameters ({}) would be "
                                  "refused: {}",
                                  where, change.options, parsed.error().message));
  }
  return change;
}

Result<std::optional<SecretBuffer>> tab_switch_key(const std::filesystem::path &tab_path,
                                                   const std::string &device,
                                                   const CryptSide &new_side,
                                                   const TabUpdate &update) {
  auto text = tab_read(tab_path);
  if (!text) {
    return text.error().code == Errc::not_found ? Result<std::optional<SecretBuffer>>{std::nullopt}
                                                : Result<std::optional<SecretBuffer>>{text.error()};
  }
  const Lbscrypttab tab = parse_lbscrypttab(*text, tab_path.string());
  const auto entries = tab_entries_for(tab, device);
  if (entries.size() != 1) {
    return std::optional<SecretBuffer>{};
  }
  const TabEntry &entry = *entries.front();
  auto change = plan_tab_change(entry, new_side, update, tab_path.string());
  if (!change || !change->key_file || !change->new_key_file) {
    return std::optional<SecretBuffer>{};
  }
  std::error_code error;
  // Before the rename the new key file holds the key, after it the line's key file.
  const fs::path &file =
      fs::symlink_status(*change->new_key_file, error).type() == fs::file_type::not_found
          ? *change->key_file
          : *change->new_key_file;
  auto key = tab_read_key(file, entry, new_side, update);
  if (!key) {
    return key.error();
  }
  return std::optional<SecretBuffer>(std::move(key).value());
}

Result<std::optional<SecretBuffer>> tab_new_sealed_key(const Lbscrypttab &tab,
                                                       std::string_view tab_path,
                                                       const std::string &device,
                                                       const CryptSide &new_side,
                                                       const TabUpdate &update) {
  if (update.new_key != TabUpdate::NewKey::sealed) {
    return std::optional<SecretBuffer>{};
  }
  const auto entries = tab_entries_for(tab, device);
  if (entries.size() != 1 || !entries.front()->volume.sealed()) {
    return std::optional<SecretBuffer>{};
  }
  const TabEntry &entry = *entries.front();
  const fs::path file = tab_plain_path(update.new_key_file);
  auto secret = tab_unseal(file, entry, update);
  if (!secret) {
    const std::string id = credential_id(entry.key).value();  // the parser took it
    return make_error(
        Errc::key,
        fmt::format("{}: the new credential {} replaces {} at the end, so it must unseal under "
                    "that credential's name, {}: {}; seal the new {} under it (lbscrypt seal "
                    "--name {} ... {}) and run the command again",
                    tab_where(entry, tab_path), update.new_key_file, entry.key, id,
                    secret.error().message, update.sealed_passphrase ? "passphrase" : "key", id,
                    update.new_key_file));
  }
  auto key = tab_sealed_key(*secret, file, new_side, update);
  if (!key) {
    return key.error();
  }
  return std::optional<SecretBuffer>(std::move(key).value());
}

Result<TabOutcome> apply_tab_change(const std::filesystem::path &tab_path,
                                    const std::string &device, const CryptSide &new_side,
                                    const TabUpdate &update, const KeyVerifier &new_verifier) {
  TabOutcome outcome;
  auto text = tab_read(tab_path);
  if (!text && text.error().code == Errc::not_found) {
    outcome.warnings.push_back(fmt::format(
        "there is no {}: no line to give the new parameters; write one if the volume opens at "
        "boot",
        tab_path.string()));
    return outcome;
  }
  if (!text) {
    return text.error();
  }
  const Lbscrypttab tab = parse_lbscrypttab(*text, tab_path.string());
  const auto entries = tab_entries_for(tab, device);
  if (entries.empty()) {
    outcome.warnings.push_back(fmt::format(
        "no line of {} names {} any more: no line to give the new parameters; write one if "
        "the volume opens at boot",
        tab_path.string(), device));
    return outcome;
  }
  if (entries.size() > 1) {
    return make_error(Errc::refused,
                      fmt::format("{} names {} on lines {} and {}: keep one line, then run the "
                                  "command again with --resume",
                                  tab_path.string(), device, entries[0]->line, entries[1]->line));
  }
  const TabEntry &entry = *entries.front();
  auto change = plan_tab_change(entry, new_side, update, tab_path.string());
  if (!change) {
    return change.error();
  }
  outcome.name = change->name;
  outcome.line = change->line;
  outcome.key_file = change->key_file;
  if (change->options != entry.options) {
    auto rewritten = replace_tab_options(*text, change->line, change->options);
    if (!rewritten) {
      return rewritten.error();
    }
    if (auto r = write_lbscrypttab(tab_path, *rewritten); !r) {
      return r.error();
    }
    outcome.rewritten = true;
  }
  if (!change->key_file || !change->new_key_file) {
    return outcome;
  }
  const fs::path &key_file = *change->key_file;
  const fs::path &new_file = *change->new_key_file;
  const std::string_view what = tab_new_file_word(update);
  std::error_code error;
  const auto new_status = fs::symlink_status(new_file, error);
  if (new_status.type() == fs::file_type::not_found) {
    // renamed before a cut: the line's key file holds the new key, or something is wrong
    if (auto r = tab_key_is_new(key_file, entry, new_side, update, new_verifier); !r) {
      return make_error(Errc::key, fmt::format("the new {} {} is gone and {} does not hold the new "
                                               "key ({}): put the new {} back and run the command "
                                               "again with --resume",
                                               what, new_file.string(), key_file.string(),
                                               r.error().message, what));
    }
    return outcome;
  }
  if (auto r = tab_key_is_new(new_file, entry, new_side, update, new_verifier); !r) {
    return make_error(r.error().code,
                      fmt::format("{} does not hold the run's new key ({}): give the new {} "
                                  "the run was started with",
                                  new_file.string(), r.error().message, what));
  }
  // Its bytes durable before the rename makes them the line's key (else a cut could leave
  // the line's key file empty), and the rename durable after.
  if (const int err = detail::fsync_file(new_file); err != 0) {
    return make_error(Errc::device,
                      fmt::format("cannot make {} durable before it replaces {}: {}: fix that "
                                  "and run the command again with --resume",
                                  new_file.string(), key_file.string(), std::strerror(err)),
                      err);
  }
  if (rename(new_file.c_str(), key_file.c_str()) != 0) {
    const int err = errno;
    return make_error(err == EACCES || err == EPERM ? Errc::permission : Errc::device,
                      fmt::format("cannot rename {} over {}: {}: fix that and run the command "
                                  "again with --resume",
                                  new_file.string(), key_file.string(), std::strerror(err)),
                      err);
  }
  if (const int err = detail::fsync_parent_directory(key_file); err != 0) {
    return make_error(Errc::device,
                      fmt::format("cannot make the rename of {} durable: {}: run the command "
                                  "again with --resume",
                                  key_file.string(), std::strerror(err)),
                      err);
  }
  outcome.key_replaced = true;
  return outcome;
}

}  // namespace lbscrypt
