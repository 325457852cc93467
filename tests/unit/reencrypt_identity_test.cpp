// SPDX-License-Identifier: GPL-2.0-only
// The identity of a reencrypt run's device (reencrypt/identity.hpp), on a sysfs tree made in
// a temporary directory: loop devices whose backing_file names real files there (so stat(2)
// gives them a device and an inode without root), virtio, USB and device-mapper disks.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "lbscrypt/reencrypt/identity.hpp"
#include "temp_dir.hpp"

using lbscrypt::bind_run_device;
using lbscrypt::DeviceFingerprint;
using lbscrypt::DevNumber;
using lbscrypt::Errc;
using lbscrypt::fingerprint_difference;
using lbscrypt::fingerprint_distinguishes;
using lbscrypt::fingerprint_from_json;
using lbscrypt::fingerprint_to_json;
using lbscrypt::read_device_fingerprint;
using lbscrypt::test::TempDir;

namespace {

namespace fs = std::filesystem;

constexpr DevNumber kLoop0{7, 0};
constexpr DevNumber kLoop1{7, 1};
constexpr DevNumber kVda{254, 0};
constexpr DevNumber kVdb{254, 16};
constexpr DevNumber kDm0{253, 0};
constexpr DevNumber kSdb{8, 16};
constexpr DevNumber kSdc{8, 32};
constexpr std::uint64_t kSectors = 2097152;  // 1 GiB

struct IdentitySysfs {
  TempDir dir;
  fs::path root = dir.path / "sys";
  fs::path file_a = dir.path / "a.img";
  fs::path file_b = dir.path / "b.img";

  static void write(const fs::path &file, const std::string &text) {
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
  }

  // A device directory, its dev and size files and its /sys/dev/block link.
  [[nodiscard]] fs::path device(const std::string &where, DevNumber number,
                                std::uint64_t sectors) const {
    auto path = root / "devices" / where;
    const std::string devt = std::to_string(number.major) + ":" + std::to_string(number.minor);
    write(path / "dev", devt + "\n");
    write(path / "size", std::to_string(sectors) + "\n");
    fs::create_directories(root / "dev" / "block");
    fs::create_directory_symlink(path, root / "dev" / "block" / devt);
    return path;
  }

  void attach(const std::string &loop, const fs::path &file, std::uint64_t offset = 0) const {
    const auto where = root / "devices" / "virtual" / "block" / loop / "loop";
    write(where / "backing_file", file.string() + "\n");
    write(where / "offset", std::to_string(offset) + "\n");
    write(where / "sizelimit", "0\n");
  }

  void detach(const std::string &loop) const {
    fs::remove_all(root / "devices" / "virtual" / "block" / loop / "loop");
  }

  IdentitySysfs() {
    write(file_a, "the run's file");
    write(file_b, "another file");
    static_cast<void>(device("virtual/block/loop0", kLoop0, kSectors));
    static_cast<void>(device("virtual/block/loop1", kLoop1, kSectors));
    attach("loop0", file_a);
    const auto vda = device("pci0/virtio1/block/vda", kVda, kSectors);
    write(vda / "serial", "VDA-0001\n");
    const auto vdb = device("pci0/virtio2/block/vdb", kVdb, kSectors);
    write(vdb / "serial", "VDB-0002\n");
    const auto dm0 = device("virtual/block/dm-0", kDm0, kSectors);
    write(dm0 / "dm" / "uuid", "LVM-abc\n");
    write(dm0 / "dm" / "name", "vg-lv\n");
    fs::create_directories(dm0 / "slaves");
    fs::create_directory_symlink(vdb, dm0 / "slaves" / "vdb");
    // Two disks behind one USB bridge, LUN 0 and LUN 1, the bridge's serial shared.
    const auto usb = root / "devices" / "pci0" / "usb1" / "1-1";
    write(usb / "idVendor", "152d\n");
    write(usb / "idProduct", "0578\n");
    write(usb / "serial", "BRIDGE-42\n");
    for (const auto &[lun, number, name] :
         {std::tuple{0, kSdb, "sdb"}, std::tuple{1, kSdc, "sdc"}}) {
      const auto scsi =
          usb / "1-1:1.0" / "host6" / "target6:0:0" / ("6:0:0:" + std::to_string(lun));
      fs::create_directories(scsi);
      const auto disk =
          device(fs::relative(scsi / "block" / name, root / "devices").string(), number, kSectors);
      fs::create_directory_symlink(scsi, disk / "device");
    }
  }

