// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fake_sysfs.hpp"
#include "lbscrypt/reencrypt/plan.hpp"
#include "temp_dir.hpp"

using lbscrypt::DevNumber;
using lbscrypt::Errc;
using lbscrypt::FilesystemProbe;
using lbscrypt::PlanFacts;

namespace {

constexpr std::uint64_t kMiB = 1024ULL * 1024;
constexpr std::uint64_t kExt4Magic = 0xef53;

// /dev/sdb (8:16, its partition sdb1 8:17), 64 MiB, at 4096 with an ext4 of 64 KiB blocks,
// going to 65536 on a 64K-page kernel with dm-crypt-lbs; the state on another disk (8:33).
PlanFacts good_facts() {
  PlanFacts f;
  f.device = "/dev/sdb";
  f.device_bytes = 64 * kMiB;
  f.old_side = {"aes-xts-plain64", 64, 4096, false};
  f.new_side = {"aes-xts-plain64", 64, 65536, true};
  f.known.caps.version = lbscrypt::TargetVersion{1, 30, 0};
  f.known.caps.page_size = 65536;
  f.family.device = DevNumber{8, 16};
  f.family.related.push_back({DevNumber{8, 17}, "sdb1", "a partition of it"});
  f.state.state = "/var/lib/lbscrypt/sdb.state";
  f.state.fs_magic = kExt4Magic;
  f.state.fs_device = DevNumber{8, 33};
  f.probe = FilesystemProbe{"ext4", 65536};
  return f;
}

std::string refusal(const PlanFacts &f, Errc code) {
  const auto plan = lbscrypt::plan_reencrypt(f);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code == code);
  return plan.error().message;
}

// Hands out what a test put in (the real one is libblkid).
class FakeProber final : public lbscrypt::FilesystemProber {
 public:
  std::map<std::string, std::optional<FilesystemProbe>> found;
  lbscrypt::Result<std::optional<FilesystemProbe>> probe(const std::string &path) override {
    const auto it = found.find(path);
    if (it == found.end()) {
      return lbscrypt::make_error(Errc::device, "cannot open " + path);
    }
    return it->second;
  }
};

}  // namespace

TEST_CASE("plan: the accepted case", "[reencrypt][plan]") {
  const auto plan = lbscrypt::plan_reencrypt(good_facts());
  REQUIRE(plan.ok());
  CHECK(plan->data_bytes == 64 * kMiB);
  CHECK(plan->notes.empty());
  // --offset and --size in 512-byte sectors: 1 MiB in, 32 MiB long
  PlanFacts f = good_facts();
  f.offset = 2048;
  f.skip = 128;
  f.size = 65536;
  REQUIRE(lbscrypt::plan_reencrypt(f).ok());
  CHECK(lbscrypt::plan_reencrypt(f)->data_bytes == 32 * kMiB);
  // a plan through the probe interface: the caller hands over what its prober found
  FakeProber prober;
  prober.found["/dev/mapper/lbscrypt-old-1"] = FilesystemProbe{"xfs", 65536};
  const auto probed = prober.probe("/dev/mapper/lbscrypt-old-1");
  REQUIRE(probed.ok());
  f.probe = *probed;
  CHECK(lbscrypt::plan_reencrypt(f).ok());
}

TEST_CASE("plan: a sector size the running target or the page size does not allow",
          "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.known.caps.page_size = 4096;
  CHECK(refusal(f, Errc::refused) ==
        "the new sector size: sector size 65536 exceeds the page size 4096 of this kernel; use "
        "at most 4096 here");
  f = good_facts();
  f.known.caps.version = lbscrypt::TargetVersion{1, 28, 0};
  CHECK(refusal(f, Errc::refused) ==
        "the new sector size: this kernel's crypt is v1.28.0; sector_size 65536 needs v1.30.0: "
        "load dm-crypt-lbs");
  f = good_facts();
  f.known.target_loaded = false;
  CHECK(refusal(f, Errc::refused) ==
        "the new sector size: no crypt target is loaded; sector size 65536 needs v1.30.0: load "
        "dm-crypt-lbs");
  f = good_facts();
  f.new_side.sector_size = 131072;
  CHECK(refusal(f, Errc::refused) ==
        "the new sector size: sector size 131072 exceeds 65536, the largest logical block the "
        "block layer supports");
  f = good_facts();
  f.new_side.sector_size = 3000;
  CHECK(refusal(f, Errc::invalid_argument) ==
        "the new sector size: sector size 3000 is not a power of two between 512 and 65536");
  f = good_facts();
  f.old_side.sector_size = 1000;
  CHECK(refusal(f, Errc::invalid_argument) ==
        "the volume's sector size: sector size 1000 is not a power of two between 512 and "
        "65536");
  f = good_facts();
  f.new_side.sector_size = 512;
  f.new_side.iv_large_sectors = true;
  CHECK(refusal(f, Errc::invalid_argument) ==
        "the new sector size: iv_large_sectors counts the IV in sector-size units and needs a "
        "sector size above 512");
}

