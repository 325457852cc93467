// SPDX-License-Identifier: GPL-2.0-only
// Passphrase entry on a terminal: prompt on stderr, no echo, one line without its newline.
// Echo comes back on every way out: a return, an error, a timeout, and the signals that end
// the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE), which are then re-raised.
#pragma once

#include <string>

#include "lbscrypt/keys.hpp"

namespace lbscrypt::cli {

struct TerminalOptions {
  std::string prompt = "Enter passphrase: ";
  bool verify = false;     // -y: ask twice, refuse when they differ
  unsigned timeout_s = 0;  // --timeout: give up after this many seconds (0: wait forever)
  int fd = 0;              // the terminal (standard input)
};

[[nodiscard]] bool stdin_is_terminal();
[[nodiscard]] TerminalReader terminal_reader(TerminalOptions options);

}  // namespace lbscrypt::cli