  [[nodiscard]] DeviceFingerprint read(DevNumber number) const {
    auto fp = read_device_fingerprint(root, number);
    REQUIRE(fp);
    return *fp;
  }

  // The device bind_run_device takes for `path`, whose number is `number`.
  [[nodiscard]] std::string bound(const std::string &path, std::optional<DevNumber> number,
                                  const DeviceFingerprint &run) const {
    auto device = bind_run_device(root, path, number, run);
    REQUIRE(device);
    return *device;
  }

  // The refusal bind_run_device gives for `path`, whose number is `number`.
  [[nodiscard]] std::string refusal(const std::string &path, std::optional<DevNumber> number,
                                    const DeviceFingerprint &run) const {
    auto refused = bind_run_device(root, path, number, run);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == Errc::refused);
    CHECK(refused.error().message.find('\n') == std::string::npos);
    return refused.error().message;
  }
};

// "INODE on MAJ:MIN" of a file, as stat(2) gives them (not through the code under test).
std::string inode_text(const fs::path &file) {
  struct stat st {};
  REQUIRE(stat(file.c_str(), &st) == 0);
  return std::to_string(st.st_ino) + " on " + std::to_string(major(st.st_dev)) + ":" +
         std::to_string(minor(st.st_dev));
}

}  // namespace

TEST_CASE("reencrypt identity: a loop device's identity is its file's inode, offset and size limit",
          "[reencrypt]") {
  IdentitySysfs sys;
  const auto fp = sys.read(kLoop0);
  REQUIRE(fp.loop);
  struct stat st {};
  REQUIRE(stat(sys.file_a.c_str(), &st) == 0);
  CHECK(fp.loop->inode == st.st_ino);
  CHECK(fp.loop->file_device == DevNumber{major(st.st_dev), minor(st.st_dev)});
  CHECK(fp.loop->file == sys.file_a.string());
  CHECK(fp.size_bytes == kSectors * 512);
  CHECK(fingerprint_distinguishes(fp));
  // The device as it is: bound to its own path.
  CHECK(sys.bound("/dev/loop0", kLoop0, fp) == "/dev/loop0");
}

TEST_CASE(
    "reencrypt identity: a loop device attached to another file is refused, naming both inodes",
    "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kLoop0);
  sys.attach("loop0", sys.file_b);
  const std::string message = sys.refusal("/dev/loop0", kLoop0, run);
  CHECK(message.starts_with("/dev/loop0 now reads another file ("));
  CHECK(message.find(inode_text(sys.file_b)) != std::string::npos);
  CHECK(message.find("the run's was " + sys.file_a.string() + ", inode " +
                     inode_text(sys.file_a)) != std::string::npos);
  CHECK(message.ends_with(": attach the run's file and resume"));
}

TEST_CASE(
    "reencrypt identity: the run's file attached under another loop number is the run's device",
    "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kLoop0);
  SECTION("the old number now reads another file") {
    sys.attach("loop0", sys.file_b);
    sys.attach("loop1", sys.file_a);
    CHECK(sys.bound("/dev/loop0", kLoop0, run) == "/dev/loop1");
  }
  SECTION("the old number is free") {
    sys.detach("loop0");
    sys.attach("loop1", sys.file_a);
    CHECK(sys.bound("/dev/loop0", kLoop0, run) == "/dev/loop1");
  }
  SECTION("the old node is gone") {
    sys.detach("loop0");
    sys.attach("loop1", sys.file_a);
    CHECK(sys.bound("/dev/loop0", std::nullopt, run) == "/dev/loop1");
  }
  SECTION("the file renamed is the same file") {
    const fs::path renamed = sys.dir.path / "renamed.img";
    fs::rename(sys.file_a, renamed);
    sys.attach("loop0", renamed);
    CHECK(sys.bound("/dev/loop0", kLoop0, run) == "/dev/loop0");
  }
  SECTION("attached twice, neither is taken") {
    sys.attach("loop1", sys.file_a);
    sys.attach("loop0", sys.file_b);
    // loop1 has the run's file; loop0 does not: exactly one, taken.
    CHECK(sys.bound("/dev/loop0", kLoop0, run) == "/dev/loop1");
    static_cast<void>(sys.device("virtual/block/loop2", DevNumber{7, 2}, kSectors));
    sys.attach("loop2", sys.file_a);
    const std::string message = sys.refusal("/dev/loop0", kLoop0, run);
    CHECK(message.starts_with("2 devices are the run's device"));
    CHECK(message.find("/dev/loop1, /dev/loop2") != std::string::npos);
  }
}

