// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "lbscrypt/units.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every file (its text) and symlink ("-> target") under `root`, by relative path.
std::map<std::string, std::string> tree(const fs::path &root) {
  std::map<std::string, std::string> entries;
  for (const auto &entry : fs::recursive_directory_iterator(root)) {
    const std::string relative = entry.path().lexically_relative(root).string();
    if (entry.is_symlink()) {
      entries[relative] = "-> " + fs::read_symlink(entry.path()).string();
    } else if (entry.is_regular_file()) {
      entries[relative] = read_text(entry.path());
    }
  }
  return entries;
}

using lbscrypt::test::TempDir;

const lbscrypt::GeneratorSettings kSettings{"/usr/sbin/lbscrypt", "/etc/lbscrypttab"};

}  // namespace

TEST_CASE("generator: units, drop-ins and links match the golden tree", "[units]") {
  const fs::path data = fs::path(LBSCRYPT_TEST_DATA) / "generator";
  const auto tab = lbscrypt::parse_lbscrypttab(read_text(data / "lbscrypttab"), "/etc/lbscrypttab");
  REQUIRE(tab.errors.empty());
  REQUIRE(tab.entries.size() == 4);
  const TempDir out;
  REQUIRE(lbscrypt::write_units(out.path, lbscrypt::generate_units(tab.entries, kSettings)).ok());
  const auto expected = tree(data / "expected");
  const auto written = tree(out.path);
  REQUIRE(expected.size() == 13);  // 4 units, 2 drop-ins, 7 links
  for (const auto &[path, text] : expected) {
    INFO(path);
    REQUIRE(written.contains(path));
    CHECK(written.at(path) == text);
  }
  for (const auto &[path, text] : written) {
    INFO(path);
    CHECK(expected.contains(path));
  }
  // A second run into the same directory (systemd daemon-reload) replaces, never fails.
  CHECK(lbscrypt::write_units(out.path, lbscrypt::generate_units(tab.entries, kSettings)).ok());
}

TEST_CASE("generator: systemd's unit-name escaping", "[units]") {
  using lbscrypt::unit_name_escape;
  using lbscrypt::unit_name_from_path;
  CHECK(unit_name_escape("home-vol") == "home\\x2dvol");
  CHECK(unit_name_escape("a b") == "a\\x20b");
  CHECK(unit_name_escape(".hidden.x") == "\\x2ehidden.x");
  CHECK(unit_name_escape("Ok:_.9") == "Ok:_.9");
  CHECK(unit_name_escape("caf\xc3\xa9") == "caf\\xc3\\xa9");
  CHECK(unit_name_from_path("/dev/disk/by-id/virtio-x", ".device") ==
        "dev-disk-by\\x2did-virtio\\x2dx.device");
  CHECK(unit_name_from_path("//dev//vdb/", ".device") == "dev-vdb.device");
  CHECK(unit_name_from_path("/", ".mount") == "-.mount");
  CHECK(lbscrypt::volume_unit_name("a-b") == "lbscrypt@a\\x2db.service");
}

TEST_CASE("generator: what systemd would expand is escaped in Exec lines", "[units]") {
  const auto tab = lbscrypt::parse_lbscrypttab(
      "v /dev/vdb /etc/50%key cipher=aes-xts-plain64,size=256,check=/opt/$HOME/it's\\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.entries.size() == 1);
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  REQUIRE_FALSE(units.files.empty());
  const std::string &unit = units.files.front().text;
  CHECK_THAT(unit, Catch::Contains("RequiresMountsFor=/etc/50%%key\n"));
  CHECK_THAT(unit, Catch::Contains("ExecStart=/usr/sbin/lbscrypt attach 'v' '/dev/vdb' "
                                   "'/etc/50%%key' "
                                   "'cipher=aes-xts-plain64,size=256,check=/opt/$$HOME/it\\'s\\\\n'"
                                   "\n"));
}

TEST_CASE("generator: nofail, noauto and timeout change the dependencies", "[units]") {
  const auto tab = lbscrypt::parse_lbscrypttab(
      "a /dev/vda /k cipher=aes-xts-plain64,size=256,nofail,noauto,timeout=10,tries=0\n"
      "b /dev/vdb none cipher=aes-xts-plain64,size=256,hash=sha256,timeout=10,tries=3\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.entries.size() == 2);
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  REQUIRE(units.files.size() == 3);  // a's unit; b's unit and its device drop-in
  CHECK_THAT(units.files[0].text, !Catch::Contains("Before=cryptsetup.target") &&
                                      Catch::Contains("TimeoutSec=infinity"));
  CHECK_THAT(units.files[1].text,
             Catch::Contains("Before=cryptsetup.target") && Catch::Contains("TimeoutSec=60\n"));
  REQUIRE(units.links.size() == 3);  // a: the mapper device only; b: the target and the device
  CHECK(units.links[0].path == "dev-mapper-a.device.requires/lbscrypt@a.service");
  CHECK(units.links[1].path == "cryptsetup.target.requires/lbscrypt@b.service");
  CHECK(units.links[1].target == "../lbscrypt@b.service");
}
