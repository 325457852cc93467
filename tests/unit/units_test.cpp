// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <algorithm>
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

// Every file and link under `written` is the golden tree's under `expected`, and no other.
void check_tree(const fs::path &expected_dir, const fs::path &written_dir) {
  const auto expected = tree(expected_dir);
  const auto written = tree(written_dir);
  for (const auto &[path, text] : expected) {
    INFO(path);
    REQUIRE(written.contains(path));
    CHECK(written.at(path) == text);
  }
  for (const auto &[path, text] : written) {
    INFO(path);
    CHECK(expected.contains(path));
  }
}

// An entry as the parser gives it, built here (the options' text is passed on as written).
lbscrypt::TabEntry entry(unsigned line, std::string name, std::string device, std::string path,
                         std::string key, std::string options) {
  lbscrypt::TabEntry e;
  e.line = line;
  e.name = std::move(name);
  e.device = std::move(device);
  e.path = std::move(path);
  e.key = std::move(key);
  e.options = std::move(options);
  e.volume.mapping.cipher = "aes-xts-plain64";
  e.volume.mapping.device = e.path;
  e.volume.key.key_size_bits = 256;
  return e;
}

// A name of `size` bytes with `dashes` of them '-' (each escaped to \x2d, 4 bytes).
std::string name_with_dashes(std::size_t size, std::size_t dashes) {
  std::string name(size, 'v');
  for (std::size_t i = 0; i < dashes; ++i) {
    name[1 + 2 * i] = '-';
  }
  return name;
}

}  // namespace

TEST_CASE("generator: units, drop-ins and links match the golden tree", "[units]") {
  const fs::path data = fs::path(LBSCRYPT_TEST_DATA) / "generator";
  const auto tab = lbscrypt::parse_lbscrypttab(read_text(data / "lbscrypttab"), "/etc/lbscrypttab");
  REQUIRE(tab.errors.empty());
  REQUIRE(tab.entries.size() == 6);
  const TempDir out;
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  CHECK(units.errors.empty());
  REQUIRE(lbscrypt::write_units(out.path, units).empty());
  // 6 units and the slice, 4 drop-ins, 11 links
  REQUIRE(tree(data / "expected").size() == 22);
  check_tree(data / "expected", out.path);
  // A second run into the same directory (systemd daemon-reload) replaces, never fails.
  CHECK(lbscrypt::write_units(out.path, lbscrypt::generate_units(tab.entries, kSettings)).empty());
}

TEST_CASE("generator: _netdev, x-systemd.device-timeout=, headless= and escaping, golden",
          "[units]") {
  std::vector<lbscrypt::TabEntry> entries;
  entries.push_back(entry(1, "net", "/dev/disk/by-path/ip-10.0.0.1:3260-iscsi-lun-1",
                          "/dev/disk/by-path/ip-10.0.0.1:3260-iscsi-lun-1", "none",
                          "cipher=aes-xts-plain64,size=256,hash=sha256,_netdev"));
  entries.back().volume.netdev = true;
  entries.push_back(entry(2, "slow", "/dev/vdb", "/dev/vdb", "/dev/vdc",
                          "cipher=aes-xts-plain64,size=256,x-systemd.device-timeout=1min30s,"
                          "headless=true"));
  entries.back().volume.device_timeout_us = 90000000;
  entries.back().volume.headless = true;
  // Bytes systemd would read otherwise in every field that reaches a unit: a quote, a
  // backslash, a specifier, a variable, a control byte, UTF-8.
  entries.push_back(entry(3, "odd", "PARTLABEL=it's\\a%b$c\x01\xc3\xa9",
                          "/dev/disk/by-partlabel/it's\\a%b$c\x01\xc3\xa9",
                          "/dev/disk/by-label/k\"ey", "cipher=aes-xts-plain64,size=256,nofail"));
  entries.back().volume.nofail = true;
  entries.push_back(entry(4, "netroot", "/dev/vde", "/dev/vde", "none",
                          "cipher=aes-xts-plain64,size=256,hash=sha256,_netdev,nofail,"
                          "x-initrd.attach,x-systemd.device-timeout=0"));
  entries.back().volume.netdev = true;
  entries.back().volume.nofail = true;
  entries.back().volume.initrd_attach = true;
  entries.back().volume.device_timeout_us = 0;
  const auto units = lbscrypt::generate_units(entries, kSettings);
  CHECK(units.errors.empty());
  const TempDir out;
  REQUIRE(lbscrypt::write_units(out.path, units).empty());
  const fs::path expected = fs::path(LBSCRYPT_TEST_DATA) / "generator-options" / "expected";
  REQUIRE(tree(expected).size() == 17);  // 4 units and the slice, 4 drop-ins, 8 links
  check_tree(expected, out.path);
}

