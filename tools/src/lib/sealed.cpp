// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/sealed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_argv.hpp"
#include "file_descriptor.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/table.hpp"
#include "text_fields.hpp"

namespace lbscrypt {

namespace {

constexpr std::size_t kMaxCredentialName = 255;  // NAME_MAX: the file under the directory
constexpr std::size_t kMaxErrorText = 4096;      // what is kept of a child's standard error
constexpr int kExecFailed = 127;                 // as a shell says a program was not found

Error bad(std::string message) { return make_error(Errc::invalid_argument, std::move(message)); }

// Why `id` is no usable credential name (check_credential_name), or nullopt.
std::optional<std::string> credential_name_fault(std::string_view id) {
  const bool odd = std::any_of(id.begin(), id.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte >= 0x7f || c == ':' || c == '/' || c == '%' || c == '\\' ||
           c == '"' || c == '\'';
  });
  if (id.empty() || id == "." || id == ".." || odd || id.size() > kMaxCredentialName) {
    return fmt::format(
        "name it with printable ASCII letters, digits and -._ only, at most {} bytes",
        kMaxCredentialName);
  }
  return std::nullopt;
}

}  // namespace

Result<void> check_credential_name(std::string_view id) {
  if (const auto fault = credential_name_fault(id)) {
    return bad(fmt::format("'{}' is no credential name systemd takes: {}", printable(id), *fault));
  }
  return Ok{};
}

Result<std::string> credential_id(std::string_view path) {
  std::string_view id =
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  const std::string_view suffix = kCredentialSuffix;
  if (id.size() > suffix.size() && id.ends_with(suffix)) {
    id.remove_suffix(suffix.size());
  }
  if (const auto fault = credential_name_fault(id)) {
    return bad(
        fmt::format("credential file '{}' gives no usable credential name ('{}', its name without "
                    "{}): {} (/etc/lbscrypt/data{})",
                    printable(path), printable(id), kCredentialSuffix, *fault, kCredentialSuffix));
  }
  return std::string(id);
}

Result<std::vector<unsigned>> parse_pcr_list(std::string_view text) {
  std::vector<unsigned> pcrs;
  if (text.empty() || text == "none") {
    return pcrs;
  }
  std::string joined(text);
  std::replace(joined.begin(), joined.end(), ',', '+');
  for (const std::string_view word : text::split(joined, '+')) {
    const auto pcr = parse_decimal_u32(word);
    if (!pcr || *pcr > kMaxPcr) {
      return bad(fmt::format(
          "--tpm2-pcrs {}: '{}' is not a PCR: give PCR numbers 0 to {} joined by + (7, or "
          "0+7), or none for the TPM alone",
          printable(text), printable(word), kMaxPcr));
    }
    if (std::find(pcrs.begin(), pcrs.end(), *pcr) != pcrs.end()) {
      return bad(fmt::format("--tpm2-pcrs {}: PCR {} is given twice: give it once", printable(text),
                             *pcr));
    }
    pcrs.push_back(*pcr);
  }
  std::sort(pcrs.begin(), pcrs.end());
  return pcrs;
}

std::string format_pcr_list(const std::vector<unsigned> &pcrs) {
  std::string out;
  for (const unsigned pcr : pcrs) {
    out += out.empty() ? fmt::format("{}", pcr) : fmt::format("+{}", pcr);
  }
  return out;
}

std::vector<std::string> pcr_warnings(const std::filesystem::path &sysfs,
                                      const std::vector<unsigned> &pcrs) {
  std::vector<std::string> warnings;
  for (const unsigned pcr : pcrs) {
    const auto file = sysfs / "class/tpm/tpm0/pcr-sha256" / fmt::format("{}", pcr);
    std::ifstream in(file);
    std::string value;
    in >> value;
    const bool hex = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
    if (!in || !hex) {
      warnings.push_back(fmt::format(
          "warning: cannot read PCR {} from {} (Linux 5.12 and later have it): not checked "
          "for a value the firmware put there",
          pcr, file.string()));
    } else if (std::all_of(value.begin(), value.end(), [](char c) { return c == '0'; })) {
      warnings.push_back(
          fmt::format("warning: PCR {} was never extended: a policy on it protects nothing", pcr));
    }
  }
  return warnings;
}

