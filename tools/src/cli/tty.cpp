// SPDX-License-Identifier: GPL-2.0-only
#include "tty.hpp"

#include <termios.h>
#include <unistd.h>

#include <cstdio>

namespace lbscrypt::cli {

namespace {

class EchoOff {
 public:
  EchoOff() : active_(tcgetattr(STDIN_FILENO, &saved_) == 0) {
    if (active_) {
      termios quiet = saved_;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      active_ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
    }
  }
  EchoOff(const EchoOff &) = delete;
  EchoOff &operator=(const EchoOff &) = delete;
  EchoOff(EchoOff &&) = delete;
  EchoOff &operator=(EchoOff &&) = delete;
  ~EchoOff() {
    if (active_) {
      tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
    }
  }

 private:
  termios saved_{};
  bool active_;
};

}  // namespace

bool stdin_is_terminal() { return isatty(STDIN_FILENO) == 1; }

TerminalReader terminal_reader(std::string prompt) {
  return [prompt = std::move(prompt)](std::size_t max_size) -> Result<SecretBuffer> {
    static_cast<void>(std::fputs(prompt.c_str(), stderr));
    static_cast<void>(std::fflush(stderr));
    SecretBuffer line;
    {
      const EchoOff quiet;
      char c = 0;
      while (read(STDIN_FILENO, &c, 1) == 1 && c != '\n') {
        if (line.size() == max_size) {
          return make_error(Errc::key, "the passphrase is too long");
        }
        line.append(&c, 1);
      }
      secure_wipe(&c, 1);
    }
    static_cast<void>(std::fputs("\n", stderr));
    return line;
  };
}

}  // namespace lbscrypt::cli