TEST_CASE("plan: offset and skip must be multiples of the new sector", "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.offset = 8;  // 4096 bytes: fine for the volume, not for 65536
  CHECK(refusal(f, Errc::refused) ==
        "--offset 8 is not a multiple of the new sector size 65536 (128 sectors): offset and "
        "skip stay as they are, so they must be; choose a sector size that divides them");
  f = good_facts();
  f.skip = 64;
  CHECK(refusal(f, Errc::refused) ==
        "--skip 64 is not a multiple of the new sector size 65536 (128 sectors): offset and "
        "skip stay as they are, so they must be; choose a sector size that divides them");
  f = good_facts();
  f.skip = 1;  // not even the volume's own
  CHECK_THAT(refusal(f, Errc::refused),
             Catch::StartsWith("--skip 1 is not a multiple of the volume's sector size 4096 (8 "
                               "sectors)"));
}

TEST_CASE("plan: the data must be whole sectors of the larger size", "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.device_bytes = 64 * kMiB + 4096;  // 67112960 = 4096 * 16385
  CHECK(refusal(f, Errc::refused) ==
        "the data on /dev/sdb, 67112960 bytes from --offset 0, is not a multiple of 65536 "
        "bytes, the larger sector size: its last 4096 bytes would be in no whole sector; "
        "shrink what is on it and give --size 131072, or use sector sizes of at most 4096");
  // the larger is the old one when the sector shrinks
  f = good_facts();
  f.old_side.sector_size = 65536;
  f.new_side.sector_size = 4096;
  f.device_bytes = 64 * kMiB + 8192;  // 8192 * 8193
  CHECK_THAT(refusal(f, Errc::refused),
             Catch::Contains("is not a multiple of 65536 bytes, the larger sector size: its last "
                             "8192 bytes") &&
                 Catch::EndsWith("or use sector sizes of at most 8192"));
  f = good_facts();
  f.offset = 131072;  // 64 MiB: the end of the device
  CHECK(refusal(f, Errc::refused) == "--offset 131072 is not inside /dev/sdb (131072 sectors)");
  f = good_facts();
  f.offset = 128;
  f.size = 131072;
  CHECK(refusal(f, Errc::refused) ==
        "--size 131072 exceeds the 130944 sectors of /dev/sdb after --offset 128");
  f = good_facts();
  f.size = 0;  // as cryptsetup: the rest of the device
  CHECK(lbscrypt::plan_reencrypt(f)->data_bytes == 64 * kMiB);
}

TEST_CASE("plan: a device held by anything is refused", "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.user = "device-mapper mapping vol (dm-0)";
  CHECK(refusal(f, Errc::busy) ==
        "/dev/sdb is in use (device-mapper mapping vol (dm-0)): reencrypt converts a closed "
        "volume; close its mapping and whatever holds it first");
}

TEST_CASE("plan: the state file on the device, a device sharing it, or a tmpfs",
          "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.state.fs_device = DevNumber{8, 16};
  CHECK(refusal(f, Errc::refused) ==
        "the state file /var/lib/lbscrypt/sdb.state is on /dev/sdb itself, which the run "
        "overwrites: put it on another disk (a plain volume has no room of its own)");
  f.state.fs_device = DevNumber{8, 17};
  CHECK(refusal(f, Errc::refused) ==
        "the state file /var/lib/lbscrypt/sdb.state is on sdb1 (8:17), which shares its storage "
        "with /dev/sdb (a partition of it): put it on another disk");
  f = good_facts();
  f.state.fs_magic = 0x01021994;  // TMPFS_MAGIC (linux/magic.h)
  CHECK(refusal(f, Errc::refused) ==
        "the state file /var/lib/lbscrypt/sdb.state is on a tmpfs, which a reboot empties: a "
        "power cut mid-way would lose the run's position and its journal; put it on a disk "
        "filesystem that is not on /dev/sdb");
  f.state.fs_magic = 0x858458f6;  // RAMFS_MAGIC
  CHECK_THAT(refusal(f, Errc::refused), Catch::Contains("is on a ramfs, which a reboot empties"));
  // a regular file (no device number): any filesystem but a tmpfs
  f = good_facts();
  f.family = {};
  f.state.fs_device = DevNumber{8, 16};
  CHECK(lbscrypt::plan_reencrypt(f).ok());
}

