// SPDX-License-Identifier: GPL-2.0-only
// A small sysfs tree in a temporary directory, laid out as the kernel lays out /sys for block
// devices: <root>/dev/block/MAJ:MIN links to the device's directory under devices/, a
// partition is a subdirectory of its disk with a `partition` file, and slaves/ and holders/
// link device-mapper devices to what they are built on.
//
//   sdb      8:16   device/wwid naa.5000c500a1b2c3d4
//   sdb1     8:17   partition 1 of sdb; dm-0 is built on it
//   sdb2     8:18   partition 2 of sdb
//   dm-0     253:0  dm/uuid CRYPT-PLAIN-vol, dm/name vol
//   dm-1     253:1  dm/uuid empty, dm/name plain
//   loop0    7:0    nothing stable
//   nvme0n1  259:0  wwid "eui.0025388b91b1c5e3" (the namespace's own, no device/)
//   nvme0n1p2 259:2 partition 2 of nvme0n1
//   sdc      8:32   device/wwid with blanks, a byte 0xff and a backslash
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.hpp"

namespace lbscrypt::test {

struct FakeSysfs {
  TempDir dir;
  std::filesystem::path root = dir.path / "sys";

  static void write(const std::filesystem::path &file, const std::string &text) {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << text;
  }

  // A device directory under devices/, its dev file and its /dev/block link.
  [[nodiscard]] std::filesystem::path device(const std::string &where,
                                             const std::string &number) const {
    auto path = root / "devices" / where;
    write(path / "dev", number + "\n");
    std::filesystem::create_directories(root / "dev" / "block");
    std::filesystem::create_directory_symlink(path, root / "dev" / "block" / number);
    return path;
  }

  FakeSysfs() {
    const auto sdb = device("pci0/host0/block/sdb", "8:16");
    write(sdb / "device" / "wwid", "naa.5000c500a1b2c3d4\n");
    const auto sdb1 = device("pci0/host0/block/sdb/sdb1", "8:17");
    write(sdb1 / "partition", "1\n");
    const auto sdb2 = device("pci0/host0/block/sdb/sdb2", "8:18");
    write(sdb2 / "partition", "2\n");
    const auto dm0 = device("virtual/block/dm-0", "253:0");
    write(dm0 / "dm" / "uuid", "CRYPT-PLAIN-vol\n");
    write(dm0 / "dm" / "name", "vol\n");
    std::filesystem::create_directories(dm0 / "slaves");
    std::filesystem::create_directory_symlink(sdb1, dm0 / "slaves" / "sdb1");
    std::filesystem::create_directories(sdb1 / "holders");
    std::filesystem::create_directory_symlink(dm0, sdb1 / "holders" / "dm-0");
    const auto dm1 = device("virtual/block/dm-1", "253:1");
    write(dm1 / "dm" / "uuid", "\n");
    write(dm1 / "dm" / "name", "plain\n");
    static_cast<void>(device("virtual/block/loop0", "7:0"));  // nothing stable in it
    const auto nvme = device("pci1/nvme0/nvme0n1", "259:0");
    write(nvme / "wwid", "eui.0025388b91b1c5e3\n");
    const auto nvme_part = device("pci1/nvme0/nvme0n1/nvme0n1p2", "259:2");
    write(nvme_part / "partition", "2\n");
    const auto sdc = device("pci0/host1/block/sdc", "8:32");
    write(sdc / "device" / "wwid", "  t10.ATA     QEMU HARDDISK\xff\\1  \n");
  }
};

}  // namespace lbscrypt::test
