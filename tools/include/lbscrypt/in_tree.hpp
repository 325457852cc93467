// SPDX-License-Identifier: GPL-2.0-only
// A kernel's own crypt target, read from its dm-crypt module file without loading it: the
// version field of the module's struct target_type, for a kernel that is not running (an
// image being built, a kernel being installed) as much as for the running one before its
// dm_crypt is loaded.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "lbscrypt/result.hpp"
#include "lbscrypt/target_version.hpp"

namespace lbscrypt {

// The crypt target's version in a kernel module's bytes: an ELF relocatable object (32 or
// 64 bits, either byte order; an xz or zstd compressed one is unpacked first). The object's
// symbol table names `crypt_target`, a struct target_type: a u64 `features`, the `name`
// pointer, the `module` pointer, then `unsigned version[3]`. `name` is only an address
// once the module is loaded, so the object holds it as a relocation: it must resolve to the
// string "crypt", which proves the layout before the three numbers after `module` are read.
// Without the symbol, the one relocation to "crypt" that has one to __this_module a pointer
// later is taken. Anything else is an error that says what was missing.
[[nodiscard]] Result<TargetVersion> crypt_version_in_module(std::string_view bytes);

// Where a kernel's own dm_crypt is, and what it reports.
enum class InTreeState {
  module,      // a dm-crypt.ko[.xz|.zst] whose version was read
  built_in,    // listed in modules.builtin: no file to read
  missing,     // the kernel's directory has no module file, and it is not built in
  unreadable,  // a module file whose version could not be read (`why` says why)
};

struct InTreeCrypt {
  std::string release;
  InTreeState state = InTreeState::missing;
  std::filesystem::path file;            // the module file (module, unreadable)
  std::optional<TargetVersion> version;  // module only
  std::string why;                       // unreadable: what failed
};

// Looks for kernel/drivers/md/dm-crypt.ko, .ko.xz and .ko.zst under
// `modules_root`/`release` (modules_root is /lib/modules on a running system) and reads the
// first found (a file above 64 MiB is unreadable, not read on); refuses a release that is
// empty, "." or "..", holds a '/', a blank, a control or non-ASCII byte, or names no directory
// under `modules_root` (a kernel that is not installed, a mistyped release: an error, not a
// verdict).
[[nodiscard]] Result<InTreeCrypt> in_tree_crypt(const std::filesystem::path &modules_root,
                                                std::string_view release);

// Whether that kernel's own target serves every sector size dm-crypt-lbs does (it reports
// 1.30.0 or later), so the kernel needs no dm-crypt-lbs. Built in, missing or unreadable:
// no, dm-crypt-lbs is used.
[[nodiscard]] bool enough_to_hand_over(const InTreeCrypt &in_tree);

// One line that says what was found and which module serves "crypt" on that kernel, and why.
[[nodiscard]] std::string describe(const InTreeCrypt &in_tree);

[[nodiscard]] const char *to_string(InTreeState state);

}  // namespace lbscrypt
