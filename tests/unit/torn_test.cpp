// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <string>

#include "fakes.hpp"
#include "lbscrypt/torn.hpp"

using lbscrypt::MappingPlace;
using lbscrypt::WriteGeometry;

namespace {

// A disk with 4096-byte physical blocks and no atomic writes.
WriteGeometry plain_disk() {
  WriteGeometry g;
  g.physical_block = 4096;
  return g;
}

// A disk with 512-byte blocks that writes 4 KiB to 1 MiB atomically (scsi_debug atomic_wr=1).
WriteGeometry atomic_disk() {
  WriteGeometry g;
  g.physical_block = 512;
  g.atomic_unit_min = 4096;
  g.atomic_unit_max = 1048576;
  g.atomic_max = 1048576;
  g.atomic_boundary = 1048576;
  g.segment_bytes = 128ULL * 65536;
  return g;
}

MappingPlace place(std::uint64_t sector_size, std::uint64_t offset = 0) {
  MappingPlace p;
  p.device = "/dev/sdb";
  p.sector_size = sector_size;
  p.offset = offset;
  return p;
}

}  // namespace

TEST_CASE("torn: a 64K sector over 4096-byte blocks without atomic writes can tear", "[torn]") {
  const auto torn = lbscrypt::torn_sector(plain_disk(), place(65536));
  REQUIRE(torn.has_value());
  CHECK(torn->sector_size == 65536);
  CHECK(torn->physical_block == 4096);
  CHECK(torn->atomic_unit == 0);
  CHECK(torn->but.empty());
  CHECK(lbscrypt::torn_sector_warning(*torn, "/dev/sdb") ==
        "warning: a power failure can tear a 65536-byte sector on /dev/sdb: its physical block "
        "is 4096 bytes and it has no atomic writes "
        "(dm-crypt-lbs(4), \"Torn writes\")");
  // 8192 over the same disk: larger than its block, so it can tear too
  CHECK(lbscrypt::torn_sector(plain_disk(), place(8192)).has_value());
}

TEST_CASE("torn: no warning where the sector is no larger than the physical block", "[torn]") {
  CHECK_FALSE(lbscrypt::torn_sector(plain_disk(), place(4096)).has_value());
  CHECK_FALSE(lbscrypt::torn_sector(plain_disk(), place(512)).has_value());
  // a ramdisk on a 64K-page kernel: its physical block is the page
  WriteGeometry ram;
  ram.physical_block = 65536;
  CHECK_FALSE(lbscrypt::torn_sector(ram, place(65536)).has_value());
}

TEST_CASE("torn: none where the atomic unit takes the sector and the start is aligned", "[torn]") {
  CHECK_FALSE(lbscrypt::torn_sector(atomic_disk(), place(65536)).has_value());
  CHECK_FALSE(lbscrypt::torn_sector(atomic_disk(), place(4096)).has_value());
  // 128 sectors = one 64K sector in: aligned
  CHECK_FALSE(lbscrypt::torn_sector(atomic_disk(), place(65536, 128)).has_value());
  // a partition at 1 MiB, offset 0: aligned on the disk
  WriteGeometry partition = atomic_disk();
  partition.start = 2048;
  CHECK_FALSE(lbscrypt::torn_sector(partition, place(65536)).has_value());
  // the unit exactly one sector, at the boundary
  WriteGeometry exact = atomic_disk();
  exact.atomic_unit_max = 65536;
  exact.atomic_boundary = 65536;
  CHECK_FALSE(lbscrypt::torn_sector(exact, place(65536)).has_value());
}

