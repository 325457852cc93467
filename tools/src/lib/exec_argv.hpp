// SPDX-License-Identifier: GPL-2.0-only
// An argv for execvp(3) from strings (the library's private helper): pointers into `argv`,
// which must outlive the result, and a null at the end.
#pragma once

#include <string>
#include <vector>

namespace lbscrypt::detail {

inline std::vector<char *> exec_argv(const std::vector<std::string> &argv) {
  std::vector<char *> args;
  args.reserve(argv.size() + 1);
  for (const auto &arg : argv) {
    args.push_back(
        const_cast<char *>(arg.c_str()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  args.push_back(nullptr);
  return args;
}

}  // namespace lbscrypt::detail