TEST_CASE("plan: an x-initrd.attach volume is refused", "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.initrd_volume = "home";
  CHECK(refusal(f, Errc::refused) ==
        "/dev/sdb is home in lbscrypttab, an x-initrd.attach volume: the initramfs opens it at "
        "boot and cannot resume a run, so a reboot mid-way would boot without it; drop "
        "x-initrd.attach from its line and run update-initramfs for the run, or reencrypt it "
        "from another system");
}

TEST_CASE("plan: an old key nothing shows right needs --force", "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.probe.reset();
  f.new_side.sector_size = 4096;  // a key change only: the write unit is no question
  CHECK(refusal(f, Errc::key) ==
        "nothing shows the old key of /dev/sdb is right: blkid finds no signature through it "
        "and no check= confirmed it, and a wrong old key turns the whole volume into noise; "
        "check the key and parameters (open it read-only and look), or give --force for a "
        "volume of raw data");
  f.old_key_checked = true;  // lbscrypttab's check= passed
  REQUIRE(lbscrypt::plan_reencrypt(f).ok());
  CHECK(lbscrypt::plan_reencrypt(f)->notes.empty());
  f.old_key_checked = false;
  f.force = true;
  const auto forced = lbscrypt::plan_reencrypt(f);
  REQUIRE(forced.ok());
  CHECK(forced->notes == std::vector<std::string>{
                             "warning: --force: nothing shows the old key of /dev/sdb is right "
                             "(no signature through it, no check=): a wrong one turns all of it "
                             "into noise"});
  // any signature shows it: swap has no BLOCK_SIZE, but random bytes have no swap header
  f = good_facts();
  f.probe = FilesystemProbe{"swap", std::nullopt};
  f.new_side.sector_size = 4096;
  CHECK(lbscrypt::plan_reencrypt(f).ok());
}

TEST_CASE("plan: blkid's BLOCK_SIZE below the new sector, or unknown while it grows",
          "[reencrypt][plan]") {
  PlanFacts f = good_facts();
  f.probe = FilesystemProbe{"ext4", 4096};
  CHECK(refusal(f, Errc::refused) ==
        "the ext4 filesystem on /dev/sdb writes in units of 4096 bytes (blkid's BLOCK_SIZE), "
        "below the new sector size 65536: it could not write once the sector grows; choose a "
        "new sector size of at most 4096, or recreate the filesystem with blocks (XFS: sectors) "
        "of at least 65536 bytes");
  f.force = true;  // --force does not make a filesystem write larger units
  CHECK(refusal(f, Errc::refused) ==
        "the ext4 filesystem on /dev/sdb writes in units of 4096 bytes (blkid's BLOCK_SIZE), "
        "below the new sector size 65536: it could not write once the sector grows; choose a "
        "new sector size of at most 4096, or recreate the filesystem with blocks (XFS: sectors) "
        "of at least 65536 bytes");
  f = good_facts();
  f.probe = FilesystemProbe{"LVM2_member", std::nullopt};
  CHECK(refusal(f, Errc::refused) ==
        "the smallest write to /dev/sdb is unknown (blkid finds LVM2_member, which has no "
        "BLOCK_SIZE), as for swap, an LVM PV or a database on the raw device: a write below "
        "the new sector size 65536 would fail; give --force if everything on it writes whole "
        "65536-byte units");
  f.force = true;
  const auto forced = lbscrypt::plan_reencrypt(f);
  REQUIRE(forced.ok());
  CHECK(forced->notes ==
        std::vector<std::string>{"warning: --force: the smallest write to /dev/sdb is unknown "
                                 "(blkid finds LVM2_member, which has no BLOCK_SIZE); writes "
                                 "below 65536 bytes will fail"});
  // nothing found, the key shown by check=: the write unit is still unknown
  f = good_facts();
  f.probe.reset();
  f.old_key_checked = true;
  CHECK_THAT(refusal(f, Errc::refused),
             Catch::StartsWith("the smallest write to /dev/sdb is unknown (blkid finds no "
                               "signature), as for swap"));
  // a sector that shrinks or stays never asks: every write is whole old sectors already
  f = good_facts();
  f.old_side.sector_size = 4096;
  f.new_side.sector_size = 512;
  f.new_side.iv_large_sectors = false;
  f.probe = FilesystemProbe{"ext4", 4096};
  CHECK(lbscrypt::plan_reencrypt(f).ok());
  f.probe = FilesystemProbe{"swap", std::nullopt};
  CHECK(lbscrypt::plan_reencrypt(f).ok());
}

