// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt state file: PBKDF2 and the key verifiers, the strict JSON, the atomic write,
// the refusals of paths that are not regular files, removal with the journal, and the lock.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <csignal>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lbscrypt/reencrypt/core.hpp"
#include "temp_dir.hpp"

using lbscrypt::Errc;
using lbscrypt::KeyVerifier;
using lbscrypt::ReencryptState;
using lbscrypt::SecretBuffer;
using lbscrypt::StateLock;
using lbscrypt::test::TempDir;

namespace {

std::vector<std::uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

std::string to_hex(const std::vector<std::uint8_t> &bytes) {
  std::string out;
  for (const auto b : bytes) {
    constexpr std::string_view kDigits = "0123456789abcdef";
    out += kDigits[b >> 4U];
    out += kDigits[b & 0xfU];
  }
  return out;
}

SecretBuffer secret(std::string_view text) { return {text.data(), text.size()}; }

std::vector<std::uint8_t> counting(std::uint8_t first, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::uint8_t>(first + i);
  }
  return out;
}

ReencryptState sample_state() {
  ReencryptState s;
  s.run_id = "0123456789abcdef0123456789abcdef";
  s.device = "/dev/vdb";
  s.device_id = "wwn-0x5000c500a1b2c3d4";
  s.offset = 2048;
  s.skip = 4096;
  s.data_bytes = 64ULL * 1048576;
  s.hotzone_bytes = 1048576;
  s.old_side.cipher = "aes-xts-plain64";
  s.old_side.key_bytes = 64;
  s.old_side.sector_size = 4096;
  s.new_side.cipher = "aes-cbc-essiv:sha256";
  s.new_side.key_bytes = 32;
  s.new_side.sector_size = 65536;
  s.new_side.iv_large_sectors = true;
  s.old_verifier.salt = std::vector<std::uint8_t>(32, 0x11);
  s.old_verifier.iterations = 200000;
  s.old_verifier.digest = std::vector<std::uint8_t>(32, 0x22);
  s.new_verifier.salt = counting(0x00, 32);
  s.new_verifier.iterations = 1000;
  s.new_verifier.digest = counting(0xe0, 32);
  s.started = "2026-12-04T22:50:25Z";
  s.first_unit_mac = counting(0x40, 32);
  s.started_online = true;
  s.mac = counting(0x80, 32);
  return s;
}

// The sample as the file holds it, written by hand from the format's description.
const char *const kSampleJson = R"({
  "format": 3,
  "run_id": "0123456789abcdef0123456789abcdef",
  "device": "/dev/vdb",
  "device_id": "wwn-0x5000c500a1b2c3d4",
  "offset": 2048,
  "skip": 4096,
  "data_bytes": 67108864,
  "hotzone_bytes": 1048576,
  "old_side": {
    "cipher": "aes-xts-plain64",
    "key_bytes": 64,
    "sector_size": 4096,
    "iv_large_sectors": false
  },
  "new_side": {
    "cipher": "aes-cbc-essiv:sha256",
    "key_bytes": 32,
    "sector_size": 65536,
    "iv_large_sectors": true
  },
  "old_verifier": {
    "salt": "1111111111111111111111111111111111111111111111111111111111111111",
    "iterations": 200000,
    "digest": "2222222222222222222222222222222222222222222222222222222222222222"
  },
  "new_verifier": {
    "salt": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
    "iterations": 1000,
    "digest": "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
  },
  "started": "2026-12-04T22:50:25Z",
  "first_unit_mac": "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
  "started_online": true,
  "switch_mac": "",
  "mac": "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
}
)";

constexpr const char *kOrigin = "/srv/state.json";

// The refusal of the sample with one change made to its JSON.
std::string refusal(const std::function<void(nlohmann::ordered_json &)> &change) {
  auto doc = nlohmann::ordered_json::parse(kSampleJson);
  change(doc);
  const auto parsed = lbscrypt::state_from_json(doc.dump(2), kOrigin);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == Errc::invalid_argument);
  CHECK_THAT(parsed.error().message, Catch::StartsWith(std::string(kOrigin) + ": "));
  return parsed.error().message;
}

std::string refusal_of_text(const std::string &text) {
  const auto parsed = lbscrypt::state_from_json(text, kOrigin);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == Errc::invalid_argument);
  CHECK_THAT(parsed.error().message, Catch::StartsWith(kOrigin));
  return parsed.error().message;
}

std::string sector_refusal(unsigned size) {
  return "field \"new_side.sector_size\" is " + std::to_string(size) +
         ", not a power of two from 512 to 65536";
}

std::set<std::string> names_in(const std::filesystem::path &dir) {
  std::set<std::string> out;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    out.insert(entry.path().filename().string());
  }
  return out;
}

