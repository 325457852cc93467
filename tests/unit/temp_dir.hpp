// SPDX-License-Identifier: GPL-2.0-only
// A temporary directory for a test, removed with everything in it at scope exit.
#pragma once

#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <system_error>

namespace lbscrypt::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "lbscrypt-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  TempDir(TempDir &&) = delete;
  TempDir &operator=(TempDir &&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace lbscrypt::test
