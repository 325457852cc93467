// SPDX-License-Identifier: GPL-2.0-only
// Splitting the text of table files (lbscrypttab, fstab, mountinfo): the library's private
// helpers. The views point into the text given.
#pragma once

#include <string_view>
#include <vector>

namespace lbscrypt::text {

// The parts between each `separator`, empty ones included ("a,,b" is three).
inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto end = text.find(separator);
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) {
      return parts;
    }
    text.remove_prefix(end + 1);
  }
}

// The words of a line, split at runs of blanks and tabs.
inline std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t pos = 0;
  while (true) {
    const auto begin = line.find_first_not_of(" \t", pos);
    if (begin == std::string_view::npos) {
      return words;
    }
    const auto end = line.find_first_of(" \t", begin);
    words.push_back(line.substr(begin, end - begin));
    if (end == std::string_view::npos) {
      return words;
    }
    pos = end;
  }
}

}  // namespace lbscrypt::text