std::string file_text(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("reencrypt state: PBKDF2-HMAC-SHA256 gives RFC 7914's vectors", "[reencrypt]") {
  // RFC 7914 section 11, the two PBKDF2-HMAC-SHA256 test vectors.
  const auto short_one = lbscrypt::pbkdf2_sha256(bytes_of("passwd"), bytes_of("salt"), 1, 64);
  REQUIRE(short_one.ok());
  CHECK(to_hex(*short_one) ==
        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        "49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783");
  const auto long_one = lbscrypt::pbkdf2_sha256(bytes_of("Password"), bytes_of("NaCl"), 80000, 64);
  REQUIRE(long_one.ok());
  CHECK(to_hex(*long_one) ==
        "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56"
        "a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d");
}

TEST_CASE("reencrypt state: PBKDF2 refuses 0 iterations and 0 bytes", "[reencrypt]") {
  const auto none = lbscrypt::pbkdf2_sha256(bytes_of("k"), bytes_of("s"), 0, 32);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == Errc::invalid_argument);
  const auto empty = lbscrypt::pbkdf2_sha256(bytes_of("k"), bytes_of("s"), 1, 0);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == Errc::invalid_argument);
}

TEST_CASE("reencrypt state: a verifier accepts its key and refuses another", "[reencrypt]") {
  const SecretBuffer key = secret("0123456789abcdef0123456789abcdef");
  const auto verifier = lbscrypt::make_verifier(key, 1000);
  REQUIRE(verifier.ok());
  CHECK(verifier->salt.size() == 32);
  CHECK(verifier->digest.size() == 32);
  CHECK(verifier->iterations == 1000);
  // The digest is PBKDF2-HMAC-SHA256 of the key with its salt (the function RFC 7914 checks).
  const auto expected = lbscrypt::pbkdf2_sha256(key.bytes(), verifier->salt, 1000, 32);
  REQUIRE(expected.ok());
  CHECK(verifier->digest == *expected);
  CHECK(lbscrypt::check_verifier(*verifier, key, "old").ok());

  // A fresh salt each time: the same key gives another verifier.
  const auto again = lbscrypt::make_verifier(key, 1000);
  REQUIRE(again.ok());
  CHECK(again->salt != verifier->salt);
  CHECK(again->digest != verifier->digest);

  // One byte off.
  const SecretBuffer wrong = secret("0123456789abcdef0123456789abcdeF");
  const auto old_refused = lbscrypt::check_verifier(*verifier, wrong, "old");
  REQUIRE_FALSE(old_refused.ok());
  CHECK(old_refused.error().code == Errc::key);
  CHECK(old_refused.error().message ==
        "the old key is not the one this run started with: give the key the volume was opened "
        "with");
  const auto new_refused = lbscrypt::check_verifier(*verifier, wrong, "new");
  REQUIRE_FALSE(new_refused.ok());
  CHECK(new_refused.error().code == Errc::key);
  CHECK_THAT(new_refused.error().message,
             Catch::StartsWith("the new key is not the one this run started with"));

  // A damaged verifier is not a wrong key.
  KeyVerifier damaged = *verifier;
  damaged.salt.pop_back();
  const auto bad = lbscrypt::check_verifier(damaged, key, "old");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == Errc::invalid_argument);
}

TEST_CASE("reencrypt state: a verifier uses the default iteration count", "[reencrypt]") {
  const SecretBuffer key = secret("a key");
  const auto verifier = lbscrypt::make_verifier(key);
  REQUIRE(verifier.ok());
  CHECK(verifier->iterations == lbscrypt::kVerifierIterations);
  CHECK(lbscrypt::check_verifier(*verifier, key, "new").ok());
}

TEST_CASE("reencrypt state: JSON as the format says, and back", "[reencrypt]") {
  const ReencryptState state = sample_state();
  CHECK(lbscrypt::state_to_json(state) == kSampleJson);
  const auto parsed = lbscrypt::state_from_json(kSampleJson, kOrigin);
  REQUIRE(parsed.ok());
  CHECK(*parsed == state);
  // Compact JSON with the keys in another order is the same state.
  const auto sorted = nlohmann::json::parse(kSampleJson).dump();
  const auto reparsed = lbscrypt::state_from_json(sorted, kOrigin);
  REQUIRE(reparsed.ok());
  CHECK(*reparsed == state);
}

