// SPDX-License-Identifier: GPL-2.0-only
// lbscrypt: hands argv to the CLI and returns its exit code.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char **argv) {
  try {
    const std::vector<std::string> args(argv, argv + argc);
    return lbscrypt::cli::run(args, std::cout, std::cerr, lbscrypt::cli::system_services());
  } catch (const std::bad_alloc &) {
    std::cerr << "lbscrypt: out of memory\n";
    return lbscrypt::cli::kExitNoMemory;
  } catch (const std::exception &e) {
    std::cerr << "lbscrypt: internal error: " << e.what() << '\n';
    return lbscrypt::cli::kExitInvalid;
  }
}
