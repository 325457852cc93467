// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/units.hpp"
#include "temp_dir.hpp"

using lbscrypt::parse_lbscrypttab;
using lbscrypt::parse_volume_options;

namespace {

// The one error of a one-line file.
std::string refusal(const std::string &line) {
  const auto tab = parse_lbscrypttab(line, "/etc/lbscrypttab");
  REQUIRE(tab.entries.empty());
  REQUIRE(tab.errors.size() == 1);
  return tab.errors.front().message;
}

}  // namespace

TEST_CASE("lbscrypttab: fields and options of good lines", "[crypttab]") {
  const auto tab = parse_lbscrypttab(
      "# comment\n"
      "\n"
      "  data\tPARTUUID=6f2c-01  /etc/keys/data.key "
      "cipher=aes-xts-plain64,size=512,sector-size=65536,offset=128,skip=256,keyfile-offset=8,"
      "keyfile-size=64,discard,same-cpu-crypt,no-read-workqueue,readonly\n"
      "pw /dev/vdb none cipher=aes-xts-plain64,size=256,hash=sha512,nofail,noauto,tries=0,"
      "timeout=2min,check=ext2,checkargs=ext4,x-initrd.attach,submit-from-crypt-cpus,"
      "no-write-workqueue\r\n"
      "short /dev/vdc\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.errors.size() == 1);  // "short" names no cipher
  CHECK(tab.errors.front().message ==
        "/etc/lbscrypttab:5: short: no cipher=: crypttab's plain default (aes-cbc-essiv:sha256) "
        "is not lbscrypt's (aes-xts-plain64); name the volume's cipher, e.g. "
        "cipher=aes-xts-plain64");
  REQUIRE(tab.entries.size() == 2);
  const auto &data = tab.entries[0];
  CHECK(data.line == 3);
  CHECK(data.name == "data");
  CHECK(data.device == "PARTUUID=6f2c-01");
  CHECK(data.path == "/dev/disk/by-partuuid/6f2c-01");
  CHECK(data.volume.mapping.device == data.path);
  CHECK(data.key == "/etc/keys/data.key");
  const auto &d = data.volume;
  CHECK(d.mapping.cipher == "aes-xts-plain64");
  CHECK(d.key.key_size_bits == 512);
  CHECK_FALSE(d.key.hash.has_value());
  CHECK(d.mapping.sector_size == 65536);
  CHECK(d.mapping.offset == 128);
  CHECK(d.mapping.skip == 256);
  CHECK(d.key.keyfile_offset == 8);
  CHECK(d.key.keyfile_size == 64U);
  CHECK(d.mapping.flags.allow_discards);
  CHECK(d.mapping.flags.same_cpu_crypt);
  CHECK(d.mapping.flags.no_read_workqueue);
  CHECK_FALSE(d.mapping.flags.no_write_workqueue);
  CHECK(d.read_only);
  CHECK(d.tries == 3);
  CHECK_FALSE(d.noauto);
  CHECK_FALSE(d.nofail);
  CHECK_FALSE(d.check.has_value());

  const auto &pw = tab.entries[1].volume;
  CHECK(tab.entries[1].key == "none");
  CHECK(pw.key.hash == "sha512");
  CHECK(pw.nofail);
  CHECK(pw.noauto);
  CHECK(pw.initrd_attach);
  CHECK(pw.tries == 0);
  CHECK(pw.timeout_us == 120000000U);
  CHECK(pw.check == "ext2");
  CHECK(pw.check_args == "ext4");
  CHECK(pw.mapping.flags.submit_from_crypt_cpus);
  CHECK(pw.mapping.flags.no_write_workqueue);
  CHECK(pw.mapping.sector_size == 512);
}

TEST_CASE("lbscrypttab: a passphrase line needs hash=, a key file does not", "[crypttab]") {
  CHECK(lbscrypt::is_passphrase_key("none"));
  CHECK(lbscrypt::is_passphrase_key("-"));
  CHECK(lbscrypt::is_passphrase_key(""));
  CHECK_FALSE(lbscrypt::is_passphrase_key("/etc/k"));
  CHECK(refusal("pw /dev/vdb none cipher=aes-xts-plain64,size=256") ==
        "/etc/lbscrypttab:1: pw: no hash= for a passphrase: crypttab's plain default (ripemd160) "
        "is not lbscrypt's (sha256); name it, e.g. hash=sha256");
  CHECK_THAT(refusal("pw /dev/vdb - size=256,hash=sha256"), Catch::Contains("no cipher="));
  CHECK_THAT(refusal("pw /dev/vdb none"), Catch::Contains(":1: pw: no cipher="));
  CHECK_THAT(refusal("pw /dev/vdb /k cipher=aes-xts-plain64"), Catch::Contains("no size="));
  // A key file is the key: no hash= needed.
  CHECK(parse_lbscrypttab("k /dev/vdb /k cipher=aes-xts-plain64,size=256", "t").errors.empty());
  CHECK(refusal("k /dev/vdb keys/k cipher=aes-xts-plain64,size=256") ==
        "/etc/lbscrypttab:1: key file 'keys/k' is not an absolute path: give /etc/keys/... or "
        "none to ask for a passphrase");
}

TEST_CASE("lbscrypttab: unknown and bad options are refused with the line number", "[crypttab]") {
  const std::string base = "v /dev/vdb /k cipher=aes-xts-plain64,size=256,";
  CHECK(refusal(base + "bogus") ==
        "/etc/lbscrypttab:1: v: unknown option 'bogus': see lbscrypttab(5) for the options "
        "lbscrypt takes");
  CHECK(refusal("\n\n" + base + "x-systemd.automount")
            .starts_with("/etc/lbscrypttab:3: v: unknown option 'x-systemd.automount'"));
  CHECK_THAT(refusal(base + "luks"),
             Catch::Contains("plain volumes only") && Catch::Contains("/etc/crypttab"));
  CHECK_THAT(refusal(base + "sector-size=131072"),
             Catch::Contains("sector-size=131072") && Catch::Contains("65536"));
  CHECK_THAT(refusal(base + "sector-size=3000"), Catch::Contains("sector-size=3000"));
  CHECK_THAT(refusal(base + "sector-size=4096abc"), Catch::Contains("is not a number"));
  CHECK_THAT(refusal(base + "offset=-1"), Catch::Contains("offset=-1 is not a number"));
  CHECK_THAT(refusal(base + "size=256"), Catch::Contains("'size' is given twice"));
  CHECK_THAT(refusal(base + "discard=yes"), Catch::Contains("'discard' takes no value"));
  CHECK_THAT(refusal(base + "tries"), Catch::Contains("'tries' needs a value"));
  CHECK_THAT(refusal(base + "timeout=5parsecs"),
             Catch::Contains("timeout=5parsecs: '5parsecs' is not a time span"));
  CHECK_THAT(refusal(base + "check=x/y"), Catch::Contains("absolute path"));
  CHECK_THAT(refusal(base), Catch::Contains("an empty option"));
  CHECK_THAT(refusal("v /dev/vdb /k cipher=aes-xts-plain64,size=100"),
             Catch::Contains("size=100 is not a key size"));
  CHECK_THAT(refusal("v /dev/vdb /k cipher=aes-xts,size=256"), Catch::Contains("cipher=aes-xts"));
}

TEST_CASE("lbscrypttab: names, devices and the shape of a line", "[crypttab]") {
  const std::string opts = " /k cipher=aes-xts-plain64,size=256";
  CHECK_THAT(refusal("a/b /dev/vdb" + opts), Catch::Contains("'a/b' is not a mapping name"));
  CHECK_THAT(refusal(".. /dev/vdb" + opts), Catch::Contains("is not a mapping name"));
  CHECK_THAT(refusal("v vdb" + opts), Catch::Contains("not an absolute path"));
  CHECK_THAT(refusal("v PARTUUID=" + opts), Catch::Contains("names no PARTUUID"));
  CHECK_THAT(refusal("v /dev/vdb" + opts + " extra"),
             Catch::Contains(":1: 5 fields; a line is NAME DEVICE [KEY [OPTIONS]]"));
  CHECK_THAT(refusal("lonely"), Catch::Contains("1 fields"));
  const auto twice = parse_lbscrypttab("v /dev/vdb" + opts + "\nv /dev/vdc" + opts, "t");
  CHECK(twice.entries.size() == 1);
  REQUIRE(twice.errors.size() == 1);
  CHECK_THAT(twice.errors.front().message, Catch::StartsWith("t:2: v is listed twice"));
  CHECK(lbscrypt::volume_device_path("UUID=ab").value() == "/dev/disk/by-uuid/ab");
  CHECK(lbscrypt::volume_device_path("LABEL=x").value() == "/dev/disk/by-label/x");
  CHECK(lbscrypt::volume_device_path("PARTLABEL=y").value() == "/dev/disk/by-partlabel/y");
  CHECK(parse_lbscrypttab("", "t").entries.empty());
}

TEST_CASE("volume options: the same parser attach uses", "[crypttab]") {
  const auto v = parse_volume_options("cipher=aes-cbc-essiv:sha256,size=256,hash=sha256", true);
  REQUIRE(v.ok());
  CHECK(v->mapping.cipher == "aes-cbc-essiv:sha256");
  CHECK(v->key.hash == "sha256");
  CHECK(parse_volume_options("plain,cipher=aes-xts-plain64,size=256", false).ok());
  CHECK(parse_volume_options("cipher=aes-xts-plain64,size=256,timeout=30s", false)->timeout_us ==
        30000000U);
  CHECK(parse_volume_options("cipher=aes-xts-plain64,size=256,timeout=1h", false)->timeout_us ==
        3600000000U);
  CHECK(parse_volume_options("cipher=aes-xts-plain64,size=256,check", false)->check == "blkid");
}

namespace {

const std::string kXts = "cipher=aes-xts-plain64,size=256";
const std::string kPass = kXts + ",hash=sha256";

// The options of a one-line file that must parse.
lbscrypt::VolumeOptions accepted(const std::string &line) {
  const auto tab = parse_lbscrypttab(line, "t");
  INFO(line);
  REQUIRE(tab.errors.empty());
  REQUIRE(tab.entries.size() == 1);
  return tab.entries.front().volume;
}

}  // namespace

TEST_CASE("lbscrypttab: systemd's time spans for timeout= and x-systemd.device-timeout=",
          "[crypttab]") {
  using lbscrypt::parse_time_span;
  constexpr std::uint64_t s = 1000000;
  CHECK(parse_time_span("30").value() == 30 * s);
  CHECK(parse_time_span("30s").value() == 30 * s);
  CHECK(parse_time_span("2min").value() == 120 * s);
  CHECK(parse_time_span("1h30min").value() == 5400 * s);
  CHECK(parse_time_span("500ms").value() == 500000);
  CHECK(parse_time_span("1h 30min 5").value() == 5405 * s);
  CHECK(parse_time_span("1.5h").value() == 5400 * s);
  CHECK(parse_time_span("0.25s").value() == 250000);
  CHECK(parse_time_span("7us").value() == 7);
  CHECK(parse_time_span("7usec").value() == 7);
  CHECK(parse_time_span("7\u00b5s").value() == 7);
  CHECK(parse_time_span("3msec").value() == 3000);
  CHECK(parse_time_span("1second").value() == s);
  CHECK(parse_time_span("2seconds").value() == 2 * s);
  CHECK(parse_time_span("1m").value() == 60 * s);
  CHECK(parse_time_span("1minute").value() == 60 * s);
  CHECK(parse_time_span("2minutes").value() == 120 * s);
  CHECK(parse_time_span("1hr").value() == 3600 * s);
  CHECK(parse_time_span("2hours").value() == 7200 * s);
  CHECK(parse_time_span("1d").value() == 86400 * s);
  CHECK(parse_time_span("2days").value() == 172800 * s);
  CHECK(parse_time_span("1w").value() == 604800 * s);
  CHECK(parse_time_span("1weeks").value() == 604800 * s);
  CHECK(parse_time_span("1M").value() == 2629800 * s);  // 30.44 days
  CHECK(parse_time_span("1months").value() == 2629800 * s);
  CHECK(parse_time_span("1y").value() == 31557600 * s);  // 365.25 days
  CHECK(parse_time_span("1years").value() == 31557600 * s);
  CHECK(parse_time_span("0").value() == 0);
  CHECK(parse_time_span("infinity").value() == lbscrypt::kTimeInfinity);
  for (const char *bad : {"", "-5", "5parsecs", "min", ".", "1.", "1..5s", "infinityms", "5 -1s",
                          "99999999999999999999", "600000y"}) {
    INFO(bad);
    CHECK_FALSE(parse_time_span(bad).ok());
  }
  CHECK_THAT(parse_time_span("600000y").error().message, Catch::Contains("too long"));

  CHECK(accepted("v /dev/vdb none " + kPass + ",timeout=0").timeout_us == 0U);
  CHECK(accepted("v /dev/vdb none " + kPass + ",timeout=infinity").timeout_us == 0U);
  CHECK(accepted("v /dev/vdb none " + kPass + ",timeout=1h30min").timeout_us == 5400 * s);
  CHECK(accepted("v /dev/vdb none " + kPass + ",timeout=500ms").timeout_us == 500000U);
  CHECK_FALSE(accepted("v /dev/vdb none " + kPass).timeout_us.has_value());
  const auto dev = accepted("v /dev/vdb /k " + kXts + ",x-systemd.device-timeout=1min30s");
  CHECK(dev.device_timeout_us == 90 * s);
  CHECK_FALSE(accepted("v /dev/vdb /k " + kXts).device_timeout_us.has_value());
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + ",x-systemd.device-timeout=soon"),
             Catch::Contains("x-systemd.device-timeout=soon: 'soon' is not a time span"));
}