TEST_CASE("reencrypt state: the device's identity is kept, a state without one reads",
          "[reencrypt]") {
  ReencryptState state = sample_state();
  lbscrypt::DeviceFingerprint disk;
  disk.size_bytes = 1073741824;
  disk.serial = "virtio:VDB-0002";
  lbscrypt::DeviceFingerprint part;
  part.size_bytes = 67108864 + 2048 * 512;
  part.partition = 1;
  part.partition_start = 2048;
  part.under.push_back(disk);
  state.device_identity = part;
  const std::string text = lbscrypt::state_to_json(state);
  // Written by hand from the format's description: after "device_id", absent fields left out.
  CHECK_THAT(text, Catch::Contains(R"("device_id": "wwn-0x5000c500a1b2c3d4",
  "device_identity": {
    "size_bytes": 68157440,
    "partition": 1,
    "partition_start": 2048,
    "under": [
      {
        "size_bytes": 1073741824,
        "serial": "virtio:VDB-0002"
      }
    ]
  },
  "offset": 2048,)"));
  const auto parsed = lbscrypt::state_from_json(text, kOrigin);
  REQUIRE(parsed.ok());
  CHECK(*parsed == state);
  // The sample, as an older lbscrypt wrote it, has none.
  const auto old = lbscrypt::state_from_json(kSampleJson, kOrigin);
  REQUIRE(old.ok());
  CHECK_FALSE(old->device_identity.has_value());
  using J = nlohmann::ordered_json;
  CHECK_THAT(refusal([](J &d) { d["device_identity"] = J::object(); }),
             Catch::Contains("field \"device_identity.size_bytes\" is missing"));
  CHECK_THAT(refusal([](J &d) {
               d["device_identity"] = {{"size_bytes", 1}, {"wwid", "x"}};
             }),
             Catch::Contains("field \"device_identity.wwid\" is not a field lbscrypt knows"));
}

TEST_CASE("reencrypt state: JSON refusals name the field and the file", "[reencrypt]") {
  using J = nlohmann::ordered_json;
  CHECK_THAT(refusal([](J &d) { d["extra"] = 1; }), Catch::Contains("unknown field \"extra\""));
  CHECK_THAT(refusal([](J &d) { d["old_side"]["mode"] = "x"; }),
             Catch::Contains("unknown field \"old_side.mode\""));
  CHECK_THAT(refusal([](J &d) { d.erase("skip"); }), Catch::Contains("field \"skip\" is missing"));
  CHECK_THAT(refusal([](J &d) { d["new_verifier"].erase("digest"); }),
             Catch::Contains("field \"new_verifier.digest\" is missing"));
  CHECK_THAT(refusal([](J &d) { d["format"] = 4; }),
             Catch::Contains("format 4 is not the one this lbscrypt reads (3): finish or abort "
                             "the run with the lbscrypt that started it"));
  // A run the previous lbscrypt started (no MAC): refused, saying why and what to do.
  CHECK(refusal([](J &d) {
          d["format"] = 1;
          d.erase("mac");
          d.erase("first_unit_mac");
          d.erase("started_online");
        }) == std::string(kOrigin) +
                  ": format 1 is not the one this lbscrypt reads (3): an earlier lbscrypt wrote "
                  "it, without the MACs this one checks: finish or abort the run with the "
                  "lbscrypt that started it");
  // A run of the format before, without the final switch's MAC: refused the same way.
  CHECK_THAT(refusal([](J &d) {
               d["format"] = 2;
               d.erase("switch_mac");
             }),
             Catch::Contains(": format 2 is not the one this lbscrypt reads (3): an earlier "
                             "lbscrypt wrote it, without the MACs this one checks"));
  CHECK_THAT(refusal([](J &d) { d.erase("switch_mac"); }),
             Catch::Contains("field \"switch_mac\" is missing"));
  CHECK_THAT(refusal([](J &d) { d["switch_mac"] = "0a"; }),
             Catch::Contains("field \"switch_mac\" is not 64 lower-case hex characters"));
  CHECK_THAT(refusal([](J &d) { d.erase("mac"); }), Catch::Contains("field \"mac\" is missing"));
  CHECK_THAT(refusal([](J &d) { d["mac"] = "00"; }),
             Catch::Contains("field \"mac\" is not 64 lower-case hex characters"));
  CHECK_THAT(refusal([](J &d) { d["started_online"] = 1; }),
             Catch::Contains("field \"started_online\" is not true or false"));
  CHECK_THAT(refusal([](J &d) { d["format"] = "1"; }),
             Catch::Contains("field \"format\" is not a whole number"));
  CHECK_THAT(refusal([](J &d) { d["offset"] = -1; }),
             Catch::Contains("field \"offset\" is not a whole number"));
  CHECK_THAT(refusal([](J &d) { d["offset"] = 1.5; }),
             Catch::Contains("field \"offset\" is not a whole number"));
  CHECK_THAT(refusal([](J &d) { d["old_side"]["key_bytes"] = 4294967296ULL; }),
             Catch::Contains("field \"old_side.key_bytes\" is not a whole number from 0 to "
                             "4294967295"));
  CHECK_THAT(refusal([](J &d) { d["old_side"] = "aes"; }),
             Catch::Contains("field \"old_side\" is not a JSON object"));
  CHECK_THAT(refusal([](J &d) { d["new_side"]["iv_large_sectors"] = "yes"; }),
             Catch::Contains("field \"new_side.iv_large_sectors\" is not true or false"));
  CHECK_THAT(refusal([](J &d) { d["device"] = 7; }),
             Catch::Contains("field \"device\" is not a string"));
  CHECK_THAT(refusal([](J &d) { d["device"] = ""; }), Catch::Contains("field \"device\" is empty"));
  CHECK_THAT(refusal([](J &d) { d["new_side"]["cipher"] = ""; }),
             Catch::Contains("field \"new_side.cipher\" is empty"));
  // Hex: upper case, not hex, too short, too long.
  const std::string salt = "field \"old_verifier.salt\" is not 64 lower-case hex characters";
  CHECK_THAT(refusal([](J &d) { d["old_verifier"]["salt"] = std::string(64, 'A'); }),
             Catch::Contains(salt));
  CHECK_THAT(refusal([](J &d) { d["old_verifier"]["salt"] = std::string(64, 'g'); }),
             Catch::Contains(salt));
  CHECK_THAT(refusal([](J &d) { d["old_verifier"]["salt"] = std::string(62, '1'); }),
             Catch::Contains(salt));
  CHECK_THAT(refusal([](J &d) { d["old_verifier"]["salt"] = std::string(66, '1'); }),
             Catch::Contains(salt));
  CHECK_THAT(refusal([](J &d) { d["new_verifier"]["digest"] = "zz"; }),
             Catch::Contains("field \"new_verifier.digest\" is not 64 lower-case hex"));
  CHECK_THAT(refusal([](J &d) { d["run_id"] = "0123456789ABCDEF0123456789abcdef"; }),
             Catch::Contains("field \"run_id\" is not 32 lower-case hex characters"));
  CHECK_THAT(refusal([](J &d) { d["run_id"] = "0123456789abcdef"; }),
             Catch::Contains("field \"run_id\" is not 32 lower-case hex characters"));
  CHECK_THAT(refusal([](J &d) { d["new_verifier"]["iterations"] = 999; }),
             Catch::Contains("field \"new_verifier.iterations\" is 999, below 1000"));
  // Sector sizes: not a power of two, below 512, above 65536.
  for (const unsigned bad : {3000U, 61440U, 256U, 131072U, 0U}) {
    INFO(bad);
    CHECK_THAT(refusal([bad](J &d) { d["new_side"]["sector_size"] = bad; }),
               Catch::Contains(sector_refusal(bad)));
  }
  CHECK_THAT(refusal([](J &d) { d["old_side"]["key_bytes"] = 0; }),
             Catch::Contains("field \"old_side.key_bytes\" is 0, not 1 to 512"));
  CHECK_THAT(refusal([](J &d) { d["old_side"]["key_bytes"] = 513; }),
             Catch::Contains("field \"old_side.key_bytes\" is 513, not 1 to 512"));
  // data_bytes a multiple of 4096 but not of 65536.
  CHECK_THAT(refusal([](J &d) { d["data_bytes"] = 67108864 + 4096; }),
             Catch::Contains("field \"data_bytes\" 67112960 is not a multiple of both sector "
                             "sizes (4096 and 65536)"));
  CHECK_THAT(refusal([](J &d) { d["hotzone_bytes"] = 0; }),
             Catch::Contains("field \"hotzone_bytes\" 0 is not a multiple"));
  CHECK_THAT(refusal([](J &d) { d["hotzone_bytes"] = 65536 + 4096; }),
             Catch::Contains("field \"hotzone_bytes\" 69632 is not a multiple"));
}

TEST_CASE("reencrypt state: text that is not one JSON object is refused", "[reencrypt]") {
  const std::string text = kSampleJson;
  CHECK_THAT(refusal_of_text("{"),
             Catch::Contains("is not a state file lbscrypt reencrypt wrote: parse error"));
  CHECK_THAT(refusal_of_text(""), Catch::Contains("is not a state file lbscrypt reencrypt wrote"));
  CHECK_THAT(refusal_of_text(text + "x"),
             Catch::Contains("is not a state file lbscrypt reencrypt wrote"));
  CHECK_THAT(refusal_of_text("[" + text + "]"), Catch::Contains("the state is not a JSON object"));
  // nlohmann would keep the second "skip": two are refused.
  auto twice = text;
  twice.insert(twice.find("\"skip\""), "\"skip\": 0,\n  ");
  CHECK_THAT(refusal_of_text(twice), Catch::Contains("field \"skip\" is there twice"));
  // Not UTF-8 inside a string.
  auto latin1 = text;
  latin1.replace(latin1.find("/dev/vdb"), 8, "/dev/\xe9");
  CHECK_THAT(refusal_of_text(latin1),
             Catch::Contains("is not a state file lbscrypt reencrypt wrote"));
}

TEST_CASE("reencrypt state: written with mode 0600, read back, replaced", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  // Whatever the umask: 0277 would leave the owner no write permission.
  const mode_t saved = umask(0277);
  const auto written = lbscrypt::write_state(path, sample_state());
  umask(saved);
  REQUIRE(written.ok());
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(file_text(path) == kSampleJson);
  const auto read = lbscrypt::read_state(path);
  REQUIRE(read.ok());
  CHECK(*read == sample_state());

  ReencryptState changed = sample_state();
  changed.started = "later";
  REQUIRE(lbscrypt::write_state(path, changed).ok());
  const auto reread = lbscrypt::read_state(path);
  REQUIRE(reread.ok());
  CHECK(*reread == changed);
  CHECK(names_in(dir.path) == std::set<std::string>{"vdb.state"});  // no temporary left
}

TEST_CASE("reencrypt state: a state that breaks a rule is not written", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  ReencryptState state = sample_state();
  state.hotzone_bytes = 0;
  const auto written = lbscrypt::write_state(path, state);
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().code == Errc::invalid_argument);
  CHECK_THAT(written.error().message, Catch::Contains("hotzone_bytes"));
  // A device path that is not UTF-8 would not read back as written.
  state = sample_state();
  state.device = "/dev/\xe9";
  const auto latin1 = lbscrypt::write_state(path, state);
  REQUIRE_FALSE(latin1.ok());
  CHECK_THAT(latin1.error().message, Catch::Contains("is not UTF-8"));
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("reencrypt state: a symlink, FIFO or directory at the path is refused", "[reencrypt]") {
  const TempDir dir;
  const auto target = dir.path / "target";
  { std::ofstream(target) << "keep"; }
  const auto link = dir.path / "link.state";
  std::filesystem::create_symlink(target, link);
  const auto fifo = dir.path / "fifo.state";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const auto subdir = dir.path / "dir.state";
  std::filesystem::create_directory(subdir);
  const std::set<std::string> before = names_in(dir.path);

  const auto refused = [](const std::filesystem::path &path, const std::string &what) {
    INFO(path.string());
    const auto written = lbscrypt::write_state(path, sample_state());
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().code == Errc::invalid_argument);
    CHECK_THAT(written.error().message, Catch::StartsWith(path.string() + " is " + what));
    const auto read = lbscrypt::read_state(path);
    REQUIRE_FALSE(read.ok());
    CHECK_THAT(read.error().message, Catch::StartsWith(path.string() + " is " + what));
    const auto lock = StateLock::acquire(path);
    REQUIRE_FALSE(lock.ok());
    CHECK_THAT(lock.error().message, Catch::StartsWith(path.string() + " is " + what));
    const auto removed = lbscrypt::remove_state(path);
    REQUIRE_FALSE(removed.ok());
    CHECK_THAT(removed.error().message, Catch::StartsWith(path.string() + " is " + what));
  };
  refused(link, "a symbolic link");
  refused(fifo, "a FIFO");
  refused(subdir, "a directory");
  // Nothing created, nothing replaced, the link's target untouched.
  CHECK(names_in(dir.path) == before);
  CHECK(file_text(target) == "keep");
}

