// SPDX-License-Identifier: GPL-2.0-only
// The passphrase prompt on a real terminal: a pseudo-terminal whose slave side is the child's
// terminal. The parent types, sends signals and reads the slave's termios afterwards, so the
// echo state is observed from outside the code under test.
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "tty.hpp"

namespace {

struct Pty {
  int master = -1;
  int slave = -1;
  Pty() { REQUIRE(openpty(&master, &slave, nullptr, nullptr, nullptr) == 0); }
  Pty(const Pty &) = delete;
  Pty &operator=(const Pty &) = delete;
  Pty(Pty &&) = delete;
  Pty &operator=(Pty &&) = delete;
  ~Pty() {
    close(master);
    close(slave);
  }
  [[nodiscard]] bool echo_on() const {
    termios t{};
    REQUIRE(tcgetattr(slave, &t) == 0);
    return (t.c_lflag & ECHO) != 0;
  }
  // Reads the master side until `text` has appeared (or 10 s passed).
  [[nodiscard]] bool wait_for(const std::string &text) const {
    std::string seen;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (seen.find(text) == std::string::npos && std::chrono::steady_clock::now() < end) {
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, 100) == 1) {
        char buf[256];
        const ssize_t n = read(master, buf, sizeof buf);
        if (n > 0) {
          seen.append(buf, static_cast<std::size_t>(n));
        }
      }
    }
    return seen.find(text) != std::string::npos;
  }
  void type(const std::string &text) const {
    REQUIRE(write(master, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
};

// Exit codes of the child: 0 read `expected`, 1 read something else, 2 the reader's error was
// Errc::permission, 3 another error.
constexpr int kReadOther = 1;
constexpr int kReadPermission = 2;
constexpr int kReadError = 3;

pid_t start_reader(const Pty &pty, lbscrypt::cli::TerminalOptions options,
                   const std::string &expected) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(30);  // a child that hangs dies instead of hanging the test run
    dup2(pty.slave, STDIN_FILENO);
    dup2(pty.slave, STDERR_FILENO);
    options.fd = STDIN_FILENO;
    const auto reader = lbscrypt::cli::terminal_reader(options);
    const auto line = reader(lbscrypt::kMaxTerminalPassphrase);
    if (!line) {
      _exit(line.error().code == lbscrypt::Errc::permission ? kReadPermission : kReadError);
    }
    _exit(line->view() == expected ? 0 : kReadOther);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("tty: the passphrase is read without echo, echo comes back", "[tty]") {
  const Pty pty;
  REQUIRE(pty.echo_on());
  const pid_t pid = start_reader(pty, {}, "correct horse");
  REQUIRE(pty.wait_for("Enter passphrase: "));
  CHECK_FALSE(pty.echo_on());
  pty.type("correct horse\n");
  const int status = wait_status(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(pty.echo_on());
}

TEST_CASE("tty: Ctrl-C (SIGINT) and SIGTERM at the prompt restore echo", "[tty]") {
  for (const int signo : {SIGINT, SIGTERM, SIGHUP}) {
    INFO("signal " << signo);
    const Pty pty;
    const pid_t pid = start_reader(pty, {}, "x");
    REQUIRE(pty.wait_for("Enter passphrase: "));
    REQUIRE_FALSE(pty.echo_on());
    REQUIRE(kill(pid, signo) == 0);
    const int status = wait_status(pid);
    CHECK(WIFSIGNALED(status));  // the signal still ends the process
    if (WIFSIGNALED(status)) {
      CHECK(WTERMSIG(status) == signo);
    }
    CHECK(pty.echo_on());
  }
}

TEST_CASE("tty: -y asks twice and refuses a mismatch", "[tty]") {
  lbscrypt::cli::TerminalOptions options;
  options.verify = true;
  {
    const Pty pty;
    const pid_t pid = start_reader(pty, options, "same");
    REQUIRE(pty.wait_for("Enter passphrase: "));
    pty.type("same\n");
    REQUIRE(pty.wait_for("Verify passphrase: "));
    pty.type("same\n");
    const int status = wait_status(pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(pty.echo_on());
  }
  {
    const Pty pty;
    const pid_t pid = start_reader(pty, options, "one");
    REQUIRE(pty.wait_for("Enter passphrase: "));
    pty.type("one\n");
    REQUIRE(pty.wait_for("Verify passphrase: "));
    pty.type("two\n");
    const int status = wait_status(pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == kReadPermission);
    CHECK(pty.echo_on());
  }
}

TEST_CASE("tty: --timeout gives up and restores echo", "[tty]") {
  lbscrypt::cli::TerminalOptions options;
  options.timeout_s = 1;
  const Pty pty;
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = start_reader(pty, options, "never");
  REQUIRE(pty.wait_for("Enter passphrase: "));
  const int status = wait_status(pid);
  const auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kReadError);
  CHECK(waited >= std::chrono::milliseconds(900));
  CHECK(waited < std::chrono::seconds(8));
  CHECK(pty.echo_on());
}

TEST_CASE("tty: a passphrase over 512 bytes is refused, echo restored", "[tty]") {
  const Pty pty;
  const pid_t pid = start_reader(pty, {}, "");
  REQUIRE(pty.wait_for("Enter passphrase: "));
  pty.type(std::string(600, 'a') + "\n");
  const int status = wait_status(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kReadError);
  CHECK(pty.echo_on());
}

namespace {

// Runs the built lbscrypt binary with a pseudo-terminal as its standard input, output and
// error; types `input` once the output shows `wait_for` (if given); returns all it printed
// and its exit status.
struct TtyRun {
  std::string output;
  int status = -1;
};

TtyRun run_on_tty(const std::vector<std::string> &args, const std::string &wait_for = {},
                  const std::string &input = {}) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(30);
    std::vector<char *> argv;
    std::string binary = LBSCRYPT_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (auto &a : copy) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  TtyRun run;
  bool typed = wait_for.empty();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    if (!typed && run.output.find(wait_for) != std::string::npos) {
      REQUIRE(write(master, input.data(), input.size()) == static_cast<ssize_t>(input.size()));
      typed = true;
    }
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) {
      char buf[512];
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) {
        break;  // EIO: the child closed the terminal
      }
      run.output.append(buf, static_cast<std::size_t>(n));
    }
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      break;
    }
  }
  REQUIRE(waitpid(pid, &run.status, 0) == pid);
  close(master);
  return run;
}

