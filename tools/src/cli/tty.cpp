// SPDX-License-Identifier: GPL-2.0-only
#include "tty.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>

namespace lbscrypt::cli {

namespace {

constexpr std::array<int, 5> kFatalSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};

// What a signal handler needs to put the terminal back: plain data, set before the handlers
// are installed and cleared after they are removed.
struct SavedTerminal {
  termios mode{};
  int fd = -1;
  std::array<struct sigaction, kFatalSignals.size()> previous{};
};
SavedTerminal g_saved;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
volatile std::sig_atomic_t g_echo_off =
    0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void restore_and_reraise(int signo) {
  if (g_echo_off != 0) {
    tcsetattr(g_saved.fd, TCSANOW, &g_saved.mode);  // async-signal-safe
    g_echo_off = 0;
  }
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals.at(i) == signo) {
      sigaction(signo, &g_saved.previous.at(i), nullptr);
    }
  }
  static_cast<void>(raise(signo));
}

class EchoOff {
 public:
  explicit EchoOff(int fd) {
    termios saved{};
    if (tcgetattr(fd, &saved) != 0) {
      return;
    }
    g_saved.mode = saved;
    g_saved.fd = fd;
    struct sigaction action {};
    action.sa_handler = restore_and_reraise;  // NOLINT(*-union-access)
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      sigaction(kFatalSignals.at(i), &action, &g_saved.previous.at(i));
    }
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    g_echo_off = 1;
    active_ = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
    if (!active_) {
      restore();
    }
  }
  EchoOff(const EchoOff &) = delete;
  EchoOff &operator=(const EchoOff &) = delete;
  EchoOff(EchoOff &&) = delete;
  EchoOff &operator=(EchoOff &&) = delete;
  ~EchoOff() {
    if (active_) {
      restore();
    }
  }

 private:
  static void restore() {
    if (g_echo_off != 0) {
      tcsetattr(g_saved.fd, TCSAFLUSH, &g_saved.mode);
      g_echo_off = 0;
    }
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      sigaction(kFatalSignals.at(i), &g_saved.previous.at(i), nullptr);
    }
  }
  bool active_ = false;
};

using Clock = std::chrono::steady_clock;

// One line from the terminal, without its newline, echo off; waits until `deadline` at most.
Result<SecretBuffer> read_line(const TerminalOptions &options, const std::string &prompt,
                               std::size_t max_size, std::optional<Clock::time_point> deadline) {
  SecretBuffer line;
  {
    const EchoOff quiet(options.fd);
    // The prompt comes after echo is off (and pending input flushed): what is typed after it
    // is neither shown nor lost.
    static_cast<void>(std::fputs(prompt.c_str(), stderr));
    static_cast<void>(std::fflush(stderr));
    char c = 0;
    for (;;) {
      if (deadline) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        pollfd p{options.fd, POLLIN, 0};
        const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
        if (ready == 0) {
          static_cast<void>(std::fputs("\n", stderr));
          return make_error(Errc::key,
                            fmt::format("Error reading passphrase from terminal: no passphrase "
                                        "within --timeout {} seconds.",
                                        options.timeout_s));
        }
        if (ready < 0 && errno == EINTR) {
          continue;
        }
      }
      const ssize_t got = read(options.fd, &c, 1);
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got != 1 || c == '\n' || c == '\r') {
        break;
      }
      if (line.size() == max_size) {
        secure_wipe(&c, 1);
        static_cast<void>(std::fputs("\n", stderr));
        return make_error(Errc::key, fmt::format("the passphrase is longer than {} bytes, the "
                                                 "terminal limit; use --key-file",
                                                 max_size));
      }
      line.append(&c, 1);
    }
    secure_wipe(&c, 1);
  }
  static_cast<void>(std::fputs("\n", stderr));
  return line;
}

}  // namespace

bool stdin_is_terminal() { return isatty(STDIN_FILENO) == 1; }

TerminalReader terminal_reader(TerminalOptions options) {
  return [options = std::move(options)](std::size_t max_size) -> Result<SecretBuffer> {
    std::optional<Clock::time_point> deadline;
    if (options.timeout_s != 0) {
      deadline = Clock::now() + std::chrono::seconds(options.timeout_s);
    }
    auto first = read_line(options, options.prompt, max_size, deadline);
    if (!first || !options.verify) {
      return first;
    }
    const auto second = read_line(options, "Verify passphrase: ", max_size, deadline);
    if (!second) {
      return second.error();
    }
    if (!(*first == *second)) {
      return make_error(Errc::permission, "Passphrases do not match.");
    }
    return first;
  };
}

}  // namespace lbscrypt::cli