TEST_CASE("reencrypt state: a device node at the path is refused", "[reencrypt]") {
  const auto written = lbscrypt::write_state("/dev/null", sample_state());
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().message ==
        "/dev/null is a character device: lbscrypt reencrypt keeps its "
        "state and journal in regular files only; give another path");
}

TEST_CASE("reencrypt state: read_state refuses what is no state file", "[reencrypt]") {
  const TempDir dir;
  const auto missing = lbscrypt::read_state(dir.path / "none");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::not_found);
  const auto big = dir.path / "big";
  { std::ofstream(big) << std::string((1U << 20U) + 1, ' '); }
  const auto refused = lbscrypt::read_state(big);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK_THAT(refused.error().message, Catch::Contains("is larger than 1048576 bytes"));
  const auto garbage = dir.path / "garbage";
  { std::ofstream(garbage) << "format=1\n"; }
  const auto unparsed = lbscrypt::read_state(garbage);
  REQUIRE_FALSE(unparsed.ok());
  CHECK_THAT(unparsed.error().message,
             Catch::StartsWith(garbage.string() + " is not a state file lbscrypt reencrypt wrote"));
}

TEST_CASE("reencrypt state: removal wipes the journal, then unlinks both", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  const auto journal = lbscrypt::journal_path(path);
  CHECK(journal == dir.path / "vdb.state.journal");
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  const std::string old_ciphertext(std::size_t{3} * 4096, '\x5a');
  { std::ofstream(journal, std::ios::binary) << old_ciphertext; }
  // A second name for the journal's inode shows what its blocks held when it was unlinked.
  const auto witness = dir.path / "witness";
  std::filesystem::create_hard_link(journal, witness);
  REQUIRE(lbscrypt::remove_state(path).ok());
  CHECK(names_in(dir.path) == std::set<std::string>{"witness"});
  CHECK(file_text(witness) == std::string(old_ciphertext.size(), '\0'));

  // No journal (never created, or removed before a crash): fine; nothing at all: fine too.
  // The state file's own blocks are zeros before it is unlinked.
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  const auto state_witness = dir.path / "state-witness";
  std::filesystem::create_hard_link(path, state_witness);
  const std::string state_text = file_text(path);
  REQUIRE(state_text.find("\"mac\"") != std::string::npos);
  REQUIRE(lbscrypt::remove_state(path).ok());
  CHECK(names_in(dir.path) == std::set<std::string>{"witness", "state-witness"});
  CHECK(file_text(state_witness) == std::string(state_text.size(), '\0'));
  // A state file wiped, then a cut before its unlink: read_state says what it is.
  const auto zeroed = lbscrypt::read_state(state_witness);
  REQUIRE_FALSE(zeroed.ok());
  CHECK(zeroed.error().message ==
        state_witness.string() +
            " is all zeros: the run that wrote it ended and wiped it (a cut came before it was "
            "removed): remove it and its journal");
  std::filesystem::remove(state_witness);
  CHECK(lbscrypt::remove_state(path).ok());
}

