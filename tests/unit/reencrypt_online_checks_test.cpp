// SPDX-License-Identifier: GPL-2.0-only
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/reencrypt/online_checks.hpp"
#include "temp_dir.hpp"

using lbscrypt::DevNumber;
using lbscrypt::Errc;
using lbscrypt::NameLookup;
using lbscrypt::NamePlacement;
using lbscrypt::OnlineRunNeeds;

namespace fs = std::filesystem;

namespace {

// A host as /proc and /sys show it, in a temporary directory; the files it names are real
// files under files/, which mountinfo lines put on the devices below. NAME is "lbstest-vol"
// (dm-93, 253:93) over vdb; the names are ones no test machine has in /dev, so nothing falls
// through to the real devices.
//
//   vdb 254:16, vdc 254:32 (/ is on it), vdd 254:48, vde 254:64   disks
//   dm-93  253:93  NAME, built on vdb
//   dm-94  253:94  "lbstest-lv", built on NAME (a volume group on NAME)
//   loop90 7:90    backing file files/onname/disk.img (on NAME)
//   loop91 7:91    backing file files/off/disk.img, its partition loop91p1 259:91
//   loop92 7:92    backing file files/onname/part.img, its partition loop92p1 259:92
//   loop93 7:93    backing file deleted
//   btrfs fsid "multi": vde and NAME; fsid "single": vdd
struct FakeHost {
  lbscrypt::test::TempDir dir;
  fs::path sys = dir.path / "sys";
  fs::path proc = dir.path / "proc";
  fs::path files = fs::canonical(dir.path) / "files";  // as mountinfo would name it
  std::vector<std::string> mountinfo;
  std::vector<std::string> maps;
  std::vector<std::string> swaps;

  static void write(const fs::path &file, const std::string &text) {
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << text;
  }

  [[nodiscard]] fs::path device(const std::string &where, const std::string &number) const {
    fs::path path = sys / "devices" / where;
    write(path / "dev", number + "\n");
    fs::create_directories(sys / "dev" / "block");
    fs::create_directories(sys / "class" / "block");
    fs::create_directory_symlink(path, sys / "dev" / "block" / number);
    fs::create_directory_symlink(path, sys / "class" / "block" / path.filename());
    return path;
  }

  static void link(const fs::path &from, const fs::path &to, const std::string &kind) {
    fs::create_directories(from / kind);
    fs::create_directory_symlink(to, from / kind / to.filename());
  }

  // A directory of files/ on a filesystem: its mountinfo line.
  fs::path mount(const std::string &sub, const std::string &number, const std::string &fstype,
                 const std::string &source, const std::string &options = "rw") {
    fs::path point = files / sub;
    fs::create_directories(point);
    mountinfo.emplace_back(fmt::format("{} 1 {} / {} rw,relatime - {} {} {}",
                                       100 + mountinfo.size(), number, point.string(), fstype,
                                       source, options));
    return point;
  }

