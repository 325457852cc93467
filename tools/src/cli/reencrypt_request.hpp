// SPDX-License-Identifier: GPL-2.0-only
// What `lbscrypt reencrypt` hands the library (lbscrypt/reencrypt/run.hpp), built from its
// arguments: the request, and the steps that ask for the two keys.
#pragma once

#include <iosfwd>

#include "cli.hpp"
#include "lbscrypt/reencrypt/run.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"
#include "options.hpp"
#include "reencrypt_cmd.hpp"

namespace lbscrypt::cli {

// The request: both sides, the key files given, --update-tab's new key, lbscrypttab's text
// (none where there is no lbscrypttab) and where the registry and sysfs are. Refused: a new
// key size that is no whole number of bytes, --keep-key across two key sizes, an lbscrypttab
// that cannot be read.
[[nodiscard]] Result<ReencryptRequest> reencrypt_request(const ReencryptArgs &args,
                                                         const Services &services);

// The steps that ask for the keys: the old one as open asks for it, the new one from the
// --new-key options (their warnings on `err`), unsealed from --new-tpm2-credential under the
// file's own name (a sealed lbscrypttab line's new key the library unseals itself), or with
// --keep-key the old one again, kept in `old_copy` meanwhile. The steps refer to every argument:
// each must outlive them.
void add_key_steps(ReencryptSteps &steps, const ReencryptArgs &args, const CommonFlags &flags,
                   const Services &services, std::ostream &err, SecretBuffer &old_copy);

}  // namespace lbscrypt::cli