TEST_CASE("reencrypt state: the MAC covers every field, canonical JSON", "[reencrypt]") {
  const ReencryptState state = sample_state();
  // kSampleJson without "mac", keys sorted, compact (Python json.dumps(sort_keys=True,
  // separators=(",", ":")) of it, computed apart).
  CHECK(lbscrypt::state_mac_text(state) ==
        R"({"data_bytes":67108864,"device":"/dev/vdb","device_id":"wwn-0x5000c500a1b2c3d4",)"
        R"("first_unit_mac":"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",)"
        R"("format":3,"hotzone_bytes":1048576,"new_side":{"cipher":"aes-cbc-essiv:sha256",)"
        R"("iv_large_sectors":true,"key_bytes":32,"sector_size":65536},"new_verifier":)"
        R"({"digest":"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",)"
        R"("iterations":1000,"salt":)"
        R"("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"},"offset":2048,)"
        R"("old_side":{"cipher":"aes-xts-plain64","iv_large_sectors":false,"key_bytes":64,)"
        R"("sector_size":4096},"old_verifier":)"
        R"({"digest":"2222222222222222222222222222222222222222222222222222222222222222",)"
        R"("iterations":200000,"salt":)"
        R"("1111111111111111111111111111111111111111111111111111111111111111"},)"
        R"("run_id":"0123456789abcdef0123456789abcdef","skip":4096,)"
        R"("started":"2026-12-04T22:50:25Z","started_online":true,"switch_mac":""})");

  const SecretBuffer old_key = secret(std::string(64, 'o'));
  const SecretBuffer new_key = secret(std::string(32, 'n'));
  const auto auth = lbscrypt::RunAuth::derive(old_key, new_key, state.run_id);
  REQUIRE(auth.ok());
  ReencryptState sealed = state;
  REQUIRE(lbscrypt::seal_state(sealed, *auth).ok());
  CHECK(sealed.mac != state.mac);
  CHECK(lbscrypt::check_state_seal(sealed, *auth, kOrigin).ok());
  // Every field changed alone breaks the seal.
  const std::vector<std::pair<const char *, std::function<void(ReencryptState &)>>> edits{
      {"device", [](ReencryptState &s) { s.device = "/dev/vdc"; }},
      {"device_id", [](ReencryptState &s) { s.device_id += "x"; }},
      {"offset", [](ReencryptState &s) { s.offset += 8; }},
      {"skip", [](ReencryptState &s) { s.skip += 8; }},
      {"data_bytes", [](ReencryptState &s) { s.data_bytes -= 65536; }},
      {"hotzone_bytes", [](ReencryptState &s) { s.hotzone_bytes *= 2; }},
      {"old cipher", [](ReencryptState &s) { s.old_side.cipher = "aes-xts-plain"; }},
      {"new sector", [](ReencryptState &s) { s.new_side.sector_size = 4096; }},
      {"new iv_large", [](ReencryptState &s) { s.new_side.iv_large_sectors = false; }},
      {"old key bytes", [](ReencryptState &s) { s.old_side.key_bytes = 32; }},
      {"verifier", [](ReencryptState &s) { s.new_verifier.iterations += 1; }},
      {"started", [](ReencryptState &s) { s.started = ""; }},
      {"first unit", [](ReencryptState &s) { s.first_unit_mac[0] ^= 1U; }},
      {"online", [](ReencryptState &s) { s.started_online = false; }},
      {"run id", [](ReencryptState &s) { s.run_id[0] = 'f'; }},
      {"mac", [](ReencryptState &s) { s.mac[31] ^= 1U; }},
  };
  for (const auto &[name, edit] : edits) {
    INFO(name);
    ReencryptState edited = sealed;
    edit(edited);
    const auto refused = lbscrypt::check_state_seal(edited, *auth, kOrigin);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK(refused.error().message ==
          std::string(kOrigin) +
              ": the state's MAC does not verify with both keys: a field of it was changed "
              "since the run wrote it, or it is another run's: nothing was written; give the "
              "state file the run wrote, unchanged");
  }
  // Another key on either side does not verify it.
  for (const auto &[o, n] : {std::pair{std::string(64, 'p'), std::string(32, 'n')},
                             std::pair{std::string(64, 'o'), std::string(32, 'm')}}) {
    const auto other = lbscrypt::RunAuth::derive(secret(o), secret(n), state.run_id);
    REQUIRE(other.ok());
    CHECK_FALSE(lbscrypt::check_state_seal(sealed, *other, kOrigin).ok());
  }
}