TEST_CASE("generator: every unit has no time limit, timeout= bounds each prompt only", "[units]") {
  for (const std::uint64_t timeout : {0ULL, 10000000ULL}) {
    auto e = entry(1, "v", "/dev/vdb", "/dev/vdb", "none", "");
    e.volume.timeout_us = timeout;
    e.volume.tries = 3;
    const auto units = lbscrypt::generate_units({e}, kSettings);
    REQUIRE_FALSE(units.files.empty());
    INFO(units.files.front().text);
    CHECK_THAT(units.files.front().text,
               Catch::Contains("\nTimeoutSec=infinity\n") && !Catch::Contains("TimeoutSec=3"));
  }
}

TEST_CASE("generator: a name too long for a unit name is refused, the others written", "[units]") {
  // 111 bytes with 55 dashes: 276 bytes escaped, lbscrypt@....service 293.
  const std::string too_long = name_with_dashes(111, 55);
  // 126 bytes with 34 dashes: 228 escaped, dev-mapper-....device.requires exactly 255.
  const std::string longest = name_with_dashes(126, 34);
  const std::vector<lbscrypt::TabEntry> entries{
      entry(3, "first", "/dev/vdb", "/dev/vdb", "/etc/k", ""),
      entry(4, too_long, "/dev/vdc", "/dev/vdc", "/etc/k", ""),
      entry(5, longest, "/dev/vdd", "/dev/vdd", "/etc/k", ""),
  };
  const auto units = lbscrypt::generate_units(entries, kSettings);
  REQUIRE(units.errors.size() == 1);
  CHECK(units.errors[0].code == lbscrypt::Errc::invalid_argument);
  CHECK(units.errors[0].message ==
        "/etc/lbscrypttab:4: the name is too long for a unit name: "
        "dev-mapper-NAME.device.requires would be 303 bytes, systemd takes at most 255 (each "
        "byte other than a letter, digit, ':', '_' or '.' counts 4, as \\xNN); give a shorter "
        "name");
  const TempDir out;
  REQUIRE(lbscrypt::write_units(out.path, units).empty());
  const std::string escaped = lbscrypt::unit_name_escape(longest);
  REQUIRE(escaped.size() == 228);
  CHECK(fs::is_regular_file(out.path / lbscrypt::volume_unit_name("first")));
  CHECK(fs::is_regular_file(out.path / lbscrypt::volume_unit_name(longest)));
  CHECK(fs::is_symlink(out.path / ("dev-mapper-" + escaped + ".device.requires") /
                       lbscrypt::volume_unit_name(longest)));
  CHECK(fs::is_symlink(out.path / "cryptsetup.target.requires" /
                       lbscrypt::volume_unit_name(longest)));
  // Nothing of the refused volume: no unit, drop-in or link names it.
  const std::string refused = lbscrypt::unit_name_escape(too_long);
  for (const auto &[path, text] : tree(out.path)) {
    INFO(path);
    CHECK(path.find(refused) == std::string::npos);
  }
  CHECK(tree(out.path).size() == 9);  // 2 units and the slice, 2 drop-ins, 4 links
}

TEST_CASE("generator: a unit that cannot be written does not stop the others", "[units]") {
  const std::vector<lbscrypt::TabEntry> entries{
      entry(1, "a", "/dev/vdb", "/dev/vdb", "/etc/k", ""),
      entry(2, "b", "/dev/vdc", "/dev/vdc", "/etc/k", ""),
  };
  const TempDir out;
  // Where a's unit goes there is a directory: its file cannot be written.
  fs::create_directories(out.path / "lbscrypt@a.service" / "in-the-way");
  const auto errors = lbscrypt::write_units(out.path, lbscrypt::generate_units(entries, kSettings));
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].code == lbscrypt::Errc::device);
  CHECK_THAT(errors[0].message,
             Catch::StartsWith("cannot write " + (out.path / "lbscrypt@a.service").string()));
  // b is whole; a has no link pointing at the unit that is not there.
  CHECK(fs::is_regular_file(out.path / "lbscrypt@b.service"));
  CHECK(fs::is_symlink(out.path / "cryptsetup.target.requires" / "lbscrypt@b.service"));
  CHECK(fs::is_symlink(out.path / "dev-mapper-b.device.requires" / "lbscrypt@b.service"));
  CHECK(fs::is_regular_file(out.path / "system-lbscrypt.slice"));
  CHECK_FALSE(fs::is_symlink(out.path / "cryptsetup.target.requires" / "lbscrypt@a.service"));
  CHECK_FALSE(fs::is_symlink(out.path / "dev-mapper-a.device.requires" / "lbscrypt@a.service"));
}