TEST_CASE("reencrypt identity: a loop device with the run's file at another offset is refused",
          "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kLoop0);
  sys.attach("loop0", sys.file_a, 1048576);
  const std::string message = sys.refusal("/dev/loop0", kLoop0, run);
  CHECK(message ==
        "/dev/loop0 now reads its file from byte 1048576, the run's from byte 0: attach the "
        "run's file with offset 0 and resume");
}

TEST_CASE("reencrypt identity: a loop device over a deleted file has no identity", "[reencrypt]") {
  IdentitySysfs sys;
  sys.attach("loop1", fs::path(sys.file_a.string() + " (deleted)"));
  auto fp = read_device_fingerprint(sys.root, kLoop1);
  REQUIRE_FALSE(fp);
  CHECK(fp.error().message.find("reads a deleted file") != std::string::npos);
}

TEST_CASE("reencrypt identity: a device whose size changed is refused", "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kVda);
  IdentitySysfs::write(sys.root / "devices" / "pci0" / "virtio1" / "block" / "vda" / "size",
                       std::to_string(kSectors + 8) + "\n");
  const std::string message = sys.refusal("/dev/vda", kVda, run);
  CHECK(
      message.starts_with("/dev/vda is now 1073745920 bytes, the run's device was 1073741824 "
                          "bytes: give the run's device"));
}

TEST_CASE(
    "reencrypt identity: a disk with another serial is refused, the run's disk renamed is found",
    "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kVda);
  REQUIRE(run.serial == "virtio:VDA-0001");
  SECTION("another disk at the run's path") {
    IdentitySysfs::write(sys.root / "devices" / "pci0" / "virtio1" / "block" / "vda" / "serial",
                         "VDX-9999\n");
    CHECK(sys.refusal("/dev/vda", kVda, run) ==
          "/dev/vda has serial 'virtio:VDX-9999' now, the run's disk had 'virtio:VDA-0001': "
          "connect the run's disk and resume");
  }
  SECTION("the run's disk under another name") {
    fs::rename(sys.root / "devices" / "pci0" / "virtio1" / "block" / "vda",
               sys.root / "devices" / "pci0" / "virtio1" / "block" / "vdc");
    fs::remove(sys.root / "dev" / "block" / "254:0");
    fs::create_directory_symlink(sys.root / "devices" / "pci0" / "virtio1" / "block" / "vdc",
                                 sys.root / "dev" / "block" / "254:32");
    CHECK(sys.bound("/dev/vda", std::nullopt, run) == "/dev/vdc");
  }
}

TEST_CASE("reencrypt identity: two disks behind one USB bridge differ by their LUN",
          "[reencrypt]") {
  IdentitySysfs sys;
  const auto sdb = sys.read(kSdb);
  const auto sdc = sys.read(kSdc);
  CHECK(sdb.serial == "usb:152d:0578:BRIDGE-42:lun0");
  CHECK(sdc.serial == "usb:152d:0578:BRIDGE-42:lun1");
  const auto difference = fingerprint_difference(sdb, sdc);
  REQUIRE(difference);
  CHECK(difference->what.find("lun1") != std::string::npos);
}

TEST_CASE("reencrypt identity: a SCSI disk's serial comes from VPD page 0x80", "[reencrypt]") {
  IdentitySysfs sys;
  const auto scsi = sys.root / "devices" / "pci0" / "host0" / "target0:0:0" / "0:0:0:0";
  fs::create_directories(scsi);
  const auto sdd = sys.device("pci0/host0/target0:0:0/0:0:0:0/block/sdd", DevNumber{8, 48}, 8);
  fs::create_directory_symlink(scsi, sdd / "device");
  const std::string page = std::string("\x00\x80\x00\x0a", 4) + "  ZA1B2C3D";
  IdentitySysfs::write(scsi / "vpd_pg80", page);
  CHECK(sys.read(DevNumber{8, 48}).serial == "vpd80:ZA1B2C3D");
}