TEST_CASE("reencrypt state: the final switch's MAC, under the new key alone", "[reencrypt]") {
  const ReencryptState state = sample_state();
  // The MAC text without "switch_mac" either.
  const std::string text = lbscrypt::state_switch_text(state);
  CHECK(text.find("switch_mac") == std::string::npos);
  CHECK(text.find("\"mac\"") == std::string::npos);
  CHECK(text != lbscrypt::state_mac_text(state));
  const SecretBuffer new_key = secret(std::string(32, 'n'));
  const auto auth = lbscrypt::RunAuth::derive_switch(new_key, state.run_id);
  REQUIRE(auth.ok());
  ReencryptState sealed = state;
  REQUIRE(lbscrypt::seal_switch(sealed, *auth).ok());
  // HKDF-SHA256 (salt "lbscrypt reencrypt switch key v1", info the run id) of the new key,
  // then HMAC-SHA256 of "switch", a zero byte, data_bytes (8 bytes, little-endian) and the
  // text: computed apart with Python's hmac and hashlib.
  CHECK(to_hex(sealed.switch_mac) ==
        "bb48071b54af0a063117a547eceb2ea5704033d312c7deb3ce47124311def207");
  CHECK(lbscrypt::check_switch_seal(sealed, *auth, kOrigin).ok());
  // The state's own MAC covers the switch MAC: one without it is another state.
  CHECK(lbscrypt::state_mac_text(sealed) != lbscrypt::state_mac_text(state));
  const std::vector<std::pair<const char *, std::function<void(ReencryptState &)>>> edits{
      {"new sector", [](ReencryptState &s) { s.new_side.sector_size = 4096; }},
      {"new cipher", [](ReencryptState &s) { s.new_side.cipher = "aes-xts-plain64"; }},
      {"device", [](ReencryptState &s) { s.device = "/dev/vdc"; }},
      {"data_bytes", [](ReencryptState &s) { s.data_bytes -= 65536; }},
      {"verifier", [](ReencryptState &s) { s.new_verifier.digest[0] ^= 1U; }},
      {"switch mac", [](ReencryptState &s) { s.switch_mac[0] ^= 1U; }},
      {"none", [](ReencryptState &s) { s.switch_mac.clear(); }},
  };
  for (const auto &[name, edit] : edits) {
    INFO(name);
    ReencryptState edited = sealed;
    edit(edited);
    const auto refused = lbscrypt::check_switch_seal(edited, *auth, kOrigin);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK_THAT(refused.error().message,
               Catch::Contains("the state's final-switch MAC does not verify with the new key"));
  }
  // Another new key, or the run key of both, does not verify it.
  const auto other = lbscrypt::RunAuth::derive_switch(secret(std::string(32, 'm')), state.run_id);
  REQUIRE(other.ok());
  CHECK_FALSE(lbscrypt::check_switch_seal(sealed, *other, kOrigin).ok());
  const auto run = lbscrypt::RunAuth::derive(secret(std::string(64, 'o')), new_key, state.run_id);
  REQUIRE(run.ok());
  CHECK_FALSE(lbscrypt::check_switch_seal(sealed, *run, kOrigin).ok());
}