TEST_CASE("lbscrypttab: _netdev and headless= as systemd takes them", "[crypttab]") {
  CHECK(accepted("v /dev/vdb /k " + kXts + ",_netdev").netdev);
  CHECK_FALSE(accepted("v /dev/vdb /k " + kXts).netdev);
  CHECK(accepted("v /dev/vdb none " + kPass + ",headless").headless);
  CHECK(accepted("v /dev/vdb none " + kPass + ",headless=yes").headless);
  CHECK(accepted("v /dev/vdb none " + kPass + ",headless=TRUE").headless);
  CHECK(accepted("v /dev/vdb none " + kPass + ",headless=1").headless);
  CHECK_FALSE(accepted("v /dev/vdb none " + kPass + ",headless=off").headless);
  CHECK_FALSE(accepted("v /dev/vdb none " + kPass).headless);
  CHECK_THAT(refusal("v /dev/vdb none " + kPass + ",headless=maybe"),
             Catch::Contains(":1: v: headless=maybe is not a boolean"));
}

TEST_CASE("lbscrypttab: a trailing comment, and any other fifth field refused", "[crypttab]") {
  CHECK(accepted("v /dev/vdb /k " + kXts + ",sector-size=4096 # backup disk").mapping.sector_size ==
        4096);
  CHECK(accepted("v /dev/vdb /k " + kXts + " #comment").mapping.sector_size == 512);
  CHECK(accepted("v /dev/vdb /k " + kXts + "\t#\r").mapping.sector_size == 512);
  // A stray space must not drop sector-size= (systemd's generator drops it silently).
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + " sector-size=65536"),
             Catch::Contains(":1: 5 fields; a line is NAME DEVICE [KEY [OPTIONS]]"));
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + " ,sector-size=65536 # why"),
             Catch::Contains("7 fields"));
}

