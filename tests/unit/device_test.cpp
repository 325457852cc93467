// SPDX-License-Identifier: GPL-2.0-only
#include <libcryptsetup.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "lbscrypt/device.hpp"
#include "temp_dir.hpp"

namespace {

// A sparse regular file of `bytes` bytes, removed at scope exit.
class TempImage {
 public:
  explicit TempImage(std::uint64_t bytes) {
    char name[] = "/tmp/lbscrypt-img-XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    close(fd);
    path_ = name;
  }
  TempImage(const TempImage &) = delete;
  TempImage &operator=(const TempImage &) = delete;
  TempImage(TempImage &&) = delete;
  TempImage &operator=(TempImage &&) = delete;
  ~TempImage() { unlink(path_.c_str()); }
  [[nodiscard]] const std::string &path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("the size of a regular file is its length", "[device]") {
  const TempImage image(3 * 1024 * 1024 + 512);
  const auto devices = lbscrypt::make_system_block_devices();
  const auto size = devices->size_bytes(image.path());
  REQUIRE(size.ok());
  CHECK(*size == 3U * 1024 * 1024 + 512);
}

TEST_CASE("a missing device is a device error naming the path", "[device]") {
  const auto devices = lbscrypt::make_system_block_devices();
  const auto size = devices->size_bytes("/nonexistent/lbscrypt-dev");
  REQUIRE_FALSE(size.ok());
  CHECK(size.error().code == lbscrypt::Errc::device);
  CHECK_THAT(size.error().message,
             Catch::StartsWith("Device /nonexistent/lbscrypt-dev does not exist or access denied"));
}

TEST_CASE("LUKS headers are found by libcryptsetup, zeros are not LUKS", "[device]") {
  const TempImage image(16ULL * 1024 * 1024);
  const auto devices = lbscrypt::make_system_block_devices();
  const auto before = devices->has_luks_header(image.path());
  REQUIRE(before.ok());
  CHECK_FALSE(*before);

  // Write a real LUKS1 header with libcryptsetup (cheap PBKDF: this is only a header).
  crypt_device *cd = nullptr;
  REQUIRE(crypt_init(&cd, image.path().c_str()) == 0);
  crypt_pbkdf_type pbkdf{};
  pbkdf.type = CRYPT_KDF_PBKDF2;
  pbkdf.hash = "sha256";
  pbkdf.iterations = 1000;
  pbkdf.flags = CRYPT_PBKDF_NO_BENCHMARK;
  REQUIRE(crypt_set_pbkdf_type(cd, &pbkdf) == 0);
  crypt_params_luks1 params{};
  params.hash = "sha256";
  const int formatted =
      crypt_format(cd, CRYPT_LUKS1, "aes", "xts-plain64", nullptr, nullptr, 64, &params);
  crypt_free(cd);
  REQUIRE(formatted == 0);

  const auto after = devices->has_luks_header(image.path());
  REQUIRE(after.ok());
  CHECK(*after);
}

TEST_CASE("major:minor resolves through sysfs, or stays as it is", "[device]") {
  const auto devices = lbscrypt::make_system_block_devices();
  CHECK(devices->resolve("4095:1048575") == "4095:1048575");
}

TEST_CASE("what a path is, from stat", "[device]") {
  const auto devices = lbscrypt::make_system_block_devices();
  using lbscrypt::PathKind;
  const TempImage image(4096);
  CHECK(devices->path_kind(image.path()).value() == PathKind::regular_file);
  CHECK(devices->path_kind("/dev/null").value() == PathKind::character_device);
  CHECK(devices->path_kind("/tmp").value() == PathKind::directory);
  CHECK(devices->path_kind("/nonexistent/lbscrypt-dev").value() == PathKind::missing);
  CHECK(devices->path_kind(image.path() + "/below-a-file").value() == PathKind::missing);
  CHECK(lbscrypt::describe(PathKind::character_device) == "a character device");
}

TEST_CASE("holders come from sysfs: mappings by their dm name, others by theirs", "[device]") {
  const lbscrypt::test::TempDir dir;
  const std::filesystem::path &sysfs = dir.path;
  const auto holders = sysfs / "dev" / "block" / "8:1" / "holders";
  std::filesystem::create_directories(holders / "dm-3" / "dm");
  std::ofstream(holders / "dm-3" / "dm" / "name") << "data\n";
  std::filesystem::create_directories(holders / "md0");
  std::filesystem::create_directories(sysfs / "dev" / "block" / "8:2" / "holders");

  CHECK(lbscrypt::block_device_holders(sysfs, 8, 1) ==
        std::vector<std::string>{"device-mapper mapping data (dm-3)", "md0"});
  CHECK(lbscrypt::block_device_holders(sysfs, 8, 2).empty());  // free
  CHECK(lbscrypt::block_device_holders(sysfs, 8, 3).empty());  // not known
}

TEST_CASE("only a block device can be in use", "[device]") {
  const TempImage image(4096);
  const auto devices = lbscrypt::make_system_block_devices();
  CHECK_FALSE(devices->user_of(image.path()).has_value());
  CHECK_FALSE(devices->user_of("/nonexistent/lbscrypt-dev").has_value());
}

namespace {

// A sysfs tree in a temporary directory.
class FakeSysfs {
 public:
  [[nodiscard]] const std::filesystem::path &root() const { return dir_.path; }
  // Writes `text` to the file at `relative`, making its directories.
  void put(const std::string &relative, const std::string &text) const {
    const auto file = root() / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text << '\n';
  }
  // /sys/dev/block/MAJ:MIN, a link to the device's directory, as the kernel makes it.
  void link(const std::string &major_minor, const std::string &device_dir) const {
    std::filesystem::create_directories(root() / "dev" / "block");
    std::filesystem::create_directory_symlink(root() / device_dir,
                                              root() / "dev" / "block" / major_minor);
  }

