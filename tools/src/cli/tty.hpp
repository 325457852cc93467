// SPDX-License-Identifier: GPL-2.0-only
// Passphrase entry on a terminal: prompt on stderr, no echo, one line without its newline.
#pragma once

#include <string>

#include "lbscrypt/keys.hpp"

namespace lbscrypt::cli {

[[nodiscard]] bool stdin_is_terminal();
[[nodiscard]] TerminalReader terminal_reader(std::string prompt);

}  // namespace lbscrypt::cli
