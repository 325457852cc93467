// SPDX-License-Identifier: GPL-2.0-only
// lbscrypt: hands argv to the CLI and returns its exit code.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"
#include "generate_cmd.hpp"
#include "output.hpp"

namespace {

// Takes `fd` when it is closed. The lowest free number is `fd` itself: 0, 1 and 2 are looked
// at in order. False when /dev/null cannot be opened there.
bool hold_if_closed(int fd) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
  if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
    return true;
  }
  const int flags = fd == STDIN_FILENO ? O_WRONLY : O_RDONLY;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const int taken = open("/dev/null", flags | O_NOCTTY);
  if (taken != fd && taken >= 0) {
    close(taken);
  }
  return taken == fd;
}

// A standard stream the caller closed keeps behaving as closed (reading or writing it fails
// with EBADF, as coreutils' and cryptsetup's do), but its number is taken at once by /dev/null
// opened the other way round: no file opened later (libcryptsetup's /dev/urandom, a key file)
// can land on fd 0, 1 or 2 and be read as the passphrase or written as the table. False when
// /dev/null cannot be opened.
bool reserve_closed_streams() {
  constexpr std::array<int, 3> kStreams{STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  return std::ranges::all_of(kStreams, hold_if_closed);
}

// As coreutils' close_stdout: what is still buffered is written now, and a failed write (a
// full disk, /dev/full, a closed standard output) is an error, never a silent exit 0.
int close_stdout(int code) {
  errno = 0;
  std::cout.flush();
  bool failed = std::cout.bad() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  int error = errno;
  if (std::fclose(stdout) != 0 && !failed) {
    failed = true;
    error = errno;
  }
  if (!failed) {
    return code;
  }
  lbscrypt::cli::print_error(std::cerr, std::string("cannot write to standard output: ") +
                                            (error != 0 ? std::strerror(error) : "write error") +
                                            " (the output is incomplete: give a writable output)");
  return code == lbscrypt::cli::kExitOk ? lbscrypt::cli::kExitInvalid : code;
}

}  // namespace

int main(int argc, char **argv) {
  if (!reserve_closed_streams()) {
    std::cerr << "lbscrypt: standard input, output or error is closed and /dev/null cannot be "
                 "opened to hold its place: start lbscrypt with all three open\n";
    return lbscrypt::cli::kExitInvalid;
  }
  int code = lbscrypt::cli::kExitInvalid;
  try {
    std::vector<std::string> args(argv, argv + argc);
    // Installed as the systemd generator (a link): systemd runs it with its three directories.
    if (!args.empty() &&
        std::filesystem::path(args.front()).filename() == lbscrypt::cli::kGeneratorName) {
      args.insert(args.begin() + 1, "generate-units");
    }
    code = lbscrypt::cli::run(args, std::cout, std::cerr, lbscrypt::cli::system_services());
  } catch (const std::bad_alloc &) {
    std::cerr << "lbscrypt: out of memory\n";
    code = lbscrypt::cli::kExitNoMemory;
  } catch (const std::exception &e) {
    lbscrypt::cli::print_error(std::cerr, std::string("internal error: ") + e.what());
    code = lbscrypt::cli::kExitInvalid;
  }
  return close_stdout(code);
}