TEST_CASE("lbscrypttab: CRLF lines and a later auto read as with LF", "[crypttab]") {
  const std::string lf = "a /dev/vdb none " + kPass + ",x-initrd.attach,noauto,auto\n" +
                         "b /dev/vdc /k " + kXts + ",x-initrd.attach,auto,noauto\n";
  std::string crlf;
  for (const char c : lf) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  const auto one = parse_lbscrypttab(lf, "t");
  const auto two = parse_lbscrypttab(crlf, "t");
  REQUIRE(one.entries.size() == 2);
  REQUIRE(two.entries.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(lbscrypt::tab_record(one.entries[i]) == lbscrypt::tab_record(two.entries[i]));
  }
  CHECK(lbscrypt::opened_by_initrd(two.entries[0]));
  CHECK_FALSE(lbscrypt::opened_by_initrd(two.entries[1]));
}

TEST_CASE("lbscrypttab: options that would fail at boot are refused when parsed", "[crypttab]") {
  CHECK_THAT(refusal("v /dev/vdb none " + kPass + ",keyfile-offset=8"),
             Catch::Contains(":1: v: keyfile-offset= and keyfile-size= are for a key file"));
  CHECK_THAT(refusal("v /dev/vdb - " + kPass + ",keyfile-size=32"),
             Catch::Contains("are for a key file"));
  // offset= and skip= count 512-byte sectors; the kernel and cryptsetup want them on a sector.
  CHECK(refusal("v /dev/vdb /k " + kXts + ",sector-size=4096,offset=1") ==
        "/etc/lbscrypttab:1: v: offset=1 is not a multiple of sector-size=4096 (8 sectors of "
        "512 bytes): the data would not start on a sector; give offset=0 or 8");
  CHECK(accepted("v /dev/vdb /k " + kXts + ",sector-size=4096,offset=8").mapping.offset == 8);
  CHECK(accepted("v /dev/vdb /k " + kXts + ",offset=3").mapping.offset == 3);  // 512: any
  CHECK(accepted("v /dev/vdb /k " + kXts + ",offset=128,sector-size=65536").mapping.offset == 128);
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + ",sector-size=65536,offset=64"),
             Catch::Contains("offset=64 is not a multiple of sector-size=65536 (128 sectors"));
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + ",sector-size=4096,skip=4"),
             Catch::Contains("skip=4 is not a multiple of sector-size=4096"));
  // Key sizes AES cannot take.
  CHECK(refusal("v /dev/vdb /k cipher=aes-xts-plain64,size=8") ==
        "/etc/lbscrypttab:1: v: size=8 does not fit cipher=aes-xts-plain64: xts takes AES keys "
        "of 128, 192 or 256 bits, two of the same size (size=256 is AES-128, 512 AES-256); "
        "give size=512");
  CHECK_THAT(refusal("v /dev/vdb /k cipher=aes-xts-plain64,size=128"),
             Catch::Contains("size=128 does not fit"));
  CHECK_THAT(refusal("v /dev/vdb /k cipher=aes-cbc-essiv:sha256,size=512"),
             Catch::Contains("size=512 does not fit cipher=aes-cbc-essiv:sha256"));
  CHECK_THAT(refusal("v /dev/vdb /k cipher=capi:xts(aes)-plain64,size=64"),
             Catch::Contains("size=64 does not fit"));
  for (const char *good : {"aes-xts-plain64,size=256", "aes-xts-plain64,size=384",
                           "aes-xts-plain64,size=512", "aes-cbc-essiv:sha256,size=128",
                           "aes-cbc-essiv:sha256,size=192", "capi:xts(aes)-plain64,size=512",
                           "serpent-xts-plain64,size=512", "aes:64-cbc-lmk,size=8320"}) {
    INFO(good);
    CHECK(parse_lbscrypttab(std::string("v /dev/vdb /k cipher=") + good, "t").errors.empty());
  }
  // hash=NAME:N: N bytes of the hash, then zeros; 0 is an all-zero key.
  CHECK_THAT(refusal("v /dev/vdb none " + kXts + ",hash=sha256:0"),
             Catch::Contains("hash=sha256:0: the part after ':' is how many bytes of the hash "
                             "make the key (the rest is zeros); give 1 to 32 (size=256)"));
  CHECK_THAT(refusal("v /dev/vdb none " + kXts + ",hash=sha256:33"), Catch::Contains("1 to 32"));
  CHECK_THAT(refusal("v /dev/vdb none " + kXts + ",hash=sha256:x"), Catch::Contains("1 to 32"));
  CHECK(accepted("v /dev/vdb none " + kXts + ",hash=sha256:16").key.hash == "sha256:16");
}

