// SPDX-License-Identifier: GPL-2.0-only
// The reader of a kernel's own crypt target version, on relocatable objects the compilers
// made from data/crypt_target.c at build time (this host's, 32-bit where -m32 works, arm64
// where the cross compiler is installed), raw and compressed with liblzma's and libzstd's
// encoders.
#include <lzma.h>
#include <zstd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lbscrypt/in_tree.hpp"
#include "lbscrypt/table.hpp"
#include "temp_dir.hpp"

using lbscrypt::InTreeState;
using lbscrypt::TargetVersion;

namespace {

std::vector<std::string> compilers() {
  std::vector<std::string> out;
  std::stringstream list(LBSCRYPT_FIXTURE_COMPILERS);
  for (std::string name; std::getline(list, name, ',');) {
    out.push_back(name);
  }
  return out;
}

std::string fixture(const std::string &compiler, const std::string &variant) {
  const auto path = std::filesystem::path(LBSCRYPT_FIXTURES) / (compiler + "_" + variant + ".o");
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

std::string xz(const std::string &plain) {
  std::string out(lzma_stream_buffer_bound(plain.size()), '\0');
  std::size_t used = 0;
  // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): liblzma takes bytes
  REQUIRE(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, nullptr,
                                  reinterpret_cast<const std::uint8_t *>(plain.data()),
                                  plain.size(), reinterpret_cast<std::uint8_t *>(out.data()), &used,
                                  out.size()) == LZMA_OK);
  // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
  out.resize(used);
  return out;
}

std::string zstd(const std::string &plain) {
  std::string out(ZSTD_compressBound(plain.size()), '\0');
  const std::size_t used = ZSTD_compress(out.data(), out.size(), plain.data(), plain.size(), 19);
  REQUIRE(ZSTD_isError(used) == 0U);
  out.resize(used);
  return out;
}

void write(const std::filesystem::path &path, const std::string &bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("in-tree version: read from the objects each compiler made", "[in_tree]") {
  const auto names = compilers();
  REQUIRE_FALSE(names.empty());
  for (const auto &cc : names) {
    INFO("compiler " << cc);
    const auto v129 = fixture(cc, "v129");
    for (const auto &bytes : {v129, xz(v129), zstd(v129)}) {
      const auto version = lbscrypt::crypt_version_in_module(bytes);
      REQUIRE(version.ok());
      CHECK(*version == TargetVersion{1, 29, 0});
    }
    const auto v130 = lbscrypt::crypt_version_in_module(fixture(cc, "v130"));
    REQUIRE(v130.ok());
    CHECK(*v130 == TargetVersion{1, 30, 0});
    // no crypt_target symbol: the pointer to "crypt" beside one to __this_module
    const auto renamed = lbscrypt::crypt_version_in_module(zstd(fixture(cc, "renamed")));
    REQUIRE(renamed.ok());
    CHECK(*renamed == TargetVersion{1, 30, 0});
    // a crypt_target whose name is not "crypt" is not read as one
    const auto wrong = lbscrypt::crypt_version_in_module(fixture(cc, "wrongname"));
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().message ==
          "crypt_target's name field points at 'crypx', not \"crypt\": not the struct "
          "target_type this reads");
  }
}

TEST_CASE("in-tree version: this host, 32-bit and arm64 objects are all read", "[in_tree]") {
  // What the build made: the cases above ran for each. Say which, so a missing cross
  // compiler shows in the test's output instead of passing unseen.
  const auto names = compilers();
  CHECK(std::find(names.begin(), names.end(), "host") != names.end());
  if (std::find(names.begin(), names.end(), "arm64") == names.end()) {
    WARN("no aarch64-linux-gnu-gcc at build time: arm64 objects were not made or read");
  }
  if (std::find(names.begin(), names.end(), "host32") == names.end()) {
    WARN("cc -m32 does not compile here: 32-bit objects were not made or read");
  }
}

TEST_CASE("in-tree version: what is not a module says so", "[in_tree]") {
  struct Row {
    std::string bytes;
    const char *reason;
  };
  const auto v129 = fixture("host", "v129");
  std::string executable = v129;
  executable[16] = 2;  // ET_EXEC (little endian: the low byte of e_type)
  std::string no_sections = v129;
  no_sections.resize(200);
  const auto packed = xz(v129);
  const Row rows[] = {
      {"", "it is not an ELF object"},
      {"#!/bin/sh\n", "it is not an ELF object"},
      {executable, "not a relocatable object"},
      {no_sections, "its section headers are missing or cut short"},
      {packed.substr(0, packed.size() / 2), "its xz data"},
      {zstd(v129).substr(0, 40), "its zstd data"},
  };
  for (const auto &row : rows) {
    INFO(row.reason);
    const auto version = lbscrypt::crypt_version_in_module(row.bytes);
    REQUIRE_FALSE(version.ok());
    CHECK_THAT(version.error().message, Catch::Contains(row.reason));
  }
}

TEST_CASE("in-tree crypt of a kernel: found under the modules root", "[in_tree]") {
  lbscrypt::test::TempDir root;
  const auto md = [&](const char *release) {
    return root.path / release / "kernel" / "drivers" / "md";
  };
  write(md("7.3.4-amd64") / "dm-crypt.ko.xz", xz(fixture("host", "v129")));
  write(md("7.3.4-stand-in") / "dm-crypt.ko.zst", zstd(fixture("host", "v130")));
  write(md("6.1.0-arm64") / "dm-crypt.ko", fixture(compilers().back(), "v129"));
  write(md("broken") / "dm-crypt.ko", "not a module");
  write(root.path / "builtin" / "modules.builtin",
        "kernel/drivers/md/dm-mod.ko\nkernel/drivers/md/dm-crypt.ko\n");
  write(root.path / "nothing" / "modules.builtin", "kernel/drivers/md/dm-mod.ko\n");

  const auto intree = lbscrypt::in_tree_crypt(root.path, "7.3.4-amd64");
  REQUIRE(intree.ok());
  CHECK(intree->state == InTreeState::module);
  CHECK(intree->version == TargetVersion{1, 29, 0});
  CHECK(intree->file == md("7.3.4-amd64") / "dm-crypt.ko.xz");
  CHECK_FALSE(lbscrypt::enough_to_hand_over(*intree));
  CHECK(lbscrypt::describe(*intree) ==
        "kernel 7.3.4-amd64: its own dm_crypt is crypt v1.29.0 (" + intree->file.string() +
            "), below v1.30.0: dm_crypt_lbs serves crypt there (sector sizes above 4096 need "
            "v1.30.0)");

  const auto stand_in = lbscrypt::in_tree_crypt(root.path, "7.3.4-stand-in");
  REQUIRE(stand_in.ok());
  CHECK(stand_in->version == TargetVersion{1, 30, 0});
  CHECK(lbscrypt::enough_to_hand_over(*stand_in));
  CHECK_THAT(lbscrypt::describe(*stand_in),
             Catch::StartsWith("kernel 7.3.4-stand-in: its own dm_crypt is crypt v1.30.0 (") &&
                 Catch::EndsWith("): enough to hand over, it serves crypt there and "
                                 "dm_crypt_lbs is not needed"));

  const auto plain = lbscrypt::in_tree_crypt(root.path, "6.1.0-arm64");
  REQUIRE(plain.ok());
  CHECK(plain->version == TargetVersion{1, 29, 0});

  const auto broken = lbscrypt::in_tree_crypt(root.path, "broken");
  REQUIRE(broken.ok());
  CHECK(broken->state == InTreeState::unreadable);
  CHECK(broken->why == "it is not an ELF object");
  CHECK_FALSE(lbscrypt::enough_to_hand_over(*broken));
  CHECK_THAT(lbscrypt::describe(*broken),
             Catch::Contains("cannot be read (it is not an ELF object): dm_crypt_lbs serves"));

  const auto builtin = lbscrypt::in_tree_crypt(root.path, "builtin");
  REQUIRE(builtin.ok());
  CHECK(builtin->state == InTreeState::built_in);
  CHECK_FALSE(lbscrypt::enough_to_hand_over(*builtin));
  CHECK_THAT(lbscrypt::describe(*builtin), Catch::Contains("built in"));

  const auto missing = lbscrypt::in_tree_crypt(root.path, "nothing");
  REQUIRE(missing.ok());
  CHECK(missing->state == InTreeState::missing);
  CHECK_FALSE(lbscrypt::enough_to_hand_over(*missing));
  CHECK_THAT(lbscrypt::describe(*missing), Catch::Contains("no dm-crypt.ko, .ko.xz or .ko.zst"));

  // A kernel that is not installed (a mistyped release) is an error, not "dm_crypt_lbs serves
  // crypt there"; so is a name that is a file, not a kernel's directory.
  write(root.path / "a-file", "x");
  for (const char *release : {"no-such-kernel", "18446744073709551615", "a-file"}) {
    INFO("release '" << release << "'");
    const auto absent = lbscrypt::in_tree_crypt(root.path, release);
    REQUIRE_FALSE(absent.ok());
    CHECK(absent.error().code == lbscrypt::Errc::invalid_argument);
    CHECK_THAT(absent.error().message,
               Catch::StartsWith(std::string("no kernel ") + release + " under "));
  }

  // Control bytes, blanks and non-ASCII are never a release, even where a directory of that
  // name exists, and the message shows them escaped.
  std::filesystem::create_directories(root.path / "7.3.4\f" / "kernel");
  std::filesystem::create_directories(root.path / std::string("7.3.4\x1b[2J", 9));
  for (const std::string &release :
       {std::string(""), std::string("."), std::string(".."), std::string("../etc"),
        std::string("a/b"), std::string("\f 4096"), std::string("7.3.4\x1b[2J"),
        std::string("7.3.4 "), std::string("6.1\t"), std::string("caf\xc3\xa9")}) {
    INFO("release '" << lbscrypt::printable(release) << "'");
    const auto bad = lbscrypt::in_tree_crypt(root.path, release);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == lbscrypt::Errc::invalid_argument);
    CHECK_THAT(bad.error().message, Catch::Contains("is not a kernel release"));
    CHECK(bad.error().message.find_first_of("\x1b\f\t") == std::string::npos);
  }
}

TEST_CASE("in-tree crypt of a kernel: a file that never ends is not read for ever", "[in_tree]") {
  const lbscrypt::test::TempDir root;
  const auto md = root.path / "zero" / "kernel" / "drivers" / "md";
  std::filesystem::create_directories(md);
  std::filesystem::create_symlink("/dev/zero", md / "dm-crypt.ko");
  const auto zero = lbscrypt::in_tree_crypt(root.path, "zero");
  REQUIRE(zero.ok());
  CHECK(zero->state == InTreeState::unreadable);
  CHECK(zero->why == "it is larger than 64 MiB, which no dm-crypt module is");
  CHECK_FALSE(lbscrypt::enough_to_hand_over(*zero));

  std::filesystem::create_directories(root.path / "zero-builtin");
  std::filesystem::create_symlink("/dev/zero", root.path / "zero-builtin" / "modules.builtin");
  const auto builtin = lbscrypt::in_tree_crypt(root.path, "zero-builtin");
  REQUIRE(builtin.ok());
  CHECK(builtin->state == InTreeState::missing);
}
