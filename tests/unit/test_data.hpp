// SPDX-License-Identifier: GPL-2.0-only
// Reading the golden files in tests/unit/data.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lbscrypt::test {

// The non-empty, non-comment lines of a data file.
inline std::vector<std::string> data_lines(const std::string &name) {
  std::ifstream in(std::string(LBSCRYPT_TEST_DATA) + "/" + name);
  if (!in) {
    throw std::runtime_error("missing test data file " + name);
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() != '#') {
      lines.push_back(line);
    }
  }
  return lines;
}

}  // namespace lbscrypt::test