const std::string kKeyFile = std::string(LBSCRYPT_TEST_DATA) + "/keyfile-64.bin";
const std::string kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const std::vector<std::string> kElsewhere = {
    "table", "--assume-version", "1.30.0", "--assume-page-size", "65536", "--size", "2048"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string> &more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace

TEST_CASE("tty: the binary does not print a key to a terminal without --showkeys", "[tty]") {
  const auto hidden = run_on_tty(with(kElsewhere, {"--key-file", kKeyFile, "/dev/x"}));
  REQUIRE(WIFEXITED(hidden.status));
  CHECK(WEXITSTATUS(hidden.status) == 0);
  CHECK(hidden.output.find(kKeyHex) == std::string::npos);
  CHECK_THAT(hidden.output, Catch::Contains(" " + std::string(64, '0') + " 0 /dev/x 0") &&
                                Catch::Contains("--showkeys"));
  const auto shown = run_on_tty(with(kElsewhere, {"--showkeys", "--key-file", kKeyFile, "/dev/x"}));
  REQUIRE(WIFEXITED(shown.status));
  CHECK(WEXITSTATUS(shown.status) == 0);
  CHECK_THAT(shown.output, Catch::Contains(kKeyHex));
}

TEST_CASE("tty: the binary refuses before it prompts, and prompts when it will go on", "[tty]") {
  const auto refused = run_on_tty({"table", "--assume-version", "1.28.0", "--assume-page-size",
                                   "65536", "--size", "2048", "--sector-size", "65536", "/dev/x"});
  REQUIRE(WIFEXITED(refused.status));
  CHECK(WEXITSTATUS(refused.status) == 1);
  CHECK(refused.output.find("passphrase") == std::string::npos);
  CHECK_THAT(refused.output, Catch::Contains("needs v1.30.0"));
  const auto prompted =
      run_on_tty(with(kElsewhere, {"--showkeys", "-c", "aes-xts-plain64", "-s", "256", "-h",
                                   "sha256", "--key-file", "-", "-l", "4", "/dev/x"}),
                 "Enter passphrase: ", "correct horse\n");
  REQUIRE(WIFEXITED(prompted.status));
  CHECK(WEXITSTATUS(prompted.status) == 0);
  CHECK(prompted.output.find("correct horse") == std::string::npos);  // no echo
  // sha256("correct horse"): --key-file=- prompts on a terminal and -l does not cut the line
  CHECK_THAT(prompted.output,
             Catch::Contains("4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631"));
}