TEST_CASE("plan: the devices sharing storage, from sysfs", "[reencrypt][plan]") {
  const lbscrypt::test::FakeSysfs sys;
  using Pair = std::pair<std::string, std::string>;
  const auto relatives = [&](DevNumber n) {
    const auto family = lbscrypt::device_family(sys.root, n);
    CHECK(family.device == n);
    std::vector<Pair> out;
    for (const auto &r : family.related) {
      out.emplace_back(r.name, r.relation);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  // a partition: its disk and what is built on it, never its sibling sdb2
  CHECK(relatives({8, 17}) ==
        std::vector<Pair>{{"dm-0", "a device built on it"}, {"sdb", "its disk"}});
  // the disk: its partitions and what is built on them
  CHECK(relatives({8, 16}) == std::vector<Pair>{{"dm-0", "a device built on it"},
                                                {"sdb1", "a partition of it"},
                                                {"sdb2", "a partition of it"}});
  // a mapping: what it is built on, down to the disk
  CHECK(relatives({253, 0}) ==
        std::vector<Pair>{{"sdb", "a device it is built on"}, {"sdb1", "a device it is built on"}});
  CHECK(relatives({7, 0}).empty());
  CHECK(relatives({9, 9}).empty());  // not in sysfs
  const auto family = lbscrypt::device_family(sys.root, DevNumber{8, 17});
  const auto disk = std::find_if(family.related.begin(), family.related.end(),
                                 [](const auto &r) { return r.name == "sdb"; });
  REQUIRE(disk != family.related.end());
  CHECK(disk->number == DevNumber{8, 16});
}

TEST_CASE("plan: the state file's place from stat and statfs", "[reencrypt][plan]") {
  const lbscrypt::test::TempDir dir;
  const auto place = lbscrypt::state_place(dir.path / "run.state");
  REQUIRE(place.ok());
  struct stat st {};
  REQUIRE(stat(dir.path.c_str(), &st) == 0);
  CHECK(place->fs_device == DevNumber{major(st.st_dev), minor(st.st_dev)});
  CHECK(place->state == (dir.path / "run.state").string());
  CHECK(place->fs_magic != 0);
  const auto missing = lbscrypt::state_place(dir.path / "absent" / "run.state");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "the state file's directory " + (dir.path / "absent").string() +
                                       " does not exist: make it on a filesystem other than the "
                                       "volume's");
  // /dev/shm is a tmpfs wherever glibc's shm_open works
  if (std::filesystem::is_directory("/dev/shm")) {
    const auto shm = lbscrypt::state_place("/dev/shm/lbscrypt-test.state");
    REQUIRE(shm.ok());
    CHECK(shm->fs_magic == lbscrypt::kTmpfsMagic);
  }
  // a regular file as the device: no number, no relatives
  std::ofstream(dir.path / "volume.img") << "x";
  const auto file_family = lbscrypt::device_family_of((dir.path / "volume.img").string());
  REQUIRE(file_family.ok());
  CHECK_FALSE(file_family->device.has_value());
  CHECK(file_family->related.empty());
}

TEST_CASE("plan: libblkid finds an ext4 superblock and its BLOCK_SIZE, nothing in zeros",
          "[reencrypt][plan][blkid]") {
  // tests/unit/data/ext4-4096-superblock.bin: bytes 1024..2047 of a 64 MiB image from
  // mkfs.ext4 -b 4096 (e2fsprogs 1.47, Debian 12); blkid -p reports TYPE=ext4 BLOCK_SIZE=4096
  // for it laid at offset 1024 of a 1 MiB file.
  const lbscrypt::test::TempDir dir;
  const auto image = dir.path / "ext4.img";
  {
    std::ifstream in(std::string(LBSCRYPT_TEST_DATA) + "/ext4-4096-superblock.bin",
                     std::ios::binary);
    REQUIRE(in);
    std::ostringstream text;
    text << in.rdbuf();
    const std::string superblock = text.str();
    REQUIRE(superblock.size() == 1024);
    std::string bytes(kMiB, '\0');
    bytes.replace(1024, superblock.size(), superblock);
    std::ofstream(image, std::ios::binary) << bytes;
  }
  const auto prober = lbscrypt::make_blkid_prober();
  const auto found = prober->probe(image.string());
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->type == "ext4");
  CHECK((*found)->block_size == 4096U);
  const auto zeros = dir.path / "zeros.img";
  std::ofstream(zeros, std::ios::binary) << std::string(kMiB, '\0');
  const auto nothing = prober->probe(zeros.string());
  REQUIRE(nothing.ok());
  CHECK_FALSE(nothing->has_value());
  const auto missing = prober->probe((dir.path / "absent").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::device);
  CHECK_THAT(missing.error().message,
             Catch::StartsWith("cannot open " + (dir.path / "absent").string() +
                               " to look for a filesystem: "));
}