TEST_CASE("reencrypt identity: a device-mapper device is its uuid and the devices it is built on",
          "[reencrypt]") {
  IdentitySysfs sys;
  const auto run = sys.read(kDm0);
  REQUIRE(run.dm_uuid == "LVM-abc");
  REQUIRE(run.under.size() == 1);
  CHECK(run.under.front().serial == "virtio:VDB-0002");
  const auto dm0 = sys.root / "devices" / "virtual" / "block" / "dm-0";
  SECTION("another uuid") {
    IdentitySysfs::write(dm0 / "dm" / "uuid", "LVM-xyz\n");
    CHECK(sys.refusal("/dev/dm-0", kDm0, run) ==
          "/dev/dm-0 has device-mapper uuid 'LVM-xyz' now, the run's had 'LVM-abc': set up the "
          "run's mapping and resume");
  }
  SECTION("a name without a uuid reused over another disk") {
    IdentitySysfs::write(dm0 / "dm" / "uuid", "\n");
    const auto named = sys.read(kDm0);
    CHECK(named.dm_name == "vg-lv");
    fs::remove(dm0 / "slaves" / "vdb");
    fs::create_directory_symlink(sys.root / "devices" / "pci0" / "virtio1" / "block" / "vda",
                                 dm0 / "slaves" / "vda");
    const std::string message = sys.refusal("/dev/dm-0", kDm0, named);
    CHECK(
        message.starts_with("/dev/dm-0 is built on a device that has serial 'virtio:VDA-0001' "
                            "now, the run's disk had 'virtio:VDB-0002'"));
  }
}

TEST_CASE("reencrypt identity: a device with its size alone is bound to its path", "[reencrypt]") {
  IdentitySysfs sys;
  static_cast<void>(sys.device("pci0/mmc/block/mmcblk0", DevNumber{179, 0}, kSectors));
  const auto run = sys.read(DevNumber{179, 0});
  CHECK_FALSE(fingerprint_distinguishes(run));
  // Another device of the same size is not looked for: the path's device must match.
  static_cast<void>(sys.device("pci0/mmc/block/mmcblk1", DevNumber{179, 8}, kSectors));
  const std::string message = sys.refusal("/dev/mmcblk0", std::nullopt, run);
  CHECK(
      message.starts_with("/dev/mmcblk0 is no block device now, and no device is the run's (a "
                          "device of 1073741824 bytes)"));
}

TEST_CASE("reencrypt identity: a partition is its number, its start and its disk", "[reencrypt]") {
  IdentitySysfs sys;
  const auto part = sys.device("pci0/virtio1/block/vda/vda1", DevNumber{254, 1}, 2048);
  IdentitySysfs::write(part / "partition", "1\n");
  IdentitySysfs::write(part / "start", "2048\n");
  const auto run = sys.read(DevNumber{254, 1});
  CHECK(run.partition == 1U);
  CHECK(run.partition_start == 2048U);
  REQUIRE(run.under.size() == 1);
  CHECK(run.under.front().serial == "virtio:VDA-0001");
  IdentitySysfs::write(part / "start", "4096\n");
  CHECK(sys.refusal("/dev/vda1", DevNumber{254, 1}, run) ==
        "/dev/vda1 is now partition 1 at sector 4096, the run's was partition 1 at sector 2048: "
        "give the run's partition (its table as it was) and resume");
}

TEST_CASE("reencrypt identity: an identity survives JSON, and its JSON is read strictly",
          "[reencrypt]") {
  IdentitySysfs sys;
  for (const DevNumber number : {kLoop0, kVda, kDm0, kSdb}) {
    const auto fp = sys.read(number);
    auto back = fingerprint_from_json(fingerprint_to_json(fp), "device_identity");
    REQUIRE(back);
    CHECK(*back == fp);
  }
  auto unknown = fingerprint_from_json(R"({"size_bytes": 1, "colour": "red"})", "device_identity");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message ==
        "field \"device_identity.colour\" is not a field lbscrypt knows");
  auto missing = fingerprint_from_json(R"({"serial": "x"})", "device_identity");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "field \"device_identity.size_bytes\" is missing");
  auto devt = fingerprint_from_json(
      R"({"size_bytes": 1, "loop": {"device": "8", "inode": 1, "offset": 0, "size_limit": 0}})",
      "device_identity");
  REQUIRE_FALSE(devt);
  CHECK(devt.error().message == "field \"device_identity.loop.device\" is not MAJOR:MINOR");
  auto nested = fingerprint_from_json(R"({"size_bytes": 1, "under": [{"size_bytes": "2"}]})",
                                      "device_identity");
  REQUIRE_FALSE(nested);
  CHECK(nested.error().message ==
        "field \"device_identity.under[0].size_bytes\" is not a whole number from 0 to "
        "18446744073709551615");
}
