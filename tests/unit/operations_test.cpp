// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <chrono>

#include "fakes.hpp"
#include "lbscrypt/operations.hpp"

using lbscrypt::Environment;
using lbscrypt::Errc;
using lbscrypt::MappingRequest;
using lbscrypt::MappingType;
using lbscrypt::SecretBuffer;
using lbscrypt::TargetVersion;
using lbscrypt::test::FakeBlockDevices;
using lbscrypt::test::FakeKernel;

namespace {

constexpr std::uint64_t kMiB = 1024ULL * 1024;

SecretBuffer test_key() { return {"0123456789abcdef0123456789abcdef", 32}; }

// The table open would load: prepare_table() and the key.
lbscrypt::Result<lbscrypt::CryptTable> keyed_table(const MappingRequest &request,
                                                   const Environment &env) {
  auto table = lbscrypt::prepare_table(request, env);
  if (table) {
    table->key = test_key();
  }
  return table;
}

struct Fixture {
  FakeKernel kernel;
  FakeBlockDevices devices;
  Environment env;
  MappingRequest request;

  Fixture() {
    devices.sizes["/dev/ram0"] = 64 * kMiB;
    env.kernel = &kernel;
    env.devices = &devices;
    request.device = "/dev/ram0";
  }

  static SecretBuffer key() { return test_key(); }

  [[nodiscard]] std::string table_line() const {
    const auto t = keyed_table(request, env);
    REQUIRE(t.ok());
    return std::string(lbscrypt::format_table_line(*t).view());
  }

  [[nodiscard]] lbscrypt::Error refusal() const {
    const auto t = keyed_table(request, env);
    REQUIRE_FALSE(t.ok());
    CHECK(kernel.creates == 0);  // nothing touched
    return t.error();
  }
};

}  // namespace

TEST_CASE("a 64K table on a v1.30.0 kernel with 64K pages", "[operations]") {
  Fixture f;
  f.request.sector_size = 65536;
  f.request.flags.iv_large_sectors = true;
  CHECK(f.table_line() ==
        "0 131072 crypt aes-xts-plain64 30313233343536373839616263646566"
        "30313233343536373839616263646566 0 /dev/ram0 0 2 sector_size:65536 iv_large_sectors");
}

TEST_CASE("offset, skip, size and flags go where the kernel expects them", "[operations]") {
  Fixture f;
  f.request.sector_size = 4096;
  f.request.offset = 2048;
  f.request.skip = 56;
  f.request.size = 8192;
  f.request.flags.allow_discards = true;
  f.request.flags.no_read_workqueue = true;
  f.request.flags.same_cpu_crypt = true;
  const std::string line = f.table_line();
  CHECK_THAT(line, Catch::StartsWith("0 8192 crypt aes-xts-plain64 "));
  CHECK_THAT(line, Catch::EndsWith(" 56 /dev/ram0 2048 4 allow_discards same_cpu_crypt "
                                   "no_read_workqueue sector_size:4096"));
}

TEST_CASE("open and attach load the in-tree crypt target when dm-crypt-lbs is not installed",
          "[operations]") {
  Fixture f;
  f.kernel.version.reset();  // no crypt target registered yet
  f.request.sector_size = 65536;
  SECTION("a kernel whose own dm_crypt is 1.30.0: loaded, judged, the 64K table made") {
    f.kernel.loadable = TargetVersion{1, 30, 0};
    f.env.load_target = true;
    CHECK_THAT(f.table_line(), Catch::EndsWith(" sector_size:65536"));
    CHECK(f.kernel.loads == 1);
  }
  SECTION("an in-tree dm_crypt below 1.30.0: loaded, then refused by its version") {
    f.kernel.loadable = TargetVersion{1, 28, 0};
    f.env.load_target = true;
    CHECK(f.refusal().message ==
          "this kernel's crypt is v1.28.0; sector_size 65536 needs v1.30.0: load "
          "dm-crypt-lbs");
    CHECK(f.kernel.loads == 1);
  }
  SECTION("no module provides crypt: the refusal of an unloaded target") {
    f.env.load_target = true;
    CHECK_THAT(f.refusal().message, Catch::Contains("no crypt target is loaded"));
    CHECK(f.kernel.loads == 1);
  }
  SECTION("dm-crypt-lbs installed: never the in-tree module in its place") {
    f.kernel.loadable = TargetVersion{1, 28, 0};
    f.kernel.ours_installed = true;
    f.env.load_target = true;
    CHECK_THAT(f.refusal().message, Catch::Contains("load dm-crypt-lbs"));
    CHECK(f.kernel.loads == 0);
  }
  SECTION("table and check (load_target off) and sizes up to 4096 load nothing") {
    f.kernel.loadable = TargetVersion{1, 30, 0};
    CHECK_THAT(f.refusal().message, Catch::Contains("no crypt target is loaded"));
    f.env.load_target = true;
    f.request.sector_size = 4096;
    CHECK_THAT(f.table_line(), Catch::EndsWith(" sector_size:4096"));
    CHECK(f.kernel.loads == 0);
  }
  SECTION("another target name (crypt_lbs beside stock) is never loaded by name") {
    f.kernel.loadable = TargetVersion{1, 30, 0};
    f.env.load_target = true;
    f.env.target_type = "crypt_lbs";
    CHECK_THAT(f.refusal().message, Catch::Contains("no crypt target is loaded"));
    CHECK(f.kernel.loads == 0);
  }
}