namespace {

// A pipe, both ends closed on exec.
struct Pipe {
  int read = -1;
  int write = -1;
};

Result<Pipe> make_pipe(const std::string &program) {
  std::array<int, 2> fds{-1, -1};
  if (pipe2(fds.data(), O_CLOEXEC) != 0) {
    return make_error(Errc::kernel, fmt::format("cannot run {}: {}", program, std::strerror(errno)),
                      errno);
  }
  return Pipe{fds[0], fds[1]};
}

void close_fd(int &fd) {
  if (fd >= 0) {
    close(fd);
    fd = -1;
  }
}

// In the child, after fork: only async-signal-safe calls.
[[noreturn]] void exec_child(char *const *args, int in, int out, int err) {
  dup2(in, STDIN_FILENO);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  execvp(args[0], args);
  const bool missing = errno == ENOENT;
  constexpr std::string_view kCannot = "cannot run ";
  constexpr std::string_view kMissing = ": no such program in PATH\n";
  constexpr std::string_view kFailed = ": exec failed\n";
  const std::string_view why = missing ? kMissing : kFailed;
  // Nothing to do when these fail: the exit status says it.
  if (write(STDERR_FILENO, kCannot.data(), kCannot.size()) >= 0 &&
      write(STDERR_FILENO, args[0], std::strlen(args[0])) >= 0) {
    [[maybe_unused]] const ssize_t done = write(STDERR_FILENO, why.data(), why.size());
  }
  _exit(kExecFailed);
}

// Whether a line is the TPM2 software stack's own log (tpm2-tss writes
// "ERROR:tcti:src/...: ..." to standard error before systemd-creds says what failed).
bool tss_log_line(std::string_view line) {
  for (const std::string_view level : {"ERROR:", "WARNING:", "INFO:", "DEBUG:", "TRACE:"}) {
    if (line.starts_with(level)) {
      const std::string_view rest = line.substr(level.size());
      const auto colon = rest.find(':');
      return colon != std::string_view::npos && colon > 0 &&
             std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(colon),
                         [](char c) { return c >= 'a' && c <= 'z'; });
    }
  }
  return false;
}

// The first non-empty line of a child's standard error that is its own (not the TPM2
// library's log); the first non-empty line when all are the library's.
std::string first_line(std::string_view text) {
  std::string first;
  for (std::string_view line : text::split(text, '\n')) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      continue;
    }
    if (!tss_log_line(line)) {
      return printable(line);
    }
    if (first.empty()) {
      first = printable(line);
    }
  }
  return first;
}

// SIGPIPE held back while the parent writes to a child that may have exited; a SIGPIPE the
// writes raised is taken off before the mask is put back.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  SigpipeBlocked(const SigpipeBlocked &) = delete;
  SigpipeBlocked &operator=(const SigpipeBlocked &) = delete;
  SigpipeBlocked(SigpipeBlocked &&) = delete;
  SigpipeBlocked &operator=(SigpipeBlocked &&) = delete;
  ~SigpipeBlocked() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      static_cast<void>(sigtimedwait(&pipe_, nullptr, &now));
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

// Feeds `input` to `to_child` and drains `from_out` and `from_err` until the child has closed
// both (every descriptor is closed on the way).
void exchange(int &to_child, int &from_out, int &from_err, const SecretBuffer *input,
              SecretBuffer *output, std::string &errors, bool &output_overflow) {
  const SigpipeBlocked blocked;
  std::size_t written = 0;
  if (to_child >= 0) {
    static_cast<void>(fcntl(to_child, F_SETFL, O_NONBLOCK));  // NOLINT(*-vararg)
    if (input == nullptr || input->empty()) {
      close_fd(to_child);
    }
  }
  std::array<char, 512> chunk{};
  while (to_child >= 0 || from_out >= 0 || from_err >= 0) {
    std::array<pollfd, 3> fds{
        {{to_child, POLLOUT, 0}, {from_out, POLLIN, 0}, {from_err, POLLIN, 0}}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (to_child >= 0 && fds[0].revents != 0) {
      bool done = (fds[0].revents & POLLOUT) == 0;  // POLLERR: the child reads no more
      if (!done) {
        const ssize_t n = write(to_child, input->data() + written, input->size() - written);
        if (n > 0) {
          written += static_cast<std::size_t>(n);
        }
        done = written == input->size() || (n < 0 && errno != EAGAIN && errno != EINTR);
      }
      if (done) {
        close_fd(to_child);
      }
    }
    for (const std::size_t i : {std::size_t{1}, std::size_t{2}}) {
      int &fd = i == 1 ? from_out : from_err;
      if (fd < 0 || fds.at(i).revents == 0) {
        continue;
      }
      const ssize_t n = read(fd, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        close_fd(fd);
        continue;
      }
      const auto size = static_cast<std::size_t>(n);
      if (i == 1 && output != nullptr) {
        if (output->size() + size > kMaxSealedBytes) {
          output_overflow = true;
        } else {
          output->append(chunk.data(), size);
        }
      } else if (i == 2 && errors.size() < kMaxErrorText) {
        errors.append(chunk.data(), std::min(size, kMaxErrorText - errors.size()));
      }
    }
  }
  secure_wipe(chunk.data(), chunk.size());
  close_fd(to_child);
  close_fd(from_out);
  close_fd(from_err);
}

}  // namespace

