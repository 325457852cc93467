// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/attach.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_argv.hpp"
#include "lbscrypt/keys.hpp"
#include "lbscrypt/table.hpp"
#include "lbscrypt/volume.hpp"

namespace lbscrypt {

namespace {

constexpr unsigned kGroupOtherBits = 0077;

// A file key readable or writable by group or others draws a warning (systemd-cryptsetup
// warns only when others may read it); the volume still opens.
std::optional<std::string> key_file_warning(const std::string &path,
                                            const AttachServices &services) {
  const auto mode = services.key_file_mode ? services.key_file_mode(path) : std::nullopt;
  if (!mode || (*mode & kGroupOtherBits) == 0) {
    return std::nullopt;
  }
  return fmt::format(
      "warning: key file {} is open to group or others (mode {:04o}): chmod 0400 "
      "it",
      path, *mode & 07777U);
}

// The check= program on the new mapping: Errc::key when it finds no known content (the
// sequence then closes the mapping and says so).
Result<void> check_content(const AttachRequest &request, const VolumeOptions &v,
                           const OpenResult &opened, const AttachServices &services) {
  const std::string node = opened.device.dm_node();
  const auto argv = check_command(v, node, services);
  const auto status =
      services.run ? services.run(argv) : Result<int>(make_error(Errc::key, "no way to run it"));
  if (status && *status == 0) {
    return Ok{};
  }
  return make_error(
      Errc::key,
      fmt::format("{}: check {} found no known content on {} ({}): a wrong key or passphrase?",
                  request.name, argv.front(), node,
                  status ? fmt::format("exit status {}", *status) : status.error().message));
}

}  // namespace

std::vector<std::string> check_command(const VolumeOptions &volume, const std::string &node,
                                       const AttachServices &services) {
  const std::string &check = *volume.check;
  std::vector<std::string> argv;
  if (check.front() == '/') {
    argv.push_back(check);
  } else {
    const std::string debian = fmt::format("{}/{}", kCheckDir, check);
    if (check == kDefaultCheck && !(services.exists && services.exists(debian))) {
      return {"blkid", "-p", node};  // finds a filesystem, swap, RAID or LVM signature
    }
    argv.push_back(debian);
  }
  argv.push_back(node);
  if (volume.check_args) {
    argv.push_back(*volume.check_args);
  }
  return argv;
}

SealedKey sealed_key_of(const std::string &key, const VolumeOptions &volume) {
  SealedKey sealed{key, std::nullopt, std::nullopt};
  if (volume.tpm2_device && *volume.tpm2_device != "auto") {
    sealed.tpm2_device = volume.tpm2_device;
  }
  return sealed;
}

Result<SecretBuffer> key_from_sealed(const SecretBuffer &secret, const KeyOptions &key,
                                     bool passphrase, std::string_view credential) {
  KeyOptions options = key;
  options.quiet = true;
  options.key_file.reset();
  options.keyfile_offset = 0;
  if (!passphrase) {
    options.hash = "plain";
  }
  auto plan = plan_plain_key(options, true);
  if (!plan) {
    return plan.error();
  }
  if (!plan->hash && secret.size() < plan->key_bytes) {
    return make_error(
        Errc::key,
        fmt::format("credential {} holds {} bytes, and the {}-bit key needs {}: "
                    "seal the whole key (or, when it holds a passphrase, say so: "
                    "x-lbscrypt.sealed=passphrase, open --sealed-passphrase)",
                    printable(credential), secret.size(), key.key_size_bits, plan->key_bytes));
  }
  if (auto usable = check_plain_hash(*plan); !usable) {
    return usable.error();
  }
  return make_plain_key(*plan, secret);
}

bool accepts_cached_passphrase(const VolumeOptions &volume) {
  switch (volume.password_cache) {
    case PasswordCache::yes:
      return true;
    case PasswordCache::no:
      return false;
    case PasswordCache::unset:
      break;
  }
  return volume.check.has_value();
}

Result<AttachOutcome> attach_volume(const AttachRequest &request, const Environment &env,
                                    const AttachServices &services) {
  if (auto r = check_mapping_name(request.name); !r) {
    return r.error();
  }
  const bool passphrase = is_passphrase_key(request.key);
  if (!passphrase) {
    if (auto r = check_key_field(request.key); !r) {
      return r.error();
    }
  }
  auto volume = parse_volume_options(request.options, passphrase);
  if (!volume) {
    return volume.error();
  }
  return attach_volume(request, std::move(volume).value(), env, services);
}

Result<AttachOutcome> attach_volume(const AttachRequest &request, VolumeOptions v,
                                    const Environment &env, const AttachServices &services) {
  if (auto r = check_mapping_name(request.name); !r) {
    return r.error();
  }
  const bool passphrase = is_passphrase_key(request.key);
  if (v.sealed()) {
    if (auto r = check_sealed_key_field(request.name, request.key); !r) {
      return r.error();
    }
  }
  const auto path = volume_device_path(request.device);
  if (!path) {
    return path.error();
  }
  v.mapping.device = *path;
  if (!check_table_word("device", *path)) {
    // udev's escaped names (by-label/Data\x281\x29): the kernel reads a backslash in a table
    // line as its own escape, so the device the link points to goes into the table.
    auto behind = services.device_behind ? services.device_behind(*path) : std::nullopt;
    if (!behind) {
      return make_error(Errc::not_found,
                        fmt::format("{}: {} does not exist: no device has that name yet",
                                    request.name, printable(*path)));
    }
    v.mapping.device = std::move(behind).value();
  }
  KeyOptions key = v.key;
  key.quiet = true;  // the line names cipher, size and hash: no defaults to warn about
  std::vector<std::string> notes;
  PassphraseQuestion question{request.name, request.device, v.timeout_us,
                              v.password_cache != PasswordCache::no, accepts_cached_passphrase(v)};
  // A sealed passphrase may be asked for when the TPM refuses, or after a failed check= (never
  // with headless=); a sealed key never: the volume opens with it or not at all.
  const bool may_ask = passphrase || (v.sealed_passphrase && !v.headless);
  VolumeSteps steps;
  steps.key = [&](std::uint32_t attempt) -> Result<SecretBuffer> {
    if (v.sealed() && attempt == 1) {
      auto secret = services.unseal
                        ? services.unseal(sealed_key_of(request.key, v))
                        : Result<SecretBuffer>(make_error(Errc::key, "no way to unseal it"));
      if (secret) {
        return key_from_sealed(*secret, v.key, v.sealed_passphrase, request.key);
      }
      if (!may_ask) {
        return make_error(
            Errc::key,
            fmt::format("{}: {}{}", request.name, secret.error().message,
                        v.sealed_passphrase ? " (headless=: no passphrase is asked for)" : ""));
      }
      notes.push_back(fmt::format("{}: {}; asking for the passphrase instead", request.name,
                                  secret.error().message));
    }
    if (attempt == 1 && !passphrase && !v.sealed()) {
      key.key_file = request.key;
      if (auto warning = key_file_warning(request.key, services)) {
        notes.push_back(*warning);
      }
    }
    if (passphrase && v.headless) {
      return make_error(Errc::key,
                        fmt::format("{}: headless= forbids asking for a passphrase and the line "
                                    "names no key file: give a key file, or drop headless=",
                                    request.name));
    }
    question.accept_cached = question.accept_cached && attempt == 1 && !v.sealed();
    const TerminalReader ask = [&](std::size_t /*max_size*/) -> Result<SecretBuffer> {
      if (!services.ask_passphrase) {
        return make_error(Errc::key, "no way to ask for a passphrase");
      }
      return services.ask_passphrase(question);
    };
    // A passphrase is a typed line (hashed, no line end); a key file is the key itself. The
    // hash is checked before anything is asked.
    auto derived = derive_plain_key(key, may_ask, ask);
    if (!derived) {
      return derived.error();
    }
    return std::move(derived->key);
  };
  if (v.check) {
    steps.check = [&](const OpenResult &opened) {
      return check_content(request, v, opened, services);
    };
    // Only a passphrase is worth asking again: another try reads the same key file.
    steps.again = [&](std::uint32_t attempt) {
      return may_ask && (v.tries == 0 || attempt < v.tries);
    };
  }
  const VolumeRequest volume{request.name, v.mapping, v.key.key_size_bits / 8, v.read_only, false};
  auto opened = open_volume(volume, env, steps);
  if (!opened) {
    return opened.error();
  }
  AttachOutcome outcome;
  outcome.device = opened->opened.device;
  outcome.already_active = opened->already_active;
  outcome.torn_warning = opened->opened.torn_warning;
  outcome.notes = std::move(notes);
  outcome.notes.insert(outcome.notes.end(), opened->notes.begin(), opened->notes.end());
  return outcome;
}

namespace {

// Runs argv with standard input from /dev/null; with `output`, standard output into it.
Result<int> run_program(const std::vector<std::string> &argv, SecretBuffer *output) {
  int pipe_fds[2] = {-1, -1};
  if (output != nullptr && pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return make_error(Errc::kernel,
                      fmt::format("cannot run {}: {}", argv.front(), std::strerror(errno)));
  }
  std::vector<char *> args = detail::exec_argv(argv);
  const pid_t pid = fork();
  if (pid < 0) {
    return make_error(Errc::kernel,
                      fmt::format("cannot run {}: {}", argv.front(), std::strerror(errno)));
  }
  if (pid == 0) {
    if (output != nullptr) {
      dup2(pipe_fds[1], STDOUT_FILENO);
    }
    execvp(args.front(), args.data());
    _exit(127);
  }
  if (output != nullptr) {
    close(pipe_fds[1]);
    std::array<char, 256> chunk{};
    while (true) {
      const ssize_t n = read(pipe_fds[0], chunk.data(), chunk.size());
      if (n > 0) {
        output->append(chunk.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    secure_wipe(chunk.data(), chunk.size());
    close(pipe_fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return make_error(Errc::kernel,
                        fmt::format("cannot wait for {}: {}", argv.front(), std::strerror(errno)));
    }
  }
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  return 128 + WTERMSIG(status);
}

Result<SecretBuffer> ask_with_systemd(const PassphraseQuestion &q) {
  // --timeout takes a systemd time span: microseconds keep every timeout= exact.
  std::vector<std::string> argv{"systemd-ask-password", "--icon=drive-harddisk",
                                fmt::format("--id=lbscrypt:{}", q.name),
                                fmt::format("--timeout={}us", q.timeout_us.value_or(0))};
  if (q.keep) {
    argv.emplace_back("--keyname=lbscrypt");
  }
  if (q.keep && q.accept_cached) {
    argv.emplace_back("--accept-cached");
  }
  argv.push_back(fmt::format("Passphrase for lbscrypt volume {} ({}):", q.name, q.device));
  SecretBuffer answer;
  const auto status = run_program(argv, &answer);
  if (!status) {
    return status.error();
  }
  if (*status != 0) {
    return make_error(Errc::key,
                      fmt::format("no passphrase for {}: systemd-ask-password exited with {} "
                                  "(timed out, cancelled, or not installed)",
                                  q.name, *status));
  }
  if (!answer.empty() && answer.view().back() == '\n') {
    answer.truncate(answer.size() - 1);
  }
  return answer;
}

}  // namespace

AttachServices system_attach_services() {
  AttachServices s;
  s.ask_passphrase = ask_with_systemd;
  s.run = [](const std::vector<std::string> &argv) { return run_program(argv, nullptr); };
  s.exists = [](const std::string &path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
  };
  s.device_behind = [](const std::string &path) -> std::optional<std::string> {
    std::error_code ec;
    auto real = std::filesystem::canonical(path, ec);
    return ec ? std::nullopt : std::optional<std::string>(real.string());
  };
  s.unseal = [](const SealedKey &key) {
    // systemd sets it for a unit with credentials; the file is there when LoadCredentialEncrypted=
    // named this one. In the initramfs and by hand there is none: systemd-creds unseals.
    const char *directory = std::getenv("CREDENTIALS_DIRECTORY");
    return sealed_secret(
        key, directory != nullptr ? std::optional<std::filesystem::path>(directory) : std::nullopt,
        run_child);
  };
  s.key_file_mode = [](const std::string &path) -> std::optional<unsigned> {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return std::nullopt;
    }
    return static_cast<unsigned>(st.st_mode);
  };
  return s;
}

}  // namespace lbscrypt