TEST_CASE("lbscrypttab: hash= with a key file is refused, naming both meanings", "[crypttab]") {
  CHECK(refusal("v /dev/vdb /etc/k " + kXts + ",hash=sha256") ==
        "/etc/lbscrypttab:1: v: hash=sha256 with a key file has two meanings: "
        "systemd-cryptsetup hashes the key file's bytes with it, the cryptsetup command line "
        "ignores it; write hash=plain, or drop hash=, to use the key file's bytes as the key "
        "(both agree on that)");
  CHECK(accepted("v /dev/vdb /etc/k " + kXts + ",hash=plain").key.hash == "plain");
  CHECK(accepted("v /dev/vdb none " + kXts + ",hash=plain").key.hash == "plain");
}

TEST_CASE("lbscrypttab: repeated options are refused", "[crypttab]") {
  for (const char *again :
       {"sector-size=4096,sector-size=65536", "offset=8,offset=16", "cipher=aes-xts-plain64",
        "keyfile-offset=1,keyfile-offset=2", "headless,headless=no"}) {
    INFO(again);
    CHECK_THAT(refusal("v /dev/vdb /k " + kXts + "," + again), Catch::Contains("is given twice"));
  }
}

TEST_CASE("lbscrypttab: key specs and key fields", "[crypttab]") {
  CHECK(refusal("v /dev/vdb /k.bin:UUID=1234 " + kXts) ==
        "/etc/lbscrypttab:1: v: key '/k.bin:UUID=1234' is a KEY:DEVICE spec (a key file on "
        "another device), which lbscrypt does not support: copy the key file to the root (or "
        "the initramfs), or name the key device itself, with keyfile-offset= where the key "
        "starts on it");
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + ",keyfile-timeout=10s"),
             Catch::Contains(":1: v: keyfile-timeout= (wait for a key on a device, then ask for "
                             "a passphrase) is not supported"));
  for (const std::string &key :
       {std::string("/etc/it's"), std::string("/etc/\"k\""), std::string("/etc/a\\b"),
        std::string("/etc/a\x01"), std::string("/etc/a\x7f"), std::string("/etc/a\0b", 8)}) {
    INFO(lbscrypt::printable(key));
    std::string line = "v /dev/vdb ";
    line += key;
    line += ' ';
    line += kXts;
    CHECK_THAT(refusal(line), Catch::Contains("holds a quote, a backslash or a control character"));
  }
  CHECK(accepted("v /dev/vdb /etc/keys/caf\xc3\xa9 " + kXts).key.keyfile_offset == 0);
  CHECK_THAT(refusal("v /dev/vdb /k " + kXts + ",checkargs=a\x01"),
             Catch::Contains("the options hold a control character"));
}