TEST_CASE("refusals: gate, page size, alignment, LUKS", "[operations]") {
  Fixture f;
  SECTION("stock kernel") {
    f.kernel.version = TargetVersion{1, 28, 0};
    f.request.sector_size = 65536;
    const auto e = f.refusal();
    CHECK(e.code == Errc::refused);
    CHECK(e.message ==
          "this kernel's crypt is v1.28.0; sector_size 65536 needs v1.30.0: load "
          "dm-crypt-lbs");
  }
  SECTION("no crypt target loaded yet") {
    f.kernel.version.reset();
    f.request.sector_size = 16384;
    CHECK_THAT(f.refusal().message, Catch::Contains("no crypt target is loaded"));
    f.request.sector_size = 4096;  // autoloading any crypt gives 4096
    CHECK_THAT(f.table_line(), Catch::EndsWith("1 sector_size:4096"));
  }
  SECTION("4K pages") {
    f.kernel.page = 4096;
    f.request.sector_size = 8192;
    CHECK_THAT(f.refusal().message, Catch::Contains("exceeds the page size 4096"));
  }
  SECTION("not a power of two") {
    f.request.sector_size = 3000;
    CHECK(f.refusal().code == Errc::invalid_argument);
  }
  SECTION("size not a multiple of the sector size") {
    f.request.sector_size = 65536;
    f.request.size = 136;
    const auto e = f.refusal();
    CHECK(e.code == Errc::refused);
    CHECK_THAT(e.message, Catch::Contains("use --size 128"));
  }
  SECTION("device size not a multiple of the sector size") {
    f.devices.sizes["/dev/ram0"] = 64 * kMiB + 4096;
    f.request.sector_size = 65536;
    CHECK_THAT(f.refusal().message, Catch::Contains("not a multiple of sector size 65536"));
  }
  SECTION("offset not a multiple of the sector size") {
    f.request.sector_size = 65536;
    f.request.offset = 8;
    f.request.size = 128;
    CHECK_THAT(f.refusal().message, Catch::Contains("--offset 8 is not a multiple"));
  }
  SECTION("offset past the end") {
    f.request.offset = 64ULL * 2048;
    CHECK_THAT(f.refusal().message, Catch::Contains("is not inside device"));
  }
  SECTION("size past the end") {
    f.request.size = 64 * 2048 + 1;
    CHECK_THAT(f.refusal().message, Catch::Contains("exceeds the 131072 sectors"));
  }
  SECTION("LUKS header: above 4096 refused whatever the kernel") {
    f.devices.luks["/dev/ram0"] = true;
    f.request.sector_size = 8192;
    const auto e = f.refusal();
    CHECK(e.code == Errc::luks_refused);
    CHECK_THAT(e.message, Catch::Contains("LUKS header"));
    f.request.sector_size = 4096;
    CHECK_THAT(f.table_line(), Catch::EndsWith("sector_size:4096"));
  }
  SECTION("LUKS type") {
    f.request.type = MappingType::luks;
    f.request.sector_size = 8192;
    CHECK(f.refusal().code == Errc::luks_refused);
  }
  SECTION("missing device without --size") {
    f.request.device = "/dev/absent";
    CHECK(f.refusal().code == Errc::device);
  }
  SECTION("bad cipher") {
    f.request.cipher = "aes";
    CHECK(f.refusal().code == Errc::invalid_argument);
  }
}

