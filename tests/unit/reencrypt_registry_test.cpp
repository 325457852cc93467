// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "fake_sysfs.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "temp_dir.hpp"

using lbscrypt::DeviceIdentity;
using lbscrypt::DevNumber;
using lbscrypt::Errc;
using lbscrypt::RegistryEntry;

namespace {

const std::string kRunA = "0123456789abcdef0123456789abcdef";
const std::string kRunB = "fedcba9876543210fedcba9876543210";

RegistryEntry sdb_entry() {
  RegistryEntry entry;
  entry.device = "/dev/sdb";
  entry.device_id = "wwid-naa.5000c500a1b2c3d4";
  entry.state = "/var/lib/lbscrypt/sdb.state";
  entry.run_id = kRunA;
  return entry;
}

std::string read_text(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::filesystem::path &file, const std::string &text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

unsigned mode_of(const std::filesystem::path &path) {
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777U;
}

// Sets the umask for a scope: add_entry's modes must not depend on it.
struct Umask {
  mode_t saved;
  explicit Umask(mode_t mask) : saved(umask(mask)) {}
  Umask(const Umask &) = delete;
  Umask &operator=(const Umask &) = delete;
  Umask(Umask &&) = delete;
  Umask &operator=(Umask &&) = delete;
  ~Umask() { umask(saved); }
};

}  // namespace

TEST_CASE("registry: FNV-1a 64 gives the published test vectors", "[reencrypt][registry]") {
  // From the FNV reference (Fowler/Noll/Vo, test suite of fnv-5.0.x).
  CHECK(lbscrypt::fnv1a_64("") == 0xcbf29ce484222325ULL);
  CHECK(lbscrypt::fnv1a_64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(lbscrypt::fnv1a_64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("registry: an id's file name escapes what is not [A-Za-z0-9_.-]",
          "[reencrypt][registry]") {
  using lbscrypt::entry_file_name;
  CHECK(entry_file_name("wwid-naa.5000c500a1b2c3d4") == "wwid-naa.5000c500a1b2c3d4.json");
  CHECK(entry_file_name("dm-uuid-CRYPT-PLAIN-vol") == "dm-uuid-CRYPT-PLAIN-vol.json");
  CHECK(entry_file_name("devt-8:16") == "devt-8\\x3a16.json");
  CHECK(entry_file_name("path-/srv/img") == "path-\\x2fsrv\\x2fimg.json");
  CHECK(entry_file_name("wwid-t10.ATA  Q\\xff") == "wwid-t10.ATA\\x20\\x20Q\\x5cxff.json");
  CHECK(entry_file_name(".hidden.") == "\\x2ehidden..json");  // never a dot file
  CHECK(entry_file_name("..") == "\\x2e..json");
}

TEST_CASE("registry: a long id's file name is cut at 233 bytes and ends in its hash",
          "[reencrypt][registry]") {
  using lbscrypt::entry_file_name;
  // 245 + 5 = 250 bytes: kept whole
  CHECK(entry_file_name(std::string(245, 'a')) == std::string(245, 'a') + ".json");
  CHECK(entry_file_name(std::string(250, 'a')) == std::string(250, 'a') + ".json");
  // 251 + 5 > 255: cut; hashes from an independent model (Python, FNV-1a 64)
  const std::string long_name = entry_file_name(std::string(300, 'a'));
  CHECK(long_name == std::string(233, 'a') + "~ee7717eba7a17e21.json");
  CHECK(long_name.size() == 255);
  // an escape is never cut: 232 bytes, then \x3a would end at 236
  const std::string key = std::string(232, 'a') + ":" + std::string(40, 'b');
  CHECK(entry_file_name(key) == std::string(232, 'a') + "~0812374582c92ed5.json");
}

TEST_CASE("registry: stable ids from sysfs", "[reencrypt][registry]") {
  const lbscrypt::test::FakeSysfs sys;
  using lbscrypt::stable_device_id;
  CHECK(stable_device_id(sys.root, DevNumber{8, 16}) == "wwid-naa.5000c500a1b2c3d4");
  CHECK(stable_device_id(sys.root, DevNumber{8, 17}) == "wwid-naa.5000c500a1b2c3d4-part1");
  CHECK(stable_device_id(sys.root, DevNumber{8, 18}) == "wwid-naa.5000c500a1b2c3d4-part2");
  CHECK(stable_device_id(sys.root, DevNumber{253, 0}) == "dm-uuid-CRYPT-PLAIN-vol");
  CHECK(stable_device_id(sys.root, DevNumber{253, 1}) == "dm-name-plain");
  CHECK(stable_device_id(sys.root, DevNumber{259, 0}) == "wwid-eui.0025388b91b1c5e3");
  CHECK(stable_device_id(sys.root, DevNumber{259, 2}) == "wwid-eui.0025388b91b1c5e3-part2");
  // trimmed; inner blanks kept; 0xff and the backslash written as \xNN
  CHECK(stable_device_id(sys.root, DevNumber{8, 32}) ==
        "wwid-t10.ATA     QEMU HARDDISK\\xff\\x5c1");
  CHECK_FALSE(stable_device_id(sys.root, DevNumber{7, 0}).has_value());
  CHECK_FALSE(stable_device_id(sys.root, DevNumber{8, 48}).has_value());  // not in sysfs
  CHECK_FALSE(stable_device_id("/nonexistent-sysfs", DevNumber{8, 16}).has_value());
}

TEST_CASE("registry: a device found again by its stable id", "[reencrypt][registry]") {
  const lbscrypt::test::FakeSysfs sys;
  using lbscrypt::find_device_by_stable_id;
  CHECK(find_device_by_stable_id(sys.root, "wwid-naa.5000c500a1b2c3d4") == "/dev/sdb");
  CHECK(find_device_by_stable_id(sys.root, "wwid-naa.5000c500a1b2c3d4-part2") == "/dev/sdb2");
  CHECK(find_device_by_stable_id(sys.root, "dm-uuid-CRYPT-PLAIN-vol") == "/dev/dm-0");
  CHECK(find_device_by_stable_id(sys.root, "dm-name-plain") == "/dev/dm-1");
  CHECK(find_device_by_stable_id(sys.root, "wwid-eui.0025388b91b1c5e3-part2") == "/dev/nvme0n1p2");
  // no device has it; keys that are no stable id are never looked for
  CHECK_FALSE(find_device_by_stable_id(sys.root, "wwid-naa.0000000000000000").has_value());
  CHECK_FALSE(find_device_by_stable_id(sys.root, "devt-7:0").has_value());
  CHECK_FALSE(find_device_by_stable_id(sys.root, "path-/srv/disk.img").has_value());
  CHECK_FALSE(find_device_by_stable_id("/nonexistent-sysfs", "dm-name-plain").has_value());
  // two devices with one id (a multipath disk's paths): neither is taken
  const auto sdd = sys.device("pci0/host2/block/sdd", "8:48");
  lbscrypt::test::FakeSysfs::write(sdd / "device" / "wwid", "naa.5000c500a1b2c3d4\n");
  CHECK_FALSE(find_device_by_stable_id(sys.root, "wwid-naa.5000c500a1b2c3d4").has_value());
  // a kernel name with "!" is a path under /dev
  const auto cciss = sys.device("pci2/cciss!c0d0", "104:0");
  lbscrypt::test::FakeSysfs::write(cciss / "device" / "wwid", "naa.600508b1001c\n");
  CHECK(find_device_by_stable_id(sys.root, "wwid-naa.600508b1001c") == "/dev/cciss/c0d0");
}

TEST_CASE("registry: keys, and which survive a reboot", "[reencrypt][registry]") {
  DeviceIdentity disk{"/dev/sdb", DevNumber{8, 16}, "wwid-x"};
  CHECK(lbscrypt::registry_key(disk) == "wwid-x");
  disk.stable_id.reset();
  CHECK(lbscrypt::registry_key(disk) == "devt-8:16");
  CHECK_FALSE(lbscrypt::registry_key_survives_reboot("devt-8:16"));
  CHECK(lbscrypt::registry_key_survives_reboot("wwid-x"));
  const DeviceIdentity file{"/srv/volume.img", std::nullopt, std::nullopt};
  CHECK(lbscrypt::registry_key(file) == "path-/srv/volume.img");
}

TEST_CASE("registry: identify_device resolves links, a missing path is only its path",
          "[reencrypt][registry]") {
  const lbscrypt::test::TempDir dir;
  const auto file = dir.path / "volume.img";
  write_text(file, "x");
  const auto canonical = std::filesystem::canonical(file).string();
  std::filesystem::create_symlink(file, dir.path / "link");
  const auto by_link = lbscrypt::identify_device((dir.path / "link").string());
  CHECK(by_link.canonical == canonical);
  CHECK_FALSE(by_link.number.has_value());
  CHECK_FALSE(by_link.stable_id.has_value());
  const auto missing = lbscrypt::identify_device("/nonexistent-lbscrypt/a/../vdz");
  CHECK(missing.canonical == "/nonexistent-lbscrypt/vdz");
  CHECK_FALSE(missing.number.has_value());
}

TEST_CASE("registry: an entry's JSON, exactly", "[reencrypt][registry]") {
  const auto text = lbscrypt::entry_to_json(sdb_entry());
  REQUIRE(text.ok());
  CHECK(*text ==
        "{\"device\":\"/dev/sdb\",\"device_id\":\"wwid-naa.5000c500a1b2c3d4\",\"format\":1,"
        "\"run_id\":\"0123456789abcdef0123456789abcdef\","
        "\"state\":\"/var/lib/lbscrypt/sdb.state\"}\n");
  const auto back = lbscrypt::entry_from_json(*text, "/r/x.json");
  REQUIRE(back.ok());
  CHECK(*back == sdb_entry());
  RegistryEntry bad = sdb_entry();
  bad.state = "/var/lib/\xff.state";
  const auto not_utf8 = lbscrypt::entry_to_json(bad);
  REQUIRE_FALSE(not_utf8.ok());
  CHECK_THAT(not_utf8.error().message, Catch::Contains("not UTF-8"));
  bad = sdb_entry();
  bad.run_id = "0123";
  CHECK_FALSE(lbscrypt::entry_to_json(bad).ok());
}

TEST_CASE("registry: parsing is strict, and every error names the file", "[reencrypt][registry]") {
  const std::string good_fields =
      R"("device":"/dev/sdb","device_id":"wwid-x","run_id":"0123456789abcdef0123456789abcdef",)"
      R"("state":"/s")";
  const auto refusal = [](const std::string &text) {
    const auto parsed = lbscrypt::entry_from_json(text, "/r/e.json");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == Errc::invalid_argument);
    return parsed.error().message;
  };
  REQUIRE(lbscrypt::entry_from_json("{" + good_fields + R"(,"format":1})", "/r/e.json").ok());
  CHECK_THAT(refusal("{" + good_fields + "}"), Catch::Equals("/r/e.json: \"format\" is missing"));
  CHECK_THAT(refusal("{" + good_fields + R"(,"format":1,"extra":0})"),
             Catch::Equals("/r/e.json: unknown key \"extra\""));
  CHECK_THAT(refusal("{" + good_fields + R"(,"format":1,"state":"/t"})"),
             Catch::Equals("/r/e.json: \"state\" is given twice"));
  CHECK_THAT(refusal("{" + good_fields + R"(,"format":"1"})"),
             Catch::Equals("/r/e.json: \"format\" is not a whole number"));
  CHECK_THAT(refusal("{" + good_fields + R"(,"format":1.0})"),
             Catch::Equals("/r/e.json: \"format\" is not a whole number"));
  CHECK_THAT(refusal("{" + good_fields + R"(,"format":2})"),
             Catch::StartsWith("/r/e.json: format 2 is not one this lbscrypt knows (1)"));
  CHECK_THAT(refusal(R"({"device":"/dev/sdb","device_id":"wwid-x","format":1,)"
                     R"("run_id":"0123456789abcdef0123456789abcdef","state":"s"})"),
             Catch::Equals("/r/e.json: \"state\" is not an absolute path"));
  CHECK_THAT(refusal(R"({"device":"/dev/sdb","device_id":"wwid-x","format":1,)"
                     R"("run_id":"0123456789ABCDEF0123456789abcdef","state":"/s"})"),
             Catch::Equals("/r/e.json: \"run_id\" is not 32 lower-case hex digits"));
  CHECK_THAT(refusal(R"({"device":7,"device_id":"wwid-x","format":1,)"
                     R"("run_id":"0123456789abcdef0123456789abcdef","state":"/s"})"),
             Catch::Equals("/r/e.json: \"device\" is not a string"));
  CHECK_THAT(refusal("[]"), Catch::Equals("/r/e.json: not a JSON object"));
  CHECK_THAT(refusal(""), Catch::StartsWith("/r/e.json: not JSON ("));
  CHECK_THAT(refusal("{" + good_fields), Catch::StartsWith("/r/e.json: not JSON ("));
}

TEST_CASE("registry: add, list, find, remove", "[reencrypt][registry]") {
  const lbscrypt::test::TempDir dir;
  const auto registry = dir.path / "etc" / "lbscrypt" / "reencrypt";
  // no directory: no runs
  REQUIRE(lbscrypt::list_entries(registry).ok());
  CHECK(lbscrypt::list_entries(registry)->empty());
  {
    const Umask strict(077);
    REQUIRE(lbscrypt::add_entry(registry, sdb_entry()).ok());
  }
  CHECK(mode_of(registry) == 0755U);
  CHECK(mode_of(registry.parent_path()) == 0755U);
  const auto file = registry / "wwid-naa.5000c500a1b2c3d4.json";
  CHECK(mode_of(file) == 0644U);
  CHECK(read_text(file) == *lbscrypt::entry_to_json(sdb_entry()));
  // no temporary is left behind
  CHECK(std::distance(std::filesystem::directory_iterator(registry),
                      std::filesystem::directory_iterator()) == 1);

  // a second run on the same device: refused, naming the first one's state file
  RegistryEntry again = sdb_entry();
  again.run_id = kRunB;
  again.state = "/srv/other.state";
  const auto twice = lbscrypt::add_entry(registry, again);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().code == Errc::exists);
  CHECK(twice.error().message ==
        "/dev/sdb is already being reencrypted (state /var/lib/lbscrypt/sdb.state, registry "
        "entry " +
            file.string() +
            "): finish that run with 'lbscrypt reencrypt --resume --state "
            "/var/lib/lbscrypt/sdb.state ...' first");

  RegistryEntry loop;
  loop.device = "/dev/loop0";
  loop.device_id = "devt-7:0";
  loop.state = "/srv/loop0.state";
  loop.run_id = kRunB;
  REQUIRE(lbscrypt::add_entry(registry, loop).ok());
  const auto listed = lbscrypt::list_entries(registry);
  REQUIRE(listed.ok());
  CHECK(*listed == std::vector<RegistryEntry>{loop, sdb_entry()});  // by file name

  SECTION("matching") {
    using lbscrypt::find_entry;
    // the same disk under another name: its id finds it
    const auto renamed = find_entry(
        registry, DeviceIdentity{"/dev/sdc", DevNumber{8, 32}, "wwid-naa.5000c500a1b2c3d4"});
    REQUIRE(renamed.ok());
    CHECK(*renamed == sdb_entry());
    // another disk now called sdb: the ids decide, no match
    const auto other_disk =
        find_entry(registry, DeviceIdentity{"/dev/sdb", DevNumber{8, 16}, "wwid-naa.other"});
    REQUIRE(other_disk.ok());
    CHECK_FALSE(other_disk->has_value());
    // the device has no stable id here: the path is enough
    const auto by_path =
        find_entry(registry, DeviceIdentity{"/dev/sdb", std::nullopt, std::nullopt});
    REQUIRE(by_path.ok());
    CHECK(*by_path == sdb_entry());
    // a devt key: by number whatever the path, or by path
    CHECK(*find_entry(registry,
                      DeviceIdentity{"/dev/loop-renamed", DevNumber{7, 0}, std::nullopt}) == loop);
    CHECK(*find_entry(registry, DeviceIdentity{"/dev/loop0", DevNumber{7, 9}, std::nullopt}) ==
          loop);
    CHECK_FALSE(find_entry(registry, DeviceIdentity{"/dev/loop1", DevNumber{7, 1}, std::nullopt})
                    ->has_value());
    // a path that is nothing here: by its canonical path
    REQUIRE(lbscrypt::add_entry(
                registry, RegistryEntry{1, "/nonexistent-lbscrypt/vdz",
                                        "path-/nonexistent-lbscrypt/vdz", "/srv/vdz.state", kRunA})
                .ok());
    const auto by_string = find_entry(registry, std::string("/nonexistent-lbscrypt/x/../vdz"));
    REQUIRE(by_string.ok());
    REQUIRE(by_string->has_value());
    CHECK((*by_string)->state == "/srv/vdz.state");
  }

  SECTION("removing") {
    RegistryEntry stranger = sdb_entry();
    stranger.run_id = kRunB;
    const auto refused = lbscrypt::remove_entry(registry, stranger);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::refused);
    CHECK_THAT(refused.error().message, Catch::Contains("is another run's (run " + kRunA));
    CHECK(std::filesystem::exists(file));
    REQUIRE(lbscrypt::remove_entry(registry, sdb_entry()).ok());
    CHECK_FALSE(std::filesystem::exists(file));
    CHECK(lbscrypt::remove_entry(registry, sdb_entry()).ok());  // nothing left: success
    CHECK(*lbscrypt::list_entries(registry) == std::vector<RegistryEntry>{loop});
  }
}

TEST_CASE("registry: a damaged entry is never skipped: every lookup fails, naming it",
          "[reencrypt][registry]") {
  const lbscrypt::test::TempDir dir;
  const auto registry = dir.path / "reencrypt";
  REQUIRE(lbscrypt::add_entry(registry, sdb_entry()).ok());
  // add_entry's temporaries (dot files) are not entries
  write_text(registry / ".add-Xq1zZ9", "{\"device\":");
  REQUIRE(lbscrypt::list_entries(registry).ok());
  const DeviceIdentity elsewhere{"/dev/vdz", DevNumber{254, 0}, std::nullopt};

  SECTION("not JSON") {
    write_text(registry / "wwid-torn.json", R"({"device":"/dev/sd)");
    const auto found = lbscrypt::find_entry(registry, elsewhere);
    REQUIRE_FALSE(found.ok());
    CHECK_THAT(found.error().message,
               Catch::StartsWith((registry / "wwid-torn.json").string() + ": not JSON (") &&
                   Catch::EndsWith("every open and attach is refused while it is there, as it "
                                   "may be the entry of the device asked for; finish the run "
                                   "it names, or remove the file if no reencrypt is in "
                                   "progress"));
  }
  SECTION("an entry filed under another name") {
    std::filesystem::copy_file(registry / "wwid-naa.5000c500a1b2c3d4.json",
                               registry / "wwid-copy.json");
    const auto found = lbscrypt::find_entry(registry, elsewhere);
    REQUIRE_FALSE(found.ok());
    CHECK_THAT(found.error().message,
               Catch::StartsWith((registry / "wwid-copy.json").string() +
                                 ": the entry of \"wwid-naa.5000c500a1b2c3d4\" is filed as "
                                 "wwid-copy.json, not wwid-naa.5000c500a1b2c3d4.json: it was "
                                 "renamed or copied"));
  }
  SECTION("a directory") {
    std::filesystem::create_directory(registry / "sub");
    const auto found = lbscrypt::find_entry(registry, elsewhere);
    REQUIRE_FALSE(found.ok());
    CHECK_THAT(found.error().message,
               Catch::StartsWith((registry / "sub").string() + ": not a regular file"));
  }
  SECTION("the registry is a file") {
    const auto found = lbscrypt::find_entry(registry / "wwid-naa.5000c500a1b2c3d4.json", elsewhere);
    REQUIRE_FALSE(found.ok());
    CHECK_THAT(found.error().message, Catch::StartsWith("cannot read the reencrypt registry "));
  }
}

TEST_CASE("registry: the refusal open and attach give", "[reencrypt][registry]") {
  const auto error = lbscrypt::reencrypt_in_progress("/dev/sdb", sdb_entry());
  CHECK(error.code == Errc::refused);
  CHECK(error.message ==
        "/dev/sdb is being reencrypted (state /var/lib/lbscrypt/sdb.state): finish with "
        "'lbscrypt reencrypt --resume --state /var/lib/lbscrypt/sdb.state ...' before opening "
        "it");
}