TEST_CASE("lbscrypttab: a device path that is not normalised is refused", "[crypttab]") {
  CHECK(refusal("v /dev/../dev/vdb /k " + kXts) ==
        "/etc/lbscrypttab:1: device '/dev/../dev/vdb' is not a normalised path: write /dev/vdb");
  CHECK_THAT(refusal("v //dev/vdb /k " + kXts), Catch::Contains("write /dev/vdb"));
  CHECK_THAT(refusal("v /dev//vdb /k " + kXts), Catch::Contains("write /dev/vdb"));
  CHECK_THAT(refusal("v /dev/./vdb /k " + kXts), Catch::Contains("write /dev/vdb"));
  CHECK_THAT(refusal("v /dev/vdb/ /k " + kXts), Catch::Contains("write /dev/vdb"));
  CHECK_THAT(refusal("v /dev/vdb/. /k " + kXts), Catch::Contains("write /dev/vdb"));
  CHECK_THAT(refusal("v UUID=. /k " + kXts), Catch::Contains("names no UUID"));
  CHECK_THAT(refusal("v LABEL=.. /k " + kXts), Catch::Contains("names no LABEL"));
  CHECK(lbscrypt::volume_device_path("/dev/disk/by-id/nvme-x-p4").ok());
  CHECK_FALSE(lbscrypt::volume_device_path("/dev/x/..").ok());
}

TEST_CASE("lbscrypttab: bad lines never keep the others, and tab_record", "[crypttab]") {
  const auto tab = parse_lbscrypttab(
      "bad1 /dev/vdb /k " + kXts + ",hash=sha1,x-initrd.attach\n" + "good /dev/vdc /etc/k " + kXts +
          ",check=ext2,x-initrd.attach\n" + "bad2 /dev/vdd none " + kXts + " extra\n" +
          "pw LABEL=x none " + kPass + ",sector-size=4096\n",
      "t");
  REQUIRE(tab.entries.size() == 2);
  REQUIRE(tab.errors.size() == 2);
  REQUIRE(tab.refused.size() == 2);
  CHECK(tab.refused[0].line == 1);
  CHECK(tab.refused[0].initrd_attach);
  CHECK(tab.refused[1].line == 3);
  CHECK_FALSE(tab.refused[1].initrd_attach);
  CHECK(lbscrypt::tab_record(tab.entries[0]) ==
        "good /dev/vdc /dev/vdc /etc/k 512 ext2 aes-xts-plain64 " + kXts +
            ",check=ext2,x-initrd.attach");
  CHECK(lbscrypt::tab_record(tab.entries[1]) ==
        "pw LABEL=x /dev/disk/by-label/x none 4096 - aes-xts-plain64 " + kPass +
            ",sector-size=4096");
}

namespace {

// The corpus's "#> " expectations, by the line they stand before.
struct Expected {
  bool ok = false;
  bool initrd = false;
  std::string refusal;  // a part of the message
};

std::map<unsigned, Expected> corpus_expectations(const std::string &text) {
  std::map<unsigned, Expected> want;
  std::optional<Expected> pending;
  unsigned number = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.starts_with("#> ")) {
      Expected e;
      const std::string rest = line.substr(3);
      if (rest.starts_with("refused ")) {
        e.refusal = rest.substr(8);
      } else {
        e.ok = true;
        e.initrd = rest == "ok initrd";
        REQUIRE((rest == "ok" || e.initrd));
      }
      pending = e;
    } else if (!line.empty() && line.front() != '#' && pending) {
      want[number] = *pending;
      pending.reset();
    }
  }
  return want;
}

std::string read_corpus() {
  std::ifstream in(std::string(LBSCRYPT_TEST_DATA) + "/lbscrypttab-corpus", std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `lbscrypt tab list [--initrd]` on the corpus: exit code, stdout, stderr.
struct Listed {
  int rc;
  std::string out;
  std::string err;
};

Listed tab_list(const std::string &text, bool initrd) {
  lbscrypt::cli::Services services;
  services.read_file = [&](const std::string &path) -> lbscrypt::Result<std::string> {
    if (path != "/corpus") {
      return lbscrypt::make_error(lbscrypt::Errc::not_found, "no " + path);
    }
    return text;
  };
  std::ostringstream out;
  std::ostringstream err;
  std::vector<std::string> args{"lbscrypt", "tab", "list", "--tab", "/corpus"};
  if (initrd) {
    args.emplace_back("--initrd");
  }
  const int rc = lbscrypt::cli::run(args, out, err, services);
  return {rc, out.str(), err.str()};
}

std::vector<std::string> first_words(const std::string &text) {
  std::vector<std::string> names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    names.push_back(line.substr(0, line.find(' ')));
  }
  return names;
}

}  // namespace

TEST_CASE("lbscrypttab corpus: the parser, tab list and the generator agree on every line",
          "[crypttab][corpus]") {
  const std::string text = read_corpus();
  const auto want = corpus_expectations(text);
  REQUIRE(want.size() >= 30);
  const auto tab = parse_lbscrypttab(text, "/corpus");
  std::map<unsigned, const lbscrypt::TabEntry *> entries;
  for (const auto &entry : tab.entries) {
    entries[entry.line] = &entry;
  }
  std::map<unsigned, std::string> errors;
  for (std::size_t i = 0; i < tab.errors.size(); ++i) {
    errors[tab.refused[i].line] = tab.errors[i].message;
  }
  CHECK(entries.size() + errors.size() == want.size());
  std::vector<std::string> all;
  std::vector<std::string> initrd;
  std::vector<std::string> records;
  std::vector<std::string> initrd_records;
  bool initrd_refused = false;
  for (const auto &[line, e] : want) {
    INFO("corpus line " << line);
    if (e.ok) {
      REQUIRE(entries.contains(line));
      CHECK(lbscrypt::opened_by_initrd(*entries[line]) == e.initrd);
      all.push_back(entries[line]->name);
      records.push_back(lbscrypt::tab_record(*entries[line]));
      if (e.initrd) {
        initrd.push_back(entries[line]->name);
        initrd_records.push_back(records.back());
      }
    } else {
      REQUIRE(errors.contains(line));
      CHECK_THAT(errors[line], Catch::StartsWith("/corpus:" + std::to_string(line) + ": ") &&
                                   Catch::Contains(e.refusal));
      initrd_refused = initrd_refused || errors[line].find("x-initrd.attach") != std::string::npos;
    }
  }
  // What the initramfs hook and boot script read: tab list --initrd.
  const auto listed = tab_list(text, true);
  CHECK(first_words(listed.out) == initrd);
  std::string joined;
  for (const auto &r : initrd_records) {
    joined += r + "\n";
  }
  CHECK(listed.out == joined);
  CHECK(listed.rc == 1);  // the corpus's last line, an x-initrd.attach line, is refused
  CHECK(first_words(tab_list(text, false).out) == all);
  CHECK(initrd_refused);

  // What the generator writes: one volume unit per accepted line, none for the others; a name
  // whose unit names would pass the 255 bytes of a file name gets an error naming it instead
  // (attach and the initramfs open it; systemd cannot).
  const auto units = lbscrypt::generate_units(tab.entries, {"/usr/sbin/lbscrypt", "/corpus"});
  std::set<std::string> unit_files;
  for (const auto &file : units.files) {
    unit_files.insert(file.path);
  }
  constexpr std::size_t kNameMax = 255;
  std::size_t too_long = 0;
  for (const auto &name : all) {
    INFO(name);
    if (lbscrypt::volume_unit_name(name).size() > kNameMax) {
      ++too_long;
      CHECK_FALSE(unit_files.contains(lbscrypt::volume_unit_name(name)));
    } else {
      CHECK(unit_files.contains(lbscrypt::volume_unit_name(name)));
    }
  }
  CHECK(too_long == 1);  // the corpus's long name with dashes
  REQUIRE(units.errors.size() == too_long);
  CHECK_THAT(units.errors.front().message, Catch::StartsWith("/corpus:25: "));
}