TEST_CASE("assumed capabilities need no kernel", "[operations]") {
  FakeBlockDevices devices;
  Environment env;
  env.devices = &devices;
  env.assume_version = TargetVersion{1, 30, 0};
  env.assume_page_size = 16384;
  MappingRequest request;
  request.device = "/dev/vdb";  // not on this machine: --size stands in
  request.size = 64;
  request.sector_size = 16384;
  const auto t = keyed_table(request, env);
  REQUIRE(t.ok());
  CHECK(t->length == 64U);
  request.sector_size = 32768;
  CHECK_FALSE(keyed_table(request, env).ok());
  env.assume_page_size.reset();
  const auto no_kernel = keyed_table(request, env);
  REQUIRE_FALSE(no_kernel.ok());
  CHECK_THAT(no_kernel.error().message, Catch::Contains("--assume-page-size"));
}

TEST_CASE("check reports the limits and a verdict", "[operations]") {
  Fixture f;
  f.kernel.version = TargetVersion{1, 28, 0};
  const auto report = lbscrypt::check(f.env, 65536, MappingType::plain);
  REQUIRE(report.ok());
  CHECK(report->max_plain == 4096U);
  CHECK(report->max_luks == 4096U);
  REQUIRE(report->refusal.has_value());
  CHECK_THAT(report->refusal->message, Catch::Contains("load dm-crypt-lbs"));
  f.kernel.version = TargetVersion{1, 30, 0};
  const auto ok = lbscrypt::check(f.env, 65536, MappingType::plain);
  REQUIRE(ok.ok());
  CHECK(ok->max_plain == 65536U);
  CHECK_FALSE(ok->refusal.has_value());
}

TEST_CASE("open, status and close through the kernel interface", "[operations]") {
  Fixture f;
  f.request.sector_size = 65536;
  const auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  const auto opened = lbscrypt::open_mapping("big", *t, false, f.env);
  REQUIRE(opened.ok());
  CHECK(opened->device.dm_node() == "/dev/dm-0");
  CHECK(f.kernel.creates == 1);

  const auto again = lbscrypt::open_mapping("big", *t, false, f.env);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::exists);
  CHECK(again.error().message == "Device big already exists.");
  CHECK(f.kernel.mappings.at("big").info.uuid == "CRYPT-PLAIN-big");

  const auto status = lbscrypt::mapping_status("big", f.env);
  REQUIRE(status.ok());
  CHECK(status->sector_size == 65536U);
  CHECK(status->key_bits == 256U);
  CHECK(status->target_version == TargetVersion{1, 30, 0});
  CHECK(status->type == "PLAIN");
  CHECK(status->key_location == "dm-crypt");
  // status never carries the key
  const auto &key = std::get<SecretBuffer>(status->table.key);
  CHECK(key == SecretBuffer(32));

  REQUIRE(lbscrypt::close_mapping("big", f.env).ok());
  CHECK(f.kernel.mappings.empty());
  const auto gone = lbscrypt::close_mapping("big", f.env);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == Errc::not_found);
  CHECK(gone.error().message == "Device big is not active.");
}

TEST_CASE("iv_offset must start on an encryption sector", "[operations]") {
  Fixture f;
  f.request.sector_size = 4096;
  f.request.skip = 1;
  const auto e = f.refusal();
  CHECK(e.code == Errc::refused);
  CHECK_THAT(e.message, Catch::Contains("--skip 1") && Catch::Contains("4096"));
  f.request.skip = 8;
  CHECK_THAT(f.table_line(), Catch::Contains(" 8 /dev/ram0 0 1 sector_size:4096"));
}

TEST_CASE("a kernel that refuses an unaligned iv_offset (the fake) is what predict foresees",
          "[operations]") {
  // The fake kernel applies dm-crypt's rule on its own; a table that slips past the
  // library's checks with an unaligned iv_offset is refused there.
  Fixture f;
  lbscrypt::CryptTable t;
  t.length = 8;
  t.cipher = "aes-xts-plain64";
  t.key = Fixture::key();
  t.iv_offset = 3;
  t.device = "/dev/ram0";
  t.options.sector_size_arg = "4096";
  const auto opened = lbscrypt::open_mapping("odd", t, false, f.env);
  REQUIRE_FALSE(opened.ok());
  CHECK_THAT(opened.error().message, Catch::Contains("iv_offset"));
  CHECK(lbscrypt::predict(t, TargetVersion{1, 30, 0}, 65536).outcome == lbscrypt::Outcome::refused);
}