TEST_CASE("torn: a unit that takes the sector but a start that is not aligned", "[torn]") {
  // --offset 8 (4096 bytes): each 64K sector straddles two of the disk's 64K blocks
  const auto by_offset = lbscrypt::torn_sector(atomic_disk(), place(65536, 8));
  REQUIRE(by_offset.has_value());
  CHECK(by_offset->atomic_unit == 1048576);
  CHECK(lbscrypt::torn_sector_warning(*by_offset, "/dev/sdb") ==
        "warning: a power failure can tear a 65536-byte sector on /dev/sdb: its physical block "
        "is 512 bytes and it writes at most 1048576 bytes atomically, but the mapping starts at "
        "byte 4096 of the disk, not a multiple of 65536 (dm-crypt-lbs(4), \"Torn "
        "writes\")");
  // a partition that starts at sector 63 (the old DOS layout), offset 0
  WriteGeometry partition = atomic_disk();
  partition.start = 63;
  const auto by_partition = lbscrypt::torn_sector(partition, place(65536));
  REQUIRE(by_partition.has_value());
  CHECK_THAT(by_partition->but, Catch::Contains("byte 32256 of the disk"));
  // the partition's start and the offset together make it aligned again
  CHECK_FALSE(lbscrypt::torn_sector(partition, place(65536, 65)).has_value());
}

TEST_CASE("torn: a smallest atomic write above the sector, and limits below it", "[torn]") {
  WriteGeometry large_min = atomic_disk();
  large_min.atomic_unit_min = 131072;
  const auto torn = lbscrypt::torn_sector(large_min, place(65536));
  REQUIRE(torn.has_value());
  CHECK(torn->but == "none smaller than 131072 bytes");
  CHECK_THAT(lbscrypt::torn_sector_warning(*torn, "/dev/sdb"),
             Catch::Contains("it writes at most 1048576 bytes atomically, but none smaller than "
                             "131072 bytes"));

  // each limit alone that falls below the sector leaves it unprotected, and is the unit told
  WriteGeometry boundary = atomic_disk();
  boundary.atomic_boundary = 32768;
  WriteGeometry max_bytes = atomic_disk();
  max_bytes.atomic_max = 16384;
  WriteGeometry segments = atomic_disk();
  segments.segment_bytes = 8192;
  WriteGeometry no_min = atomic_disk();  // no smallest unit: no atomic writes
  no_min.atomic_unit_min = 0;
  for (const auto &[g, unit] : {std::pair{boundary, 32768U}, std::pair{max_bytes, 16384U},
                                std::pair{segments, 8192U}, std::pair{no_min, 0U}}) {
    const auto t = lbscrypt::torn_sector(g, place(65536));
    REQUIRE(t.has_value());
    CHECK(t->atomic_unit == unit);
    CHECK(t->but.empty());
  }
}

TEST_CASE("torn: no atomic writes to a zoned device or with integrity metadata", "[torn]") {
  WriteGeometry zoned = atomic_disk();
  zoned.zoned = true;
  const auto z = lbscrypt::torn_sector(zoned, place(65536));
  REQUIRE(z.has_value());
  CHECK_THAT(z->but, Catch::Contains("zoned"));
  MappingPlace integrity = place(65536);
  integrity.integrity = true;
  const auto i = lbscrypt::torn_sector(atomic_disk(), integrity);
  REQUIRE(i.has_value());
  CHECK_THAT(i->but, Catch::Contains("integrity metadata"));
}

TEST_CASE("torn: the warning for a place asks the devices, and is none for an unknown one",
          "[torn]") {
  lbscrypt::test::FakeBlockDevices devices;
  lbscrypt::Environment env;
  env.devices = &devices;
  CHECK_FALSE(lbscrypt::torn_sector_warning(place(65536), env).has_value());
  devices.geometries["/dev/sdb"] = plain_disk();
  const auto warning = lbscrypt::torn_sector_warning(place(65536), env);
  REQUIRE(warning.has_value());
  CHECK_THAT(*warning, Catch::StartsWith("warning: a power failure can tear a 65536-byte sector "
                                         "on /dev/sdb: its physical block is 4096 bytes"));
  devices.geometries["/dev/sdb"] = atomic_disk();
  CHECK_FALSE(lbscrypt::torn_sector_warning(place(65536), env).has_value());
}