TEST_CASE("tab list: records, warnings for lines the initramfs leaves out, no file", "[crypttab]") {
  const std::string text = "a /dev/vdb none " + kPass + ",x-initrd.attach\r\n" + "b /dev/vdc /k " +
                           kXts + ",hash=sha1\n" + "c /dev/vdd /k " + kXts + "\n";
  const auto initrd = tab_list(text, true);
  CHECK(initrd.rc == 0);
  CHECK(initrd.out ==
        "a /dev/vdb /dev/vdb none 512 - aes-xts-plain64 " + kPass + ",x-initrd.attach\n");
  CHECK_THAT(initrd.err, Catch::StartsWith("lbscrypt: warning: /corpus:2: b: hash=sha1 with a "
                                           "key file") &&
                             Catch::EndsWith("(not an x-initrd.attach line: left out)\n"));
  const auto every = tab_list(text, false);
  CHECK(every.rc == 1);
  CHECK(first_words(every.out) == std::vector<std::string>{"a", "c"});
  CHECK_THAT(every.err, Catch::StartsWith("lbscrypt: /corpus:2: b: hash=sha1"));
  lbscrypt::cli::Services none;
  none.read_file = [](const std::string &p) -> lbscrypt::Result<std::string> {
    return lbscrypt::make_error(lbscrypt::Errc::not_found, "no " + p);
  };
  std::ostringstream out;
  std::ostringstream err;
  CHECK(lbscrypt::cli::run({"lbscrypt", "tab", "list", "--initrd"}, out, err, none) == 0);
  CHECK(out.str().empty());
  CHECK(err.str().empty());
}

// ---- the writer (reencrypt --update-tab) ----------------------------------------------------

TEST_CASE("lbscrypttab writer: options edited in place, the others kept", "[crypttab]") {
  using lbscrypt::OptionEdit;
  const std::vector<OptionEdit> edits{
      {"cipher", "aes-cbc-essiv:sha256"}, {"size", "256"}, {"sector-size", "65536"}};
  CHECK(lbscrypt::edit_volume_options("cipher=aes-xts-plain64,size=512,discard,sector-size=4096",
                                      edits) ==
        "cipher=aes-cbc-essiv:sha256,size=256,discard,sector-size=65536");
  // one not there is appended; nothing else moves
  CHECK(lbscrypt::edit_volume_options("nofail,size=512,cipher=aes-xts-plain64", edits) ==
        "nofail,size=256,cipher=aes-cbc-essiv:sha256,sector-size=65536");
  // nullopt drops every option of that name, bare or with a value
  const std::vector<OptionEdit> drop{{"check", std::nullopt}};
  CHECK(lbscrypt::edit_volume_options("check,size=512,check=ext2", drop) == "size=512");
  CHECK(lbscrypt::edit_volume_options("", edits) ==
        "cipher=aes-cbc-essiv:sha256,size=256,sector-size=65536");
}

TEST_CASE("lbscrypttab writer: one line's options replaced, every other byte kept", "[crypttab]") {
  const std::string text =
      "# volumes\n"
      "a /dev/vda /k/a cipher=aes-xts-plain64,size=512\n"
      "  b\t/dev/vdb   none\tcipher=aes-xts-plain64,size=256,hash=sha256  # its comment\r\n"
      "c /dev/vdc /k/c cipher=aes-xts-plain64,size=512";
  const auto b = lbscrypt::replace_tab_options(text, 3, "cipher=X,size=1");
  REQUIRE(b.ok());
  CHECK(*b ==
        "# volumes\n"
        "a /dev/vda /k/a cipher=aes-xts-plain64,size=512\n"
        "  b\t/dev/vdb   none\tcipher=X,size=1  # its comment\r\n"
        "c /dev/vdc /k/c cipher=aes-xts-plain64,size=512");
  const auto c = lbscrypt::replace_tab_options(text, 4, "o");
  REQUIRE(c.ok());
  CHECK(c->ends_with("\nc /dev/vdc /k/c o"));
  CHECK(c->starts_with("# volumes\na /dev/vda /k/a cipher=aes-xts-plain64,size=512\n  b\t"));
  // a line without a fourth field, or no such line
  CHECK_FALSE(lbscrypt::replace_tab_options("a /dev/vda /k/a\n", 1, "o").ok());
  CHECK_FALSE(lbscrypt::replace_tab_options(text, 1, "o").ok());
  CHECK_FALSE(lbscrypt::replace_tab_options(text, 5, "o").ok());
  CHECK_FALSE(lbscrypt::replace_tab_options(text, 0, "o").ok());
}