TEST_CASE("without device-mapper a table up to 4096 still works, above it says what to pass",
          "[operations]") {
  Fixture f;
  f.kernel.fail_list = true;
  f.request.sector_size = 4096;
  CHECK_THAT(f.table_line(), Catch::EndsWith(" 0 /dev/ram0 0 1 sector_size:4096"));
  f.request.sector_size = 512;
  CHECK_THAT(f.table_line(), Catch::EndsWith(" 0 /dev/ram0 0"));
  f.request.sector_size = 8192;
  const auto e = f.refusal();
  CHECK(e.code == Errc::kernel);
  CHECK_THAT(e.message, Catch::Contains("pass --assume-version"));
  f.env.assume_version = TargetVersion{1, 30, 0};
  CHECK_THAT(f.table_line(), Catch::EndsWith("sector_size:8192"));
}

TEST_CASE("a regular file gets a loop device, released after the mapping holds it",
          "[operations]") {
  Fixture f;
  f.devices.sizes["/tmp/disk.img"] = kMiB;
  f.devices.regular_files["/tmp/disk.img"] = true;
  f.request.device = "/tmp/disk.img";
  const auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  const auto opened = lbscrypt::open_mapping("img", *t, false, f.env);
  REQUIRE(opened.ok());
  CHECK(opened->loop_file == "/tmp/disk.img");
  CHECK_THAT(std::string(f.kernel.mappings.at("img").line.params.view()),
             Catch::Contains(" /dev/loop0 0"));
  CHECK(f.devices.last_hold.expired());  // our descriptor is closed: autoclear can detach
  f.devices.fail_loop = true;
  const auto failed = lbscrypt::open_mapping("img2", *t, false, f.env);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == Errc::device);
  CHECK_FALSE(f.kernel.mappings.contains("img2"));
}

TEST_CASE("close refuses a mapping in use, status reads type and key location", "[operations]") {
  Fixture f;
  lbscrypt::CreateRequest luks;
  luks.name = "l2";
  luks.uuid = "CRYPT-LUKS2-0123456789abcdef0123456789abcdef-l2";
  luks.length = 8;
  luks.params.append("aes-xts-plain64 :32:logon:cryptsetup:0123 0 7:0 4096");
  REQUIRE(f.kernel.create(luks).ok());
  f.kernel.mappings.at("l2").info.open_count = 1;
  f.kernel.mappings.at("l2").info.suspended = true;
  const auto busy = lbscrypt::close_mapping("l2", f.env);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == Errc::busy);
  CHECK(busy.error().message == "Device l2 is still in use.");
  CHECK(f.kernel.removes == 0);
  const auto st = lbscrypt::mapping_status("l2", f.env);
  REQUIRE(st.ok());
  CHECK(st->type == "LUKS2");
  CHECK(st->key_location == "keyring");
  CHECK(st->key_bits == 256U);
  CHECK(st->device.suspended);
  CHECK(st->device_path == "/dev/loop0");
}

TEST_CASE("names and UUIDs as cryptsetup makes and reads them", "[operations]") {
  CHECK(lbscrypt::mapping_name("/dev/mapper/x") == "x");
  CHECK(lbscrypt::mapping_name("x") == "x");
  CHECK(lbscrypt::mapping_name("/dev/mapper/") == "/dev/mapper/");
  CHECK(lbscrypt::plain_uuid("data") == "CRYPT-PLAIN-data");
  // a 127-byte name (the longest a mapping takes): cut to device-mapper's 128 bytes
  const std::string longest(127, 'v');
  CHECK(lbscrypt::plain_uuid(longest) == "CRYPT-PLAIN-" + longest.substr(0, 116));
  CHECK(lbscrypt::type_from_uuid(lbscrypt::plain_uuid(longest)) == "PLAIN");
  CHECK(lbscrypt::type_from_uuid("CRYPT-PLAIN-data") == "PLAIN");
  CHECK(lbscrypt::type_from_uuid("CRYPT-LUKS1-abc-x") == "LUKS1");
  CHECK(lbscrypt::type_from_uuid("CRYPT-LUKS2-abc-x") == "LUKS2");
  CHECK(lbscrypt::type_from_uuid("") == "n/a");
  CHECK(lbscrypt::type_from_uuid("LVM-abc") == "n/a");
  CHECK(lbscrypt::type_from_uuid("CRYPT-PLAIN") == "n/a");
  CHECK(lbscrypt::type_from_uuid("CRYPT-TEMP-x") == "n/a");
}

