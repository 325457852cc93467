// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/target_version.hpp"

#include <fmt/format.h>

#include <array>

#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

Result<TargetVersion> parse_target_version(std::string_view text) {
  const std::string_view original = text;
  if (!text.empty() && text.front() == 'v') {
    text.remove_prefix(1);
  }
  std::array<std::uint32_t, 3> parts{};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto dot = text.find('.');
    const bool last = i + 1 == parts.size();
    if (last != (dot == std::string_view::npos)) {
      return make_error(Errc::invalid_argument,
                        fmt::format("invalid target version '{}': expected MAJOR.MINOR.PATCH, "
                                    "for example 1.30.0",
                                    original));
    }
    const auto field = parse_decimal_u32(text.substr(0, dot));
    if (!field) {
      return make_error(Errc::invalid_argument,
                        fmt::format("invalid target version '{}': expected MAJOR.MINOR.PATCH, "
                                    "for example 1.30.0",
                                    original));
    }
    parts.at(i) = *field;
    text = last ? std::string_view{} : text.substr(dot + 1);
  }
  return TargetVersion{parts[0], parts[1], parts[2]};
}

std::string to_string(const TargetVersion &version) {
  return fmt::format("{}.{}.{}", version.major, version.minor, version.patch);
}

}  // namespace lbscrypt