  FakeHost() {
    fs::create_directories(files);
    mountinfo.emplace_back("1 0 254:32 / / rw,relatime - ext4 /dev/vdc rw");
    const auto vdb = device("pci0/vdb", "254:16");
    static_cast<void>(device("pci0/vdc", "254:32"));
    const auto vdd = device("pci0/vdd", "254:48");
    const auto vde = device("pci0/vde", "254:64");
    const auto name = device("virtual/block/dm-93", "253:93");
    write(name / "dm" / "name", "lbstest-vol\n");
    link(name, vdb, "slaves");
    const auto lv = device("virtual/block/dm-94", "253:94");
    write(lv / "dm" / "name", "lbstest-lv\n");
    link(lv, name, "slaves");

    const auto onname = mount("onname", "253:93", "ext4", "/dev/mapper/lbstest-vol");
    write(onname / "disk.img", "x");
    write(onname / "part.img", "x");
    write(files / "off" / "disk.img", "x");
    const auto loop90 = device("virtual/block/loop90", "7:90");
    write(loop90 / "loop" / "backing_file", (onname / "disk.img").string() + "\n");
    const auto loop91 = device("virtual/block/loop91", "7:91");
    write(loop91 / "loop" / "backing_file", (files / "off" / "disk.img").string() + "\n");
    write(device("virtual/block/loop91/loop91p1", "259:91") / "partition", "1\n");
    const auto loop92 = device("virtual/block/loop92", "7:92");
    write(loop92 / "loop" / "backing_file", (onname / "part.img").string() + "\n");
    write(device("virtual/block/loop92/loop92p1", "259:92") / "partition", "1\n");
    const auto loop93 = device("virtual/block/loop93", "7:93");
    write(loop93 / "loop" / "backing_file", "/srv/gone.img (deleted)\n");

    fs::create_directories(sys / "fs" / "btrfs" / "multi" / "devices");
    fs::create_directory_symlink(vde, sys / "fs" / "btrfs" / "multi" / "devices" / "vde");
    fs::create_directory_symlink(name, sys / "fs" / "btrfs" / "multi" / "devices" / "dm-93");
    fs::create_directories(sys / "fs" / "btrfs" / "single" / "devices");
    fs::create_directory_symlink(vdd, sys / "fs" / "btrfs" / "single" / "devices" / "vdd");

    static_cast<void>(mount("off", "254:48", "xfs", "/dev/vdd"));
    static_cast<void>(mount("onloop", "7:90", "ext4", "/dev/loop90"));
    static_cast<void>(mount("offloop", "259:91", "ext4", "/dev/loop91p1"));
    static_cast<void>(mount("onpart", "259:92", "ext4", "/dev/loop92p1"));
    static_cast<void>(mount("onlv", "253:94", "xfs", "/dev/mapper/lbstest-lv"));
    static_cast<void>(mount("gone", "7:93", "ext4", "/dev/loop93"));
    static_cast<void>(mount("btrfs-multi", "0:90", "btrfs", "/dev/vde"));
    static_cast<void>(mount("btrfs-single", "0:91", "btrfs", "/dev/vdd"));
    static_cast<void>(mount("nfs", "0:92", "nfs4", "server:/export"));
    static_cast<void>(mount("fuse", "0:93", "fuse.sshfs", "user@host:"));
    static_cast<void>(mount("tmp", "0:94", "tmpfs", "tmpfs"));
    fs::create_directories(files / "off" / "upper");
    fs::create_directories(files / "off" / "work");
    fs::create_directories(files / "off" / "lower");
    fs::create_directories(onname / "lower");
    static_cast<void>(
        mount("overlay-on", "0:95", "overlay", "overlay",
              fmt::format("rw,lowerdir={}:{},upperdir={},workdir={}",
                          (files / "off" / "lower").string(), (onname / "lower").string(),
                          (files / "off" / "upper").string(), (files / "off" / "work").string())));
    static_cast<void>(mount(
        "overlay-off", "0:96", "overlay", "overlay",
        fmt::format("rw,lowerdir={},upperdir={},workdir={}", (files / "off" / "lower").string(),
                    (files / "off" / "upper").string(), (files / "off" / "work").string())));
    // The program and its libraries, off NAME.
    write(files / "off" / "lbscrypt", "x");
    write(files / "off" / "libc.so.6", "x");
    maps = {
        fmt::format("aaaad0000000-aaaad0010000 r-xp 00000000 fe:30 12 {}",
                    (files / "off" / "lbscrypt").string()),
        fmt::format("ffff80000000-ffff80100000 r-xp 00000000 fe:30 13 {}",
                    (files / "off" / "libc.so.6").string()),
        "ffff90000000-ffff90100000 rw-p 00000000 00:00 0 [heap]",
        "ffff90100000-ffff90200000 rw-s 00000000 00:01 77 /memfd:buffer (deleted)",
    };
    swaps = {"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"};
  }

  NameLookup lookup() {
    write(proc / "self" / "mountinfo", joined(mountinfo));
    write(proc / "self" / "maps", joined(maps));
    write(proc / "swaps", joined(swaps));
    return NameLookup{proc, sys, "lbstest-vol", DevNumber{253, 93}};
  }

  // A process with one fd open with `flags` on `target` (a symbolic link's text, as
  // /proc/PID/fd shows it).
  void process(int pid, const std::string &comm, const std::string &target, int flags) const {
    const fs::path where = proc / std::to_string(pid);
    write(where / "comm", comm + "\n");
    fs::create_directories(where / "fd");
    fs::create_symlink(target, where / "fd" / "3");
    write(where / "fdinfo" / "3", fmt::format("pos:\t0\nflags:\t0{:o}\nmnt_id:\t30\n", flags));
  }

  [[nodiscard]] OnlineRunNeeds needs(const fs::path &state) const {
    OnlineRunNeeds n;
    n.state = state;
    n.journal = fs::path(state.string() + ".journal");
    n.tab = files / "off" / "lbscrypttab";
    n.new_sector_size = 65536;
    n.self_pid = 1;
    return n;
  }