// A removal that stops part way (here: the journal's wipe fails, as a power cut could stop
// it) must not leave the state beside a journal whose slots are gone: --resume would read
// blank slots as a run at position 0 and convert the volume a second time. The state goes
// first. RLIMIT_FSIZE of the state file's size lets its wipe through (it writes within its
// size) and makes every write of the journal past that fail with EFBIG.
TEST_CASE("reencrypt state: a removal stopped in the journal's wipe has removed the state",
          "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  const auto journal = lbscrypt::journal_path(path);
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  const std::string slots_and_data(std::size_t{3} * 4096, '\x5a');
  { std::ofstream(journal, std::ios::binary) << slots_and_data; }
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tiny = saved;
  tiny.rlim_cur = std::filesystem::file_size(path);
  REQUIRE(tiny.rlim_cur < slots_and_data.size());
  REQUIRE(setrlimit(RLIMIT_FSIZE, &tiny) == 0);
  const auto removed = lbscrypt::remove_state(path);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
  static_cast<void>(std::signal(SIGXFSZ, old_handler));
  REQUIRE_FALSE(removed.ok());
  CHECK_THAT(removed.error().message, Catch::Contains("wipe the journal"));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(std::filesystem::exists(journal));
  // Run again, it finishes the removal.
  REQUIRE(lbscrypt::remove_state(path).ok());
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("reencrypt state: a removal cut after the rename leaves no state to read",
          "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  const auto journal = lbscrypt::journal_path(path);
  const auto ended = lbscrypt::ended_state_path(path);
  CHECK(ended == dir.path / "vdb.state.ended");
  // Nothing ended: nothing to finish, nothing removed.
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  { std::ofstream(journal, std::ios::binary) << std::string(4096, '\x5a'); }
  const auto none = lbscrypt::finish_ended_state(path);
  REQUIRE(none.ok());
  CHECK_FALSE(*none);
  CHECK(names_in(dir.path) == std::set<std::string>{"vdb.state", "vdb.state.journal"});
  // The state as remove_state's rename leaves it when a cut comes before the wipe (the wipe of
  // a whole file is what a cut can stop half way): STATE is gone, so --resume never reads a
  // state half wiped; the leftovers are finished, verifiers wiped.
  std::filesystem::rename(path, ended);
  const auto witness = dir.path / "witness";
  std::filesystem::create_hard_link(ended, witness);
  const std::string state_text = file_text(ended);
  const auto missing = lbscrypt::read_state(path);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == lbscrypt::Errc::not_found);
  const auto finished = lbscrypt::finish_ended_state(path);
  REQUIRE(finished.ok());
  CHECK(*finished);
  CHECK(names_in(dir.path) == std::set<std::string>{"witness"});
  CHECK(file_text(witness) == std::string(state_text.size(), '\0'));
}