TEST_CASE("a mapping that reads back differently is removed again", "[operations]") {
  Fixture f;
  f.request.sector_size = 65536;
  const auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  f.kernel.recorded_override = "4096";
  const auto opened = lbscrypt::open_mapping("big", *t, false, f.env);
  REQUIRE_FALSE(opened.ok());
  CHECK_THAT(opened.error().message, Catch::Contains("removed again"));
  CHECK(f.kernel.mappings.empty());
}

TEST_CASE("close refuses mappings of other targets", "[operations]") {
  Fixture f;
  lbscrypt::CreateRequest linear;
  linear.name = "lin";
  linear.target_type = "linear";
  linear.length = 8;
  linear.params.append("7:0 0");
  REQUIRE(f.kernel.create(linear).ok());
  const auto closed = lbscrypt::close_mapping("lin", f.env);
  REQUIRE_FALSE(closed.ok());
  CHECK_THAT(closed.error().message, Catch::Contains("'linear' mapping"));
  CHECK(f.kernel.removes == 0);
}

TEST_CASE("every word of the line is checked before anything is asked", "[operations]") {
  Fixture f;
  SECTION("a device path with a space") {
    f.devices.sizes["/dev/a b"] = 64 * kMiB;
    f.request.device = "/dev/a b";
    const auto e = f.refusal();
    CHECK(e.code == Errc::invalid_argument);
    CHECK_THAT(e.message, Catch::StartsWith("device '/dev/a b' contains a space"));
  }
  SECTION("a device path with a newline (a second table line)") {
    f.request.device = "/dev/ram0\n0 8 linear /dev/sda";
    f.request.size = 8;
    CHECK_THAT(f.refusal().message, Catch::Contains("line break"));
  }
  SECTION("a cipher with a second word") {
    f.request.cipher = "aes-xts-plain64 extra";
    const auto e = f.refusal();
    CHECK(e.code == Errc::invalid_argument);
    CHECK_THAT(e.message, Catch::StartsWith("--cipher 'aes-xts-plain64 extra' contains a space"));
  }
  SECTION("an empty or malformed target") {
    f.env.target_type = "";
    CHECK_THAT(f.refusal().message, Catch::StartsWith("--target ''"));
    f.env.target_type = "crypt x";
    CHECK_THAT(f.refusal().message, Catch::StartsWith("--target 'crypt x'"));
  }
}

TEST_CASE("a --size does not skip the device checks", "[operations]") {
  Fixture f;
  f.request.size = 8;
  SECTION("a character device such as /dev/null") {
    f.devices.kinds["/dev/null"] = lbscrypt::PathKind::character_device;
    f.request.device = "/dev/null";
    const auto e = f.refusal();
    CHECK(e.code == Errc::device);
    CHECK(e.message ==
          "/dev/null is a character device, not a block device: dm-crypt needs a "
          "block device, whatever --size says");
  }
  SECTION("a directory") {
    f.devices.kinds["/tmp"] = lbscrypt::PathKind::directory;
    f.request.device = "/tmp";
    CHECK_THAT(f.refusal().message, Catch::StartsWith("/tmp is a directory, not a block device"));
  }
  SECTION("a path that is not here, for this machine") {
    f.request.device = "/dev/absent";
    const auto e = f.refusal();
    CHECK(e.code == Errc::device);
    CHECK_THAT(e.message, Catch::StartsWith("Device /dev/absent does not exist") &&
                              Catch::Contains("--assume-version"));
  }
  SECTION("larger than the device, also for a table for another machine") {
    f.request.size = 64 * kMiB / 512 + 8;
    CHECK_THAT(f.refusal().message, Catch::Contains("exceeds"));
    f.env.assume_version = TargetVersion{1, 30, 0};
    CHECK_THAT(f.refusal().message, Catch::Contains("exceeds"));
  }
  SECTION("a character device, also for a table for another machine") {
    f.devices.kinds["/dev/null"] = lbscrypt::PathKind::character_device;
    f.request.device = "/dev/null";
    f.env.assume_version = TargetVersion{1, 30, 0};
    CHECK(f.refusal().code == Errc::device);
  }
}