  static std::string joined(const std::vector<std::string> &lines) {
    std::string text;
    for (const auto &line : lines) {
      text += line + "\n";
    }
    return text;
  }
};

NamePlacement placement_of(FakeHost &host, const fs::path &path) {
  const auto where = lbscrypt::locate_path(host.lookup(), path);
  REQUIRE(where.ok());
  return where->where;
}

}  // namespace

TEST_CASE("online checks: where a file is, seen from NAME", "[reencrypt][online][checks]") {
  FakeHost host;
  const fs::path &f = host.files;
  // Off NAME: the root disk, another disk, a loop device over a file off NAME (through its
  // partition), a btrfs on one other disk, tmpfs, an overlay whose layers are all off NAME.
  CHECK(placement_of(host, f / "top.state") == NamePlacement::off_name);
  CHECK(placement_of(host, f / "off" / "run.state") == NamePlacement::off_name);
  CHECK(placement_of(host, f / "offloop" / "run.state") == NamePlacement::off_name);
  CHECK(placement_of(host, f / "btrfs-single" / "run.state") == NamePlacement::off_name);
  CHECK(placement_of(host, f / "tmp" / "run.state") == NamePlacement::off_name);
  CHECK(placement_of(host, f / "overlay-off" / "run.state") == NamePlacement::off_name);
  // On NAME: its own filesystem, a loop image on it (and a partition of one), a volume built
  // on it, a btrfs with NAME among its devices, an overlay with a layer on it.
  CHECK(placement_of(host, f / "onname" / "run.state") == NamePlacement::on_name);
  CHECK(placement_of(host, f / "onloop" / "run.state") == NamePlacement::on_name);
  CHECK(placement_of(host, f / "onpart" / "run.state") == NamePlacement::on_name);
  CHECK(placement_of(host, f / "onlv" / "run.state") == NamePlacement::on_name);
  CHECK(placement_of(host, f / "btrfs-multi" / "run.state") == NamePlacement::on_name);
  CHECK(placement_of(host, f / "overlay-on" / "run.state") == NamePlacement::on_name);
  // Cannot be followed: NFS, FUSE, a loop device over a deleted file, a path no mount holds.
  CHECK(placement_of(host, f / "nfs" / "run.state") == NamePlacement::unknown);
  CHECK(placement_of(host, f / "fuse" / "run.state") == NamePlacement::unknown);
  CHECK(placement_of(host, f / "gone" / "run.state") == NamePlacement::unknown);
  host.mountinfo.erase(host.mountinfo.begin());  // no "/" any more
  CHECK(placement_of(host, f / "top.state") == NamePlacement::unknown);
}

TEST_CASE("online checks: the chain to NAME is named", "[reencrypt][online][checks]") {
  FakeHost host;
  const auto where = lbscrypt::locate_path(host.lookup(), host.files / "onpart" / "x");
  REQUIRE(where.ok());
  CHECK(where->how == fmt::format("ext4 on loop92p1, a partition of loop92, whose backing file "
                                  "{} is on ext4 on lbstest-vol",
                                  (host.files / "onname" / "part.img").string()));
  const auto device = lbscrypt::locate_block_device(host.lookup(), DevNumber{253, 94});
  CHECK(device.where == NamePlacement::on_name);
  CHECK(device.how == "dm-94, built on lbstest-vol");
  CHECK(lbscrypt::locate_block_device(host.lookup(), DevNumber{254, 16}).where ==
        NamePlacement::off_name);  // NAME's own disk is not under NAME
}