TEST_CASE("reencrypt state: a journal that is a symlink stops the removal", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  const auto target = dir.path / "target";
  { std::ofstream(target) << "keep"; }
  std::filesystem::create_symlink(target, lbscrypt::journal_path(path));
  const auto removed = lbscrypt::remove_state(path);
  REQUIRE_FALSE(removed.ok());
  CHECK_THAT(removed.error().message,
             Catch::StartsWith(lbscrypt::journal_path(path).string() + " is a symbolic link"));
  CHECK(file_text(target) == "keep");
  CHECK(std::filesystem::exists(path));
}

TEST_CASE("reencrypt state: the lock keeps a second run out until released", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state";
  REQUIRE(lbscrypt::write_state(path, sample_state()).ok());
  {
    auto first = StateLock::acquire(path);
    REQUIRE(first.ok());
    // flock conflicts between two open files even in one process.
    const auto second = StateLock::acquire(path);
    REQUIRE_FALSE(second.ok());
    CHECK(second.error().code == Errc::busy);
    CHECK_THAT(second.error().message,
               Catch::StartsWith("another lbscrypt reencrypt is running this state file (" +
                                 path.string() + ")"));
    // Moved, it still holds.
    StateLock moved = std::move(first).value();
    CHECK_FALSE(StateLock::acquire(path).ok());
    StateLock assigned;
    assigned = std::move(moved);
    CHECK_FALSE(StateLock::acquire(path).ok());
  }
  CHECK(StateLock::acquire(path).ok());
  const auto missing = StateLock::acquire(dir.path / "none");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::not_found);
}