TEST_CASE("lbscrypttab writer: the file replaced whole, its mode kept, no temporary left",
          "[crypttab]") {
  namespace fs = std::filesystem;
  const lbscrypt::test::TempDir dir;
  const fs::path tab = dir.path / "lbscrypttab";
  std::ofstream(tab) << "old\n";
  fs::permissions(tab, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  REQUIRE(lbscrypt::write_lbscrypttab(tab, "new text\nline two\n").ok());
  std::ifstream in(tab);
  std::ostringstream back;
  back << in.rdbuf();
  CHECK(back.str() == "new text\nline two\n");
  CHECK(fs::status(tab).permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  // no file: nothing is created
  const auto missing = lbscrypt::write_lbscrypttab(dir.path / "none", "x");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == lbscrypt::Errc::not_found);
  CHECK_FALSE(fs::exists(dir.path / "none"));
}

// The names below are what udev makes of the tags (libblkid's _ENC encoding), and the device
// units what systemd 252's own systemd-cryptsetup-generator wrote for the same crypttab lines
// (LABEL=Data(1) gave BindsTo=dev-disk-by\x2dlabel-Data\x5cx281\x5cx29.device).
TEST_CASE("lbscrypttab: tags name the link udev makes, escaped as udev escapes", "[crypttab]") {
  using lbscrypt::udev_encode;
  using lbscrypt::volume_device_path;
  CHECK(udev_encode("Data(1)") == "Data\\x281\\x29");
  CHECK(udev_encode("a b") == "a\\x20b");
  CHECK(udev_encode("a\\x20b") == "a\\x5cx20b");  // a backslash written is a backslash
  CHECK(udev_encode("ab/c") == "ab\\x2fc");
  CHECK(udev_encode("#+-.:=@_09AZaz") == "#+-.:=@_09AZaz");
  CHECK(udev_encode("caf\xc3\xa9") == "caf\xc3\xa9");       // valid UTF-8 stays
  CHECK(udev_encode("\xc3(") == "\\xc3\\x28");              // a lead byte alone does not
  CHECK(udev_encode("\xc0\xaf") == "\\xc0\\xaf");           // nor an overlong form
  CHECK(udev_encode("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // nor a surrogate
  CHECK(udev_encode("$%,'\"") == "\\x24\\x25\\x2c\\x27\\x22");
  CHECK(volume_device_path("LABEL=Data(1)").value() == "/dev/disk/by-label/Data\\x281\\x29");
  CHECK(volume_device_path("PARTLABEL=my disk").value() == "/dev/disk/by-partlabel/my\\x20disk");
  CHECK(volume_device_path("UUID=ab/c").value() == "/dev/disk/by-uuid/ab\\x2fc");
  CHECK(volume_device_path("PARTUUID=6f2c4a1e-02").value() == "/dev/disk/by-partuuid/6f2c4a1e-02");
  // systemd takes the quotes off a tag's value
  CHECK(volume_device_path("LABEL=\"Data\"").value() == "/dev/disk/by-label/Data");
  CHECK(volume_device_path("LABEL='Data'").value() == "/dev/disk/by-label/Data");
  CHECK_FALSE(volume_device_path("LABEL=..").ok());
  CHECK_FALSE(volume_device_path("LABEL=").ok());
  // The escaped path written by hand: taken as written.
  CHECK(volume_device_path("/dev/disk/by-label/Data\\x281\\x29").value() ==
        "/dev/disk/by-label/Data\\x281\\x29");
  const auto tab = parse_lbscrypttab(
      "a LABEL=Data(1) /etc/k cipher=aes-xts-plain64,size=256\n"
      "b /dev/disk/by-label/Data\\x281\\x29 /etc/k cipher=aes-xts-plain64,size=256\n"
      "c PARTLABEL=\xc3\xa0 /etc/k cipher=aes-xts-plain64,size=256\n",
      "/t");
  INFO((tab.errors.empty() ? "" : tab.errors.front().message));
  REQUIRE(tab.entries.size() == 3);
  CHECK(tab.entries[0].path == "/dev/disk/by-label/Data\\x281\\x29");
  CHECK(tab.entries[1].path == tab.entries[0].path);
  CHECK(tab.entries[2].path == "/dev/disk/by-partlabel/\xc3\xa0");
  // A control byte in a tag: the path would have it as \xNN, the DEVICE field tab list prints
  // would hold it as written: refused.
  CHECK_THAT(refusal("d LABEL=a\x0b"
                     "b /etc/k cipher=aes-xts-plain64,size=256"),
             Catch::Contains("holds a control character"));
  CHECK_THAT(refusal("d LABEL=a\rb /etc/k cipher=aes-xts-plain64,size=256"),
             Catch::Contains("holds a control character"));
}

TEST_CASE("lbscrypttab: allow-discards, swap and tmp as systemd takes them", "[crypttab]") {
  const std::string base = "cipher=aes-xts-plain64,size=256,";
  const auto discards = parse_volume_options(base + "allow-discards", false);
  REQUIRE(discards.ok());
  CHECK(discards->mapping.flags.allow_discards);
  const auto swap = parse_volume_options(base + "swap", false);
  REQUIRE(swap.ok());
  CHECK(swap->swap);
  CHECK_FALSE(swap->tmp_fstype);
  const auto tmp = parse_volume_options(base + "tmp", false);
  REQUIRE(tmp.ok());
  CHECK(tmp->tmp_fstype == "ext4");
  CHECK(parse_volume_options(base + "tmp=xfs", false)->tmp_fstype == "xfs");
  const auto empty = parse_volume_options(base + "tmp=", false);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.error().message, Catch::StartsWith("tmp= is not a filesystem type"));
  CHECK_FALSE(parse_volume_options(base + "tmp=a/b", false).ok());
  const auto both = parse_volume_options(base + "swap,tmp", false);
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.error().message, Catch::StartsWith("swap and tmp both format the volume"));
}

TEST_CASE("lbscrypttab: systemd's options lbscrypt does not take are named, with why",
          "[crypttab]") {
  const std::string base = "cipher=aes-xts-plain64,size=256,hash=sha256,";
  const std::pair<const char *, const char *> cases[] = {
      {"verify", "option 'verify' is not supported: plain mode asks once"},
      {"password-echo=masked", "option 'password-echo' is not supported: the passphrase"},
      {"try-empty-password", "option 'try-empty-password' is not supported: plain mode opens"},
      {"key-slot=1", "option 'key-slot' is not supported: it reads a LUKS header"},
      {"header=/h", "option 'header' is not supported: it reads a LUKS header"},
      {"tpm2-pcrs=7",
       "option 'tpm2-pcrs' is not supported: a sealed key's PCR policy is "
       "chosen when it is sealed (lbscrypt seal --tpm2-pcrs=)"},
      {"tpm2-pin=yes", "option 'tpm2-pin' is not supported: systemd-creds seals without a PIN"},
      {"tpm2-signature=/s", "option 'tpm2-signature' is not supported: signed PCR policies"},
      {"fido2-device=auto", "option 'fido2-device' is not supported: a key from a token"},
      {"pkcs11-uri=auto", "option 'pkcs11-uri' is not supported: a key from a token"},
      {"token-timeout=10s", "option 'token-timeout' is not supported: a key from a token"},
      {"tcrypt-hidden", "option 'tcrypt-hidden' is not supported: it is for TrueCrypt"},
      {"veracrypt-pim=1", "option 'veracrypt-pim' is not supported: it is for TrueCrypt"},
  };
  for (const auto &[option, message] : cases) {
    INFO(option);
    const auto parsed = parse_volume_options(base + option, true);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(parsed.error().message, Catch::StartsWith(message));
  }
  // A word systemd does not know either: the bare refusal.
  CHECK_THAT(parse_volume_options(base + "bogus", true).error().message,
             Catch::StartsWith("unknown option 'bogus'"));
}

TEST_CASE("lbscrypttab: a key sealed to the TPM2 (tpm2-device=, x-lbscrypt.sealed=)",
          "[crypttab][sealed]") {
  const auto tab = parse_lbscrypttab(
      "data PARTUUID=6f2c4a1e-01 /etc/lbscrypt/data.cred "
      "cipher=aes-xts-plain64,size=512,sector-size=4096,tpm2-device=auto\n"
      "pass /dev/vdb /etc/lbscrypt/pass.cred "
      "cipher=aes-xts-plain64,size=256,hash=sha512,tpm2-device=/dev/tpmrm0,"
      "x-lbscrypt.sealed=passphrase,headless=true\n"
      "key /dev/vdc /etc/lbscrypt/key.cred "
      "cipher=aes-xts-plain64,size=256,hash=plain,tpm2-device=auto,x-lbscrypt.sealed=key\n",
      "/etc/lbscrypttab");
  REQUIRE(tab.errors.empty());
  REQUIRE(tab.entries.size() == 3);
  const auto &data = tab.entries[0].volume;
  CHECK(data.sealed());
  CHECK(data.tpm2_device == std::optional<std::string>("auto"));
  CHECK_FALSE(data.sealed_passphrase);
  CHECK_FALSE(data.key.hash);
  const auto &pass = tab.entries[1].volume;
  CHECK(pass.tpm2_device == std::optional<std::string>("/dev/tpmrm0"));
  CHECK(pass.sealed_passphrase);
  CHECK(pass.headless);
  CHECK(pass.key.hash == std::optional<std::string>("sha512"));
  CHECK_FALSE(tab.entries[2].volume.sealed_passphrase);
  // tab list: the key field is the credential, the options say it is sealed
  CHECK(lbscrypt::tab_record(tab.entries[0]) ==
        "data PARTUUID=6f2c4a1e-01 /dev/disk/by-partuuid/6f2c4a1e-01 /etc/lbscrypt/data.cred 4096 "
        "- aes-xts-plain64 cipher=aes-xts-plain64,size=512,sector-size=4096,tpm2-device=auto");
  CHECK_FALSE(parse_volume_options("cipher=aes-xts-plain64,size=256", false)->sealed());

  const std::string sealed = "v /dev/vdb /etc/lbscrypt/v.cred cipher=aes-xts-plain64,size=256,";
  CHECK_THAT(refusal(sealed + "tpm2-device=auto,hash=sha256"),
             Catch::Contains("hash=sha256 with a key file has two meanings"));
  CHECK_THAT(refusal(sealed + "tpm2-device=auto,x-lbscrypt.sealed=yes"),
             Catch::Contains("x-lbscrypt.sealed=yes: give key"));
  CHECK_THAT(refusal(sealed + "tpm2-device=/dev/../etc/x"),
             Catch::Contains("is not a TPM2: give auto"));
  CHECK_THAT(refusal(sealed + "tpm2-device=auto,keyfile-size=32"),
             Catch::Contains("a sealed credential holds the key alone"));
  CHECK_THAT(refusal("v /dev/vdb - cipher=aes-xts-plain64,size=256,hash=sha256,tpm2-device=auto"),
             Catch::Contains("tpm2-device= unseals the credential the key field names, and the "
                             "line asks for a passphrase"));
  CHECK(refusal("v /dev/vdb /dev/sdb1 cipher=aes-xts-plain64,size=256,tpm2-device=auto") ==
        "/etc/lbscrypttab:1: v: tpm2-device= unseals the credential file the key field names, "
        "and '/dev/sdb1' is a device: give the file lbscrypt seal wrote (/etc/lbscrypt/v.cred)");
}