TEST_CASE("online checks: a state file or journal on NAME is refused",
          "[reencrypt][online][checks]") {
  FakeHost host;
  SECTION("control: on another disk") {
    const auto r = lbscrypt::check_online_run(host.lookup(), host.needs(host.files / "off" / "s"));
    REQUIRE(r.ok());
    CHECK(r->empty());
  }
  SECTION("on a loop image stored on NAME") {
    const auto r =
        lbscrypt::check_online_run(host.lookup(), host.needs(host.files / "onloop" / "s"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::refused);
    CHECK_THAT(r.error().message,
               Catch::StartsWith(fmt::format("the state file {} is on lbstest-vol (ext4 on loop90, "
                                             "whose backing file {} is on ext4 on lbstest-vol): ",
                                             (host.files / "onloop" / "s").string(),
                                             (host.files / "onname" / "disk.img").string())) &&
                   Catch::Contains("put the state file on a local disk filesystem that is not on "
                                   "lbstest-vol (nothing was written)"));
  }
  SECTION("on NFS") {
    const auto r = lbscrypt::check_online_run(host.lookup(), host.needs(host.files / "nfs" / "s"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message,
               Catch::Contains("is on nfs4 server:/export (no block device to follow), which "
                               "cannot be shown not to be on lbstest-vol"));
  }
  SECTION("on a btrfs with a device on NAME") {
    const auto r =
        lbscrypt::check_online_run(host.lookup(), host.needs(host.files / "btrfs-multi" / "s"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("(btrfs on lbstest-vol)"));
  }
  SECTION("the journal a link to NAME") {
    const fs::path state = host.files / "off" / "s";
    fs::create_symlink(host.files / "onname" / "j", state.string() + ".journal");
    const auto r = lbscrypt::check_online_run(host.lookup(), host.needs(state));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith("the state file's journal "));
  }
}

TEST_CASE("online checks: swap on NAME is refused", "[reencrypt][online][checks]") {
  FakeHost host;
  const fs::path state = host.files / "off" / "s";
  SECTION("control: a partition of another disk, a file off NAME") {
    host.swaps.emplace_back("/dev/vdd\tpartition\t1048572\t0\t-2");
    FakeHost::write(host.files / "off" / "swapfile", "x");
    host.swaps.emplace_back(
        fmt::format("{}\tfile\t1048572\t0\t-3", (host.files / "off" / "swapfile").string()));
    CHECK(lbscrypt::check_online_run(host.lookup(), host.needs(state)).ok());
  }
  SECTION("a swap file on NAME (its name with a space, as /proc/swaps writes it)") {
    const fs::path file = host.files / "onname" / "swap file";
    FakeHost::write(file, "x");
    host.swaps.emplace_back(fmt::format("{}\\040file\tfile\t1048572\t0\t-2",
                                        (host.files / "onname" / "swap").string()));
    const auto r = lbscrypt::check_online_run(host.lookup(), host.needs(state));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message,
               Catch::StartsWith(fmt::format("swap {} is on lbstest-vol", file.string())) &&
                   Catch::Contains(fmt::format("swapoff {} first", file.string())));
  }
  SECTION("a swap partition on a loop device over a file on NAME") {
    host.swaps.emplace_back("/dev/loop92p1\tpartition\t1048572\t0\t-2");
    const auto r = lbscrypt::check_online_run(host.lookup(), host.needs(state));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith("swap /dev/loop92p1 is on lbstest-vol "
                                                    "(loop92p1, a partition of loop92, whose"));
  }
}

TEST_CASE("online checks: key files and lbscrypttab on NAME are refused",
          "[reencrypt][online][checks]") {
  FakeHost host;
  OnlineRunNeeds needs = host.needs(host.files / "off" / "s");
  FakeHost::write(host.files / "off" / "old.key", "k");
  FakeHost::write(host.files / "onlv" / "new.key", "k");
  FakeHost::write(host.files / "onname" / "lbscrypttab", "");
  SECTION("control: keys off NAME, lbscrypttab off NAME or absent") {
    needs.key_files = {host.files / "off" / "old.key"};
    needs.tab = host.files / "onname" / "absent";
    CHECK(lbscrypt::check_online_run(host.lookup(), needs).ok());
  }
  SECTION("the new key on a volume built on NAME") {
    needs.key_files = {host.files / "off" / "old.key", host.files / "onlv" / "new.key"};
    const auto r = lbscrypt::check_online_run(host.lookup(), needs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message,
               Catch::StartsWith(fmt::format("the key file {} is on lbstest-vol (xfs on dm-94, "
                                             "built on lbstest-vol): ",
                                             (host.files / "onlv" / "new.key").string())) &&
                   Catch::Contains("copy it to a tmpfs such as /run"));
  }
  SECTION("lbscrypttab on NAME") {
    needs.tab = host.files / "onname" / "lbscrypttab";
    const auto r = lbscrypt::check_online_run(host.lookup(), needs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message,
               Catch::StartsWith(fmt::format("{} is on lbstest-vol", needs.tab.string())) &&
                   Catch::Contains("reencrypt lbstest-vol offline"));
  }
}

