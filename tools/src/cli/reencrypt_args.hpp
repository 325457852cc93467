// SPDX-License-Identifier: GPL-2.0-only
// `lbscrypt reencrypt`'s arguments checked against each other, before anything else is done:
// options that exclude each other, a device or a run to go on with, and the two keys not
// both on standard input.
#pragma once

#include "lbscrypt/result.hpp"
#include "reencrypt_cmd.hpp"

namespace lbscrypt::cli {

// The first refusal the arguments earn, in the order the user reads them; `stdin_is_terminal`
// says whether a key without a file would be typed or read from standard input.
[[nodiscard]] Result<void> check_reencrypt_args(const ReencryptArgs &args, bool stdin_is_terminal);

}  // namespace lbscrypt::cli