Result<ChildOutcome> run_child(const std::vector<std::string> &argv, const SecretBuffer *input,
                               SecretBuffer *output) {
  if (argv.empty()) {
    return bad("no program to run");
  }
  const std::string &program = argv.front();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const detail::FileDescriptor null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (null_fd.get() < 0) {
    return make_error(Errc::kernel, fmt::format("cannot open /dev/null: {}", std::strerror(errno)),
                      errno);
  }
  auto in = input != nullptr ? make_pipe(program) : Result<Pipe>(Pipe{});
  auto out = output != nullptr ? make_pipe(program) : Result<Pipe>(Pipe{});
  auto err = make_pipe(program);
  const auto close_all = [&] {
    for (Result<Pipe> *p : {&in, &out, &err}) {
      if (*p) {
        close_fd((*p)->read);
        close_fd((*p)->write);
      }
    }
  };
  for (const Result<Pipe> *p : {&in, &out, &err}) {
    if (!*p) {
      const Error error = p->error();
      close_all();
      return error;
    }
  }
  std::vector<char *> args = detail::exec_argv(argv);
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close_all();
    return make_error(Errc::kernel, fmt::format("cannot run {}: {}", program, std::strerror(error)),
                      error);
  }
  if (pid == 0) {
    exec_child(args.data(), in->read >= 0 ? in->read : null_fd.get(),
               out->write >= 0 ? out->write : null_fd.get(), err->write);
  }
  close_fd(in->read);
  close_fd(out->write);
  close_fd(err->write);
  std::string errors;
  bool overflow = false;
  exchange(in->write, out->read, err->read, input, output, errors, overflow);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return make_error(Errc::kernel,
                        fmt::format("cannot wait for {}: {}", program, std::strerror(errno)),
                        errno);
    }
  }
  if (overflow) {
    return make_error(
        Errc::key, fmt::format("{} gave more than {} bytes: not a key", program, kMaxSealedBytes));
  }
  ChildOutcome outcome;
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.error_line = first_line(errors);
  return outcome;
}

Result<SecretBuffer> random_secret(std::size_t bytes) {
  if (bytes < kMinRandomKeyBytes || bytes > kMaxRandomKeyBytes) {
    return bad(
        fmt::format("--random {}: give the key's size in bytes, {} to {} (64 for "
                    "aes-xts-plain64 with size=512)",
                    bytes, kMinRandomKeyBytes, kMaxRandomKeyBytes));
  }
  SecretBuffer key(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(key.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return make_error(
          Errc::key, fmt::format("cannot draw a random key (getrandom): {}", std::strerror(errno)),
          errno);
    }
    got += static_cast<std::size_t>(n);
  }
  return key;
}

