// SPDX-License-Identifier: GPL-2.0-only
// lbscrypt: hands argv to the CLI and returns its exit code.
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "boot_cmd.hpp"
#include "cli.hpp"
#include "output.hpp"

int main(int argc, char **argv) {
  try {
    std::vector<std::string> args(argv, argv + argc);
    // Installed as the systemd generator (a link): systemd runs it with its three directories.
    if (!args.empty() &&
        std::filesystem::path(args.front()).filename() == lbscrypt::cli::kGeneratorName) {
      args.insert(args.begin() + 1, "generate-units");
    }
    return lbscrypt::cli::run(args, std::cout, std::cerr, lbscrypt::cli::system_services());
  } catch (const std::bad_alloc &) {
    std::cerr << "lbscrypt: out of memory\n";
    return lbscrypt::cli::kExitNoMemory;
  } catch (const std::exception &e) {
    lbscrypt::cli::print_error(std::cerr, std::string("internal error: ") + e.what());
    return lbscrypt::cli::kExitInvalid;
  }
}