TEST_CASE("generator: key dependencies as systemd-cryptsetup-generator writes them", "[units]") {
  const auto unit_of = [](const std::string &key) {
    const auto units =
        lbscrypt::generate_units({entry(1, "v", "/dev/vdb", "/dev/vdb", key, "")}, kSettings);
    REQUIRE(units.errors.empty());
    return units.files.front().text;
  };
  CHECK_THAT(unit_of("/dev/disk/by-label/KEYS"),
             Catch::Contains("\nAfter=dev-disk-by\\x2dlabel-KEYS.device\n"
                             "Requires=dev-disk-by\\x2dlabel-KEYS.device\n"));
  for (const char *random : {"/dev/urandom", "/dev/random", "/dev/hw_random", "/dev/hwrng"}) {
    INFO(random);
    const std::string unit = unit_of(random);
    CHECK_THAT(unit, Catch::Contains("\nAfter=systemd-random-seed.service\n") &&
                         !Catch::Contains("Requires=dev-") &&
                         !Catch::Contains("RequiresMountsFor"));
  }
  CHECK_THAT(unit_of("/etc/keys/v.key"), Catch::Contains("\nRequiresMountsFor=/etc/keys/v.key\n"));
  // systemd 252's generator writes nothing for /dev/null: no unit ever announces that device.
  const std::string null = unit_of("/dev/null");
  CHECK_THAT(null, !Catch::Contains("dev-null") && !Catch::Contains("Requires=") &&
                       !Catch::Contains("RequiresMountsFor") && !Catch::Contains("random-seed"));
  const std::string passphrase = unit_of("none");
  CHECK_THAT(passphrase, !Catch::Contains("RequiresMountsFor") && !Catch::Contains("random-seed") &&
                             !Catch::Contains("Requires="));
}

TEST_CASE("generator: KeyringMode=shared and a slice without default dependencies", "[units]") {
  const auto units =
      lbscrypt::generate_units({entry(1, "v", "/dev/vdb", "/dev/vdb", "none", "")}, kSettings);
  REQUIRE(units.files.size() == 3);  // the unit, its device drop-in, the slice
  CHECK_THAT(units.files[0].text, Catch::Contains("\nKeyringMode=shared\n"));
  CHECK(units.files[2].path == "system-lbscrypt.slice");
  CHECK_THAT(units.files[2].text,
             Catch::Contains("\n[Unit]\n") && Catch::Contains("\nDefaultDependencies=no\n"));
  // No volume, no slice.
  CHECK(lbscrypt::generate_units({}, kSettings).files.empty());
}