Result<SecretBuffer> read_secret_file(const std::string &path) {
  const auto failed = [&](int error) {
    return make_error(
        Errc::key,
        fmt::format("cannot read the key file {}: {}", printable(path), std::strerror(error)),
        error);
  };
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const detail::FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    return failed(errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return failed(errno);
  }
  if (S_ISDIR(st.st_mode)) {
    return failed(EISDIR);
  }
  SecretBuffer secret(kMaxSealedBytes + 1);
  std::size_t done = 0;
  while (done < secret.size()) {
    const ssize_t n = read(fd.get(), secret.data() + done, secret.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return failed(errno);
    }
    if (n == 0) {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (done > kMaxSealedBytes) {
    return make_error(Errc::key,
                      fmt::format("key file {} holds more than {} bytes: a sealed secret is the "
                                  "key itself or a passphrase; give the key alone",
                                  printable(path), kMaxSealedBytes));
  }
  if (done == 0) {
    return make_error(Errc::key,
                      fmt::format("key file {} is empty: nothing to seal", printable(path)));
  }
  secret.truncate(done);
  return secret;
}

Result<std::string> seal_name(const SealRequest &request) {
  if (!request.name) {
    return credential_id(request.output);
  }
  if (auto r = check_credential_name(*request.name); !r) {
    return bad(fmt::format("--name {}", r.error().message));
  }
  return *request.name;
}

Result<std::vector<std::string>> seal_argv(const SealRequest &request) {
  auto id = seal_name(request);
  if (!id) {
    return id.error();
  }
  return std::vector<std::string>{
      kSystemdCreds,   "encrypt", "--with-key=tpm2", "--tpm2-pcrs=" + format_pcr_list(request.pcrs),
      "--name=" + *id, "-",       request.output};
}

Result<void> seal_secret(const SealRequest &request, const SecretBuffer &secret,
                         const ChildRunner &run) {
  auto argv = seal_argv(request);
  if (!argv) {
    return argv.error();
  }
  if (secret.empty()) {
    return make_error(Errc::key, "the secret to seal is empty");
  }
  const auto outcome = run(*argv, &secret, nullptr);
  if (!outcome) {
    return outcome.error();
  }
  if (outcome->status != 0) {
    return make_error(
        Errc::key,
        fmt::format("systemd-creds could not seal {} to the TPM2 (exit status {}): {}",
                    printable(request.output), outcome->status,
                    outcome->error_line.empty() ? "it said nothing" : outcome->error_line));
  }
  return Ok{};
}

namespace {

// The name `key` is unsealed under: its own, checked, or the file's.
Result<std::string> unseal_name(const SealedKey &key) {
  if (!key.name) {
    return credential_id(key.credential);
  }
  if (auto r = check_credential_name(*key.name); !r) {
    return r.error();
  }
  return *key.name;
}

}  // namespace

Result<std::vector<std::string>> unseal_argv(const SealedKey &key) {
  auto id = unseal_name(key);
  if (!id) {
    return id.error();
  }
  std::vector<std::string> argv{kSystemdCreds, "decrypt", "--name=" + *id};
  if (key.tpm2_device) {
    argv.push_back("--tpm2-device=" + *key.tpm2_device);
  }
  argv.push_back(key.credential);
  argv.emplace_back("-");
  return argv;
}

Result<SecretBuffer> sealed_secret(
    const SealedKey &key, const std::optional<std::filesystem::path> &credentials_directory,
    const ChildRunner &run) {
  auto id = unseal_name(key);
  if (!id) {
    return id.error();
  }
  if (!key.name && credentials_directory && !credentials_directory->empty()) {
    const auto unsealed = *credentials_directory / *id;
    std::error_code ec;
    if (std::filesystem::exists(unsealed, ec)) {
      return read_secret_file(unsealed.string());
    }
  }
  auto argv = unseal_argv(key);
  if (!argv) {
    return argv.error();
  }
  SecretBuffer secret;
  const auto outcome = run(*argv, nullptr, &secret);
  if (!outcome) {
    return outcome.error();
  }
  if (outcome->status != 0) {
    return make_error(
        Errc::key,
        fmt::format("the TPM2 did not unseal {} (credential {}): systemd-creds: {}{}",
                    printable(key.credential), *id,
                    outcome->error_line.empty() ? fmt::format("exit status {}", outcome->status)
                                                : outcome->error_line,
                    outcome->status == kExecFailed
                        ? " (install systemd 252 or later; an initramfs needs it in the image)"
                        : ""));
  }
  if (secret.empty()) {
    return make_error(Errc::key, fmt::format("credential {} holds an empty secret: seal it again",
                                             printable(key.credential)));
  }
  return secret;
}

}  // namespace lbscrypt