TEST_CASE("a device in use is not mapped again unless shared", "[operations]") {
  Fixture f;
  const auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  f.devices.users["/dev/ram0"] = "device-mapper mapping first (dm-0)";
  const auto refused = lbscrypt::open_mapping("second", *t, false, f.env);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::busy);
  CHECK(refused.error().message ==
        "Cannot use device /dev/ram0 which is in use (held by device-mapper mapping first "
        "(dm-0)): close that first, or give --shared to map it a second time");
  CHECK(f.kernel.creates == 0);
  const auto shared = lbscrypt::open_mapping("second", *t, false, f.env, true);
  REQUIRE(shared.ok());
  CHECK(f.kernel.creates == 1);
}

TEST_CASE("close retries a brief EBUSY, then says the device is in use", "[operations]") {
  Fixture f;
  f.request.sector_size = 4096;
  const auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  REQUIRE(lbscrypt::open_mapping("b", *t, false, f.env).ok());
  const lbscrypt::CloseRetry quick{3, std::chrono::milliseconds(1)};
  f.kernel.busy_removes = 2;  // udev's probe lets go after two tries
  REQUIRE(lbscrypt::close_mapping("b", f.env, quick).ok());
  CHECK(f.kernel.removes == 3);
  CHECK(f.kernel.mappings.empty());

  REQUIRE(lbscrypt::open_mapping("b", *t, false, f.env).ok());
  f.kernel.busy_removes = 10;
  const auto busy = lbscrypt::close_mapping("b", f.env, quick);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == Errc::busy);
  CHECK(busy.error().message == "Device b is still in use.");
  CHECK(f.kernel.removes == 3 + 4);  // the first try and three more
  CHECK(f.kernel.mappings.size() == 1);
  // Held open (a mount): tried again as well, never removed.
  f.kernel.busy_removes = 0;
  f.kernel.mappings.at("b").info.open_count = 1;
  CHECK(lbscrypt::close_mapping("b", f.env, quick).error().code == Errc::busy);
  CHECK(f.kernel.removes == 7);
}

TEST_CASE("active_as compares every field but the key", "[operations]") {
  Fixture f;
  f.request.sector_size = 4096;
  f.request.flags.allow_discards = true;
  auto t = keyed_table(f.request, f.env);
  REQUIRE(t.ok());
  CHECK_FALSE(lbscrypt::active_as("a", *t, 32, false, f.env)->has_value());
  REQUIRE(lbscrypt::open_mapping("a", *t, false, f.env).ok());
  const auto same = lbscrypt::active_as("a", *t, 32, false, f.env);
  REQUIRE(same.ok());
  CHECK(same->has_value());
  const auto differs = [&](const lbscrypt::CryptTable &other, std::uint32_t key_bytes, bool ro) {
    const auto r = lbscrypt::active_as("a", other, key_bytes, ro, f.env);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::exists);
    return r.error().message;
  };
  CHECK_THAT(differs(*t, 64, false), Catch::Contains("key size 256, not 512"));
  CHECK_THAT(differs(*t, 32, true), Catch::Contains("(read/write)"));
  auto other = *t;
  other.cipher = "aes-cbc-essiv:sha256";
  CHECK_THAT(differs(other, 32, false), Catch::Contains("cipher aes-xts-plain64, not aes-cbc"));
  other = *t;
  other.offset = 8;
  CHECK_THAT(differs(other, 32, false), Catch::Contains("offset 0, not 8"));
  other = *t;
  other.iv_offset = 8;
  CHECK_THAT(differs(other, 32, false), Catch::Contains("skip 0, not 8"));
  other = *t;
  other.device = "/dev/ram1";
  CHECK_THAT(differs(other, 32, false), Catch::Contains("device /dev/ram0, not /dev/ram1"));
  other = *t;
  other.options.allow_discards = false;
  CHECK_THAT(differs(other, 32, false), Catch::Contains("allow_discards set"));
  other = *t;
  other.length -= 8;
  CHECK_THAT(differs(other, 32, false), Catch::Contains("size"));
}