TEST_CASE("generator: a path no unit setting can hold is refused with its line", "[units]") {
  auto quoted = entry(7, "q", "/dev/vdb", "/dev/vdb", "/etc/keys/it's", "");
  auto blank = entry(8, "b", "/srv/my image", "/srv/my image", "/etc/k", "");
  auto nul =
      entry(9, "n", "/dev/vdb", "/dev/vdb", "/dev/disk/by-label/a" + std::string(1, '\0'), "");
  const auto units = lbscrypt::generate_units({quoted, blank, nul}, kSettings);
  CHECK(units.files.empty());
  REQUIRE(units.errors.size() == 3);
  CHECK_THAT(units.errors[0].message,
             Catch::StartsWith("/etc/lbscrypttab:7: the key path holds a blank, quote") &&
                 Catch::EndsWith("move the key file to a plain path"));
  CHECK_THAT(units.errors[1].message,
             Catch::StartsWith("/etc/lbscrypttab:8: the device path holds a blank"));
  CHECK(units.errors[2].message ==
        "/etc/lbscrypttab:9: a NUL byte cannot be passed in a command's argument: remove it");
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

TEST_CASE("generator: nofail and noauto change the dependencies", "[units]") {
  const auto tab = lbscrypt::parse_lbscrypttab(
      "a /dev/vda /k cipher=aes-xts-plain64,size=256,nofail,noauto,timeout=10,tries=0\n"
      "b /dev/vdb none cipher=aes-xts-plain64,size=256,hash=sha256,timeout=10,tries=3\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.entries.size() == 2);
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  REQUIRE(units.files.size() == 4);  // a's unit; b's unit and its device drop-in; the slice
  CHECK_THAT(units.files[0].text, !Catch::Contains("Before=cryptsetup.target") &&
                                      Catch::Contains("TimeoutSec=infinity"));
  CHECK_THAT(units.files[1].text, Catch::Contains("Before=cryptsetup.target") &&
                                      Catch::Contains("TimeoutSec=infinity\n"));
  REQUIRE(units.links.size() == 3);  // a: the mapper device only; b: the target and the device
  CHECK(units.links[0].path == "dev-mapper-a.device.requires/lbscrypt@a.service");
  CHECK(units.links[1].path == "cryptsetup.target.requires/lbscrypt@b.service");
  CHECK(units.links[1].target == "../lbscrypt@b.service");
}

// Each expected line below is what systemd 252's systemd-cryptsetup-generator wrote for the
// same crypttab line (Debian 12, 252.39; compare_systemd.sh checks it again where it is there).
TEST_CASE("generator: escaped device names, swap and tmp as systemd's generator writes them",
          "[units]") {
  const auto tab = lbscrypt::parse_lbscrypttab(
      "data LABEL=Data(1) /dev/urandom cipher=aes-xts-plain64,size=256,discard,swap\n"
      "t UUID=ab/c /dev/urandom cipher=aes-xts-plain64,size=256,tmp=btrfs,allow-discards\n"
      "u PARTLABEL=a\\x20b /dev/urandom cipher=aes-xts-plain64,size=256,tmp\n"
      "h /dev/disk/by-label/Data\\x281\\x29 /etc/k cipher=aes-xts-plain64,size=256\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.errors.empty());
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  REQUIRE(units.errors.empty());
  const auto unit = [&](const std::string &name) {
    const auto found = std::find_if(units.files.begin(), units.files.end(), [&](const auto &f) {
      return f.path == lbscrypt::volume_unit_name(name);
    });
    REQUIRE(found != units.files.end());
    return found->text;
  };
  CHECK_THAT(unit("data"), Catch::Contains("\nBindsTo=dev-disk-by\\x2dlabel-Data\\x5cx281\\x5cx29"
                                           ".device\nAfter=dev-disk-by\\x2dlabel-Data\\x5cx281"
                                           "\\x5cx29.device\n"));
  CHECK_THAT(
      unit("data"),
      Catch::Contains("\nExecStartPost=/lib/systemd/systemd-makefs swap '/dev/mapper/data'\n"));
  CHECK_THAT(unit("t"), Catch::Contains("\nBindsTo=dev-disk-by\\x2duuid-ab\\x5cx2fc.device\n"));
  CHECK_THAT(
      unit("t"),
      Catch::Contains("\nExecStartPost=/lib/systemd/systemd-makefs 'btrfs' '/dev/mapper/t'\n"));
  CHECK_THAT(unit("u"),
             Catch::Contains("\nBindsTo=dev-disk-by\\x2dpartlabel-a\\x5cx5cx20b.device\n"));
  CHECK_THAT(
      unit("u"),
      Catch::Contains("\nExecStartPost=/lib/systemd/systemd-makefs 'ext4' '/dev/mapper/u'\n"));
  // Written by hand: the same device unit as LABEL=Data(1).
  CHECK_THAT(unit("h"), Catch::Contains("\nBindsTo=dev-disk-by\\x2dlabel-Data\\x5cx281\\x5cx29"
                                        ".device\n"));
  CHECK_THAT(unit("h"), !Catch::Contains("ExecStartPost"));
  // Stopping succeeds when the mapping is gone, as systemd-cryptsetup detach.
  CHECK_THAT(unit("h"), Catch::Contains("\nExecStop=/usr/sbin/lbscrypt detach 'h'\n"));
}

TEST_CASE("generator: lbscrypt= and rd.lbscrypt= on the kernel command line", "[units]") {
  using lbscrypt::kernel_command_line_switch;
  CHECK(kernel_command_line_switch("BOOT_IMAGE=/vmlinuz root=/dev/vda1 quiet\n", false).enabled);
  CHECK_FALSE(kernel_command_line_switch("root=/dev/vda1 lbscrypt=no quiet", false).enabled);
  CHECK_FALSE(kernel_command_line_switch("lbscrypt=0", true).enabled);
  CHECK_FALSE(kernel_command_line_switch("lbscrypt=\"off\"", false).enabled);
  // the last word wins; a bare lbscrypt is yes
  CHECK(kernel_command_line_switch("lbscrypt=no lbscrypt=yes", false).enabled);
  CHECK(kernel_command_line_switch("lbscrypt=no lbscrypt", false).enabled);
  // rd.lbscrypt= counts in the initramfs only
  CHECK(kernel_command_line_switch("rd.lbscrypt=no", false).enabled);
  CHECK_FALSE(kernel_command_line_switch("rd.lbscrypt=no", true).enabled);
  CHECK(kernel_command_line_switch("lbscrypt=no rd.lbscrypt=yes", true).enabled);
  // other words that start alike are not it; a bad value is ignored with a warning
  CHECK(kernel_command_line_switch("lbscrypt.x=no xlbscrypt=no \"a lbscrypt=no\"", false).enabled);
  const auto bad = kernel_command_line_switch("lbscrypt=maybe", false);
  CHECK(bad.enabled);
  REQUIRE(bad.warnings.size() == 1);
  CHECK(bad.warnings.front() ==
        "the kernel command line's lbscrypt=maybe is not yes or no: ignored");
}

TEST_CASE("generator: a sealed key is unsealed by systemd for its unit, golden",
          "[units][sealed]") {
  const fs::path data = fs::path(LBSCRYPT_TEST_DATA) / "generator-sealed";
  const auto tab = lbscrypt::parse_lbscrypttab(read_text(data / "lbscrypttab"), "/etc/lbscrypttab");
  REQUIRE(tab.errors.empty());
  REQUIRE(tab.entries.size() == 4);
  const auto units = lbscrypt::generate_units(tab.entries, kSettings);
  CHECK(units.errors.empty());
  std::map<std::string, std::string> text;
  for (const auto &file : units.files) {
    text[file.path] = file.text;
  }
  // The ID is the file's name without .cred: the name systemd-creds sealed into it.
  const std::string &data_unit = text.at("lbscrypt@data.service");
  CHECK_THAT(data_unit,
             Catch::Contains("\nLoadCredentialEncrypted=data:/etc/lbscrypt/data.cred\n"));
  CHECK_THAT(data_unit, Catch::Contains("\nRequiresMountsFor=/etc/lbscrypt/data.cred\n"));
  CHECK_THAT(data_unit, Catch::Contains("\nExecStart=/usr/sbin/lbscrypt attach 'data' "
                                        "'PARTUUID=6f2c4a1e-01' '/etc/lbscrypt/data.cred' "
                                        "'cipher=aes-xts-plain64,size=512,sector-size=65536,"
                                        "tpm2-device=auto'\n"));
  CHECK_THAT(text.at("lbscrypt@headless.service"),
             Catch::Contains("\nLoadCredentialEncrypted=headless:/etc/lbscrypt/headless.cred\n"));
  // A passphrase that may be asked for: systemd would fail the unit before attach could ask.
  CHECK_THAT(text.at("lbscrypt@pass.service"), !Catch::Contains("LoadCredential"));
  // Opened in the initramfs: attach finds it open and needs no key.
  CHECK_THAT(text.at("lbscrypt@root.service"), !Catch::Contains("LoadCredential"));

  const TempDir out;
  REQUIRE(lbscrypt::write_units(out.path, units).empty());
  // 4 units and the slice, 4 drop-ins, 8 links
  REQUIRE(tree(data / "expected").size() == 17);
  check_tree(data / "expected", out.path);
}

TEST_CASE("generator: a sealed key's path is escaped, a bad one refused", "[units][sealed]") {
  auto e = entry(1, "v", "/dev/vdb", "/dev/vdb", "/etc/lbs%crypt/v.cred", "tpm2-device=auto");
  e.volume.tpm2_device = "auto";
  auto bad = entry(2, "w", "/dev/vdc", "/dev/vdc", "/dev/sdb", "tpm2-device=auto");
  bad.volume.tpm2_device = "auto";
  const auto units = lbscrypt::generate_units({e, bad}, kSettings);
  REQUIRE(units.files.size() == 3);  // v's unit, its drop-in, the slice
  CHECK_THAT(units.files[0].text,
             Catch::Contains("\nLoadCredentialEncrypted=v:/etc/lbs%%crypt/v.cred\n"));
  REQUIRE(units.errors.size() == 1);
  CHECK(units.errors[0].message ==
        "/etc/lbscrypttab:2: w: tpm2-device= unseals the credential file the key field names, "
        "and '/dev/sdb' is a device: give the file lbscrypt seal wrote (/etc/lbscrypt/w.cred)");
}