TEST_CASE("online checks: the program or a library on NAME is refused",
          "[reencrypt][online][checks]") {
  FakeHost host;
  const OnlineRunNeeds needs = host.needs(host.files / "off" / "s");
  SECTION("a library on NAME") {
    FakeHost::write(host.files / "onname" / "libfoo.so", "x");
    host.maps.emplace_back(fmt::format("ffff70000000-ffff70100000 r-xp 00000000 fd:5d 99 {}",
                                       (host.files / "onname" / "libfoo.so").string()));
    const auto r = lbscrypt::check_online_run(host.lookup(), needs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message,
               Catch::StartsWith(fmt::format("{}, which lbscrypt runs from (the program or a "
                                             "library), is on lbstest-vol",
                                             (host.files / "onname" / "libfoo.so").string())));
  }
  SECTION("a deleted library, known by its device number (253:93 in hex)") {
    host.maps.emplace_back(
        "ffff70000000-ffff70100000 r-xp 00000000 fd:5d 99 /usr/lib/old.so (deleted)");
    const auto r = lbscrypt::check_online_run(host.lookup(), needs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith("/usr/lib/old.so, which lbscrypt runs from"));
  }
  SECTION("no maps to read") {
    static_cast<void>(host.lookup());
    fs::remove(host.proc / "self" / "maps");
    const auto r = lbscrypt::check_online_run(
        NameLookup{host.proc, host.sys, "lbstest-vol", DevNumber{253, 93}}, needs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("maps"));
  }
}

TEST_CASE("online checks: O_DIRECT openers of NAME", "[reencrypt][online][checks]") {
  FakeHost host;
  OnlineRunNeeds needs = host.needs(host.files / "off" / "s");
  FakeHost::write(host.files / "onname" / "db", "x");
  FakeHost::write(host.files / "off" / "db", "x");
  // Not counted: buffered on NAME, O_DIRECT on another disk, ourselves.
  host.process(4000, "cat", "/dev/mapper/lbstest-vol", O_RDONLY);
  host.process(4001, "postgres", (host.files / "off" / "db").string(), O_RDWR | O_DIRECT);
  host.process(4002, "lbscrypt", "/dev/mapper/lbstest-vol", O_RDWR | O_DIRECT);
  needs.self_pid = 4002;
  SECTION("control: none") {
    const auto r = lbscrypt::check_online_run(host.lookup(), needs);
    REQUIRE(r.ok());
    CHECK(r->empty());
  }
  SECTION("on NAME's node and on a file on it") {
    host.process(4242, "qemu-system-aar", "/dev/dm-93", O_RDWR | O_DIRECT);
    host.process(4100, "mysqld", (host.files / "onname" / "db").string(), O_RDWR | O_DIRECT);
    const auto lookup = host.lookup();
    CHECK(lbscrypt::direct_openers(lookup, 4002) ==
          std::vector<std::string>{"4100 (mysqld)", "4242 (qemu-system-aar)"});
    const auto r = lbscrypt::check_online_run(lookup, needs);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::busy);
    CHECK(r.error().message ==
          "lbstest-vol or a file on it is open with O_DIRECT by 4100 (mysqld), 4242 "
          "(qemu-system-aar): from the first hotzone on, their direct I/O not aligned to 65536 "
          "bytes fails with EINVAL; stop them, or give --force to go on regardless (nothing was "
          "written)");
    SECTION("--force: a warning") {
      needs.force = true;
      const auto forced = lbscrypt::check_online_run(lookup, needs);
      REQUIRE(forced.ok());
      REQUIRE(forced->size() == 1);
      CHECK_THAT(forced->front(), Catch::StartsWith("--force: lbstest-vol or a file on it is "
                                                    "open with O_DIRECT by 4100 (mysqld)"));
    }
    SECTION("--abort starts nothing: not asked") {
      needs.check_direct_openers = false;
      CHECK(lbscrypt::check_online_run(lookup, needs).ok());
    }
  }
}

TEST_CASE("online checks: memory is locked only once every check passed",
          "[reencrypt][online][checks]") {
  FakeHost host;
  const auto lookup = host.lookup();
  lbscrypt::ReencryptRequest request;
  request.proc = host.proc;
  request.sysfs = host.sys;
  request.tab_path = (host.files / "off" / "lbscrypttab").string();
  int locks = 0;
  const auto lock = [&locks]() -> std::optional<std::string> {
    ++locks;
    return std::string("memory not locked: test");
  };
  request.state = host.files / "off" / "s";
  const auto ok =
      lbscrypt::prepare_online_run(request, "lbstest-vol", DevNumber{253, 93}, 65536, lock);
  REQUIRE(ok.ok());
  CHECK(*ok == std::vector<std::string>{"memory not locked: test"});
  CHECK(locks == 1);
  request.state = host.files / "onname" / "s";
  const auto refused =
      lbscrypt::prepare_online_run(request, "lbstest-vol", DevNumber{253, 93}, 65536, lock);
  REQUIRE_FALSE(refused.ok());
  CHECK(locks == 1);
}