 private:
  lbscrypt::test::TempDir dir_;
};

}  // namespace

TEST_CASE("sysfs: a disk's queue, a partition's disk and start, a kernel before 6.11", "[device]") {
  const FakeSysfs sysfs;
  const std::string queue = "devices/sdb/queue/";
  sysfs.put(queue + "physical_block_size", "512");
  sysfs.put(queue + "atomic_write_unit_min_bytes", "4096");
  sysfs.put(queue + "atomic_write_unit_max_bytes", "1048576");
  sysfs.put(queue + "atomic_write_max_bytes", "2097152");
  sysfs.put(queue + "atomic_write_boundary_bytes", "0");
  sysfs.put(queue + "max_segments", "128");
  sysfs.put(queue + "max_segment_size", "65536");
  sysfs.put(queue + "zoned", "none");
  sysfs.put("devices/sdb/sdb1/start", "63");
  sysfs.link("8:16", "devices/sdb");
  sysfs.link("8:17", "devices/sdb/sdb1");

  const auto disk = lbscrypt::read_write_geometry(sysfs.root(), 8, 16, 4096);
  REQUIRE(disk.has_value());
  CHECK(disk->physical_block == 512);
  CHECK(disk->atomic_unit_min == 4096);
  CHECK(disk->atomic_unit_max == 1048576);
  CHECK(disk->atomic_max == 2097152);
  CHECK(disk->atomic_boundary == 0);
  CHECK(disk->segment_bytes == 128ULL * 4096);  // a page per segment
  CHECK(disk->start == 0);
  CHECK_FALSE(disk->zoned);

  const auto partition = lbscrypt::read_write_geometry(sysfs.root(), 8, 17, 65536);
  REQUIRE(partition.has_value());
  CHECK(partition->physical_block == 512);
  CHECK(partition->atomic_unit_max == 1048576);
  CHECK(partition->segment_bytes == 128ULL * 65536);
  CHECK(partition->start == 63);

  // a kernel before 6.11 has no atomic_write_* files: no atomic writes
  sysfs.put("devices/sdc/queue/physical_block_size", "4096");
  sysfs.put("devices/sdc/queue/zoned", "host-managed");
  sysfs.link("8:32", "devices/sdc");
  const auto old = lbscrypt::read_write_geometry(sysfs.root(), 8, 32, 4096);
  REQUIRE(old.has_value());
  CHECK(old->physical_block == 4096);
  CHECK(old->atomic_unit_min == 0);
  CHECK(old->atomic_unit_max == 0);
  CHECK(old->segment_bytes == 0);
  CHECK(old->zoned);

  // a device sysfs does not know
  CHECK_FALSE(lbscrypt::read_write_geometry(sysfs.root(), 9, 9, 4096).has_value());
}
