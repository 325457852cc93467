// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "lbscrypt/crypttab.hpp"

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
  CHECK(refusal("\n\n" + base + "x-systemd.device-timeout=10")
            .starts_with("/etc/lbscrypttab:3: v: unknown option 'x-systemd.device-timeout'"));
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
  CHECK_THAT(refusal(base + "timeout=5days"), Catch::Contains("timeout=5days is not a time"));
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
