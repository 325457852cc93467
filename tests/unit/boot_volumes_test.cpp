// SPDX-License-Identifier: GPL-2.0-only
// Which volumes the initramfs opens: x-initrd.attach, and those behind /, /usr and the resume
// device (fstab, mountinfo, initramfs-tools' RESUME=, resume= and root=), found through a
// sysfs and a /dev of a temporary directory.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/reencrypt/plan.hpp"
#include "lbscrypt/units.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using lbscrypt::BootInputs;
using lbscrypt::BootUse;
using lbscrypt::BootVolumes;
using lbscrypt::find_boot_volumes;
using lbscrypt::opens_in_initrd;
using lbscrypt::TabEntry;

namespace {

void write(const fs::path &file, const std::string &text) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << text;
}

// A machine in a temporary directory, laid out as the kernel and udev lay out /sys and /dev:
//
//   sda 8:0, its partitions sda1 8:1, sda2 8:2, sda3 8:3
//   dm-0 253:0  cryptroot  on sda1     /dev/disk/by-uuid/1111-root -> ../../dm-0
//   dm-2 253:2  cryptlvm   on sda2
//   dm-1 253:1  vg-root    on dm-2     /dev/mapper/vg-root -> ../dm-1 (LVM on an lbscrypt volume)
//   dm-3 253:3  cryptswap  on sda3     /dev/disk/by-label/Swap\x281\x29 -> ../../dm-3
//   dm-4 253:4  plainnode              /dev/mapper/plainnode, a node (no link), as dmsetup
//                                      mknodes leaves it
struct FakeMachine {
  lbscrypt::test::TempDir dir;
  fs::path sys = dir.path / "sys";
  fs::path dev = dir.path / "dev";

  [[nodiscard]] fs::path block(const std::string &where, const std::string &name,
                               const std::string &number) const {
    fs::path path = sys / "devices" / where / name;
    write(path / "dev", number + "\n");
    fs::create_directories(sys / "dev" / "block");
    fs::create_directories(sys / "class" / "block");
    fs::create_directory_symlink(path, sys / "dev" / "block" / number);
    fs::create_directory_symlink(path, sys / "class" / "block" / name);
    return path;
  }

  [[nodiscard]] fs::path mapping(const std::string &kernel_name, const std::string &name,
                                 const std::string &number, const std::vector<fs::path> &on) const {
    fs::path path = block("virtual/block", kernel_name, number);
    write(path / "dm" / "name", name + "\n");
    fs::create_directories(path / "slaves");
    for (const fs::path &below : on) {
      fs::create_directory_symlink(below, path / "slaves" / below.filename());
      fs::create_directories(below / "holders");
      fs::create_directory_symlink(path, below / "holders" / kernel_name);
    }
    return path;
  }

  void link(const std::string &at, const std::string &target) const {
    fs::create_directories((dev / at).parent_path());
    fs::create_symlink(target, dev / at);
  }

  FakeMachine() {
    const fs::path sda = block("pci0/host0/block", "sda", "8:0");
    const fs::path sda1 = block("pci0/host0/block/sda", "sda1", "8:1");
    const fs::path sda2 = block("pci0/host0/block/sda", "sda2", "8:2");
    const fs::path sda3 = block("pci0/host0/block/sda", "sda3", "8:3");
    static_cast<void>(sda);
    const fs::path root = mapping("dm-0", "cryptroot", "253:0", {sda1});
    const fs::path lvm = mapping("dm-2", "cryptlvm", "253:2", {sda2});
    static_cast<void>(mapping("dm-1", "vg-root", "253:1", {lvm}));
    static_cast<void>(mapping("dm-3", "cryptswap", "253:3", {sda3}));
    static_cast<void>(mapping("dm-4", "plainnode", "253:4", {}));
    static_cast<void>(root);
    link("disk/by-uuid/1111-root", "../../dm-0");
    link("mapper/cryptroot", "../dm-0");
    link("mapper/vg-root", "../dm-1");
    link("vg/root", "../dm-1");
    link("disk/by-label/Swap\\x281\\x29", "../../dm-3");
    write(dev / "mapper" / "plainnode", "");  // a node, not a link
  }

  [[nodiscard]] BootInputs inputs() const {
    BootInputs in;
    in.sysfs = sys;
    in.dev = dev;
    in.resume_conf_path = "/etc/initramfs-tools/conf.d/resume";
    return in;
  }
};

const std::string kOptions = "cipher=aes-xts-plain64,size=512,hash=sha256";

TabEntry entry(const std::string &line) {
  const auto tab = lbscrypt::parse_lbscrypttab(line + "\n", "/etc/lbscrypttab");
  INFO((tab.errors.empty() ? "" : tab.errors.front().message));
  REQUIRE(tab.entries.size() == 1);
  return tab.entries.front();
}

std::string read_text(std::ifstream &in) {
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What the boot needs `name` for, as boot_use() says it; "" when nothing.
std::string use_of(const BootVolumes &boot, const std::string &name) {
  TabEntry e;
  e.name = name;
  return lbscrypt::boot_use(e, boot).value_or("");
}

}  // namespace

TEST_CASE("boot volumes: / and /usr by /dev/mapper/NAME in fstab, whether active or not",
          "[boot]") {
  FakeMachine m;
  BootInputs in = m.inputs();
  in.fstab =
      "# <file system> <mount point> <type> <options> <dump> <pass>\n"
      "/dev/mapper/cryptroot / ext4 errors=remount-ro 0 1\n"
      "/dev/mapper/cryptusr\t/usr/\text4\tdefaults\t0 2\n"  // not active: by its name
      "/dev/sdb1 /srv ext4 defaults 0 2\n";
  const BootVolumes boot = find_boot_volumes(in);
  CHECK(use_of(boot, "cryptroot") == "holds / (fstab)");
  CHECK(use_of(boot, "cryptusr") == "holds /usr (fstab)");
  CHECK(use_of(boot, "srv").empty());
  const TabEntry root = entry("cryptroot /dev/sda1 none " + kOptions);
  CHECK_FALSE(lbscrypt::opened_by_initrd(root));  // the line alone says no
  CHECK(opens_in_initrd(root, boot));
  CHECK(opens_in_initrd(entry("cryptusr /dev/sdb2 none " + kOptions), boot));
}

TEST_CASE("boot volumes: comments and noauto lines of fstab need nothing", "[boot]") {
  FakeMachine m;
  BootInputs in = m.inputs();
  in.fstab =
      "#/dev/mapper/cryptroot / ext4 defaults 0 1\n"
      "  # /dev/mapper/cryptusr /usr ext4 defaults 0 1\n"
      "/dev/mapper/cryptswap /usr ext4 noauto,nofail 0 2\n"
      "\n";
  const BootVolumes boot = find_boot_volumes(in);
  CHECK(boot.uses.empty());
  CHECK_FALSE(opens_in_initrd(entry("cryptroot /dev/sda1 none " + kOptions), boot));
  CHECK_FALSE(opens_in_initrd(entry("cryptswap /dev/sda3 none " + kOptions), boot));
}

TEST_CASE("boot volumes: a root by UUID= found through sysfs, and LVM on a volume", "[boot]") {
  FakeMachine m;
  SECTION("UUID= of the filesystem on cryptroot") {
    BootInputs in = m.inputs();
    in.fstab = "UUID=1111-root / ext4 defaults 0 1\n";
    const BootVolumes boot = find_boot_volumes(in);
    CHECK(use_of(boot, "cryptroot") == "holds / (fstab)");
    CHECK(opens_in_initrd(entry("cryptroot /dev/sda1 none " + kOptions), boot));
  }
  SECTION("a UUID= no device has: nothing") {
    BootInputs in = m.inputs();
    in.fstab = "UUID=9999 / ext4 defaults 0 1\n";
    CHECK(find_boot_volumes(in).uses.empty());
  }
  SECTION("the root on an LV, the LV's PV on cryptlvm: through slaves/") {
    BootInputs in = m.inputs();
    in.fstab = "/dev/vg/root / ext4 defaults 0 1\n";
    const BootVolumes boot = find_boot_volumes(in);
    CHECK(use_of(boot, "vg-root") == "holds / (fstab)");
    CHECK(use_of(boot, "cryptlvm") == "holds / (fstab)");
    CHECK(opens_in_initrd(entry("cryptlvm /dev/sda2 none " + kOptions), boot));
    CHECK_FALSE(opens_in_initrd(entry("cryptroot /dev/sda1 none " + kOptions), boot));
  }
  SECTION("the running / from mountinfo, by its device number") {
    BootInputs in = m.inputs();
    in.mountinfo =
        "21 1 0:20 / / rw,relatime - rootfs rootfs rw\n"
        "25 1 253:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw\n"
        "26 25 0:5 / /dev rw - devtmpfs udev rw\n";
    const BootVolumes boot = find_boot_volumes(in);
    CHECK(use_of(boot, "cryptlvm") == "holds / (mountinfo)");
    CHECK(use_of(boot, "cryptroot").empty());
  }
  SECTION("a /dev/mapper node that is no link: by its dm/name") {
    BootInputs in = m.inputs();
    in.fstab = "/dev/mapper/plainnode /usr ext4 defaults 0 1\n";
    CHECK(use_of(find_boot_volumes(in), "plainnode") == "holds /usr (fstab)");
  }
}

TEST_CASE("boot volumes: the resume device from initramfs-tools and the kernel command line",
          "[boot]") {
  FakeMachine m;
  const TabEntry swap = entry("cryptswap /dev/sda3 none " + kOptions);
  SECTION("RESUME= in conf.d/resume") {
    BootInputs in = m.inputs();
    in.resume_conf = "# written by the installer\nRESUME=\"/dev/mapper/cryptswap\"\n";
    const BootVolumes boot = find_boot_volumes(in);
    CHECK(use_of(boot, "cryptswap") ==
          "holds the resume device (RESUME= in /etc/initramfs-tools/conf.d/resume)");
    CHECK(opens_in_initrd(swap, boot));
  }
  SECTION("RESUME=none and RESUME=auto name no volume") {
    BootInputs in = m.inputs();
    in.resume_conf = "RESUME=none\n";
    CHECK_FALSE(opens_in_initrd(swap, find_boot_volumes(in)));
    in.resume_conf = "RESUME=auto\n";
    CHECK_FALSE(opens_in_initrd(swap, find_boot_volumes(in)));
  }
  const std::string by_resume = "holds the resume device (resume= on the kernel command line)";
  const auto from_cmdline = [&](const std::string &cmdline) {
    BootInputs in = m.inputs();
    in.cmdline = cmdline;
    return find_boot_volumes(in);
  };
  SECTION("resume= on the kernel command line, a label udev escapes") {
    const BootVolumes boot =
        from_cmdline("BOOT_IMAGE=/vmlinuz ro quiet resume=LABEL=Swap(1) splash\n");
    CHECK(use_of(boot, "cryptswap") == by_resume);
    CHECK(opens_in_initrd(swap, boot));
  }
  SECTION("resume=MAJOR:MINOR, and root= as well") {
    const BootVolumes boot = from_cmdline("root=/dev/mapper/cryptroot resume=253:3");
    CHECK(use_of(boot, "cryptswap") == by_resume);
    CHECK(use_of(boot, "cryptroot") == "holds / (root= on the kernel command line)");
  }
  SECTION("every source at once, grouped") {
    BootInputs in = m.inputs();
    in.fstab = "/dev/mapper/cryptswap / ext4 defaults 0 1\n";
    in.cmdline = "resume=/dev/mapper/cryptswap";
    in.mountinfo = "25 1 253:3 / / rw - ext4 /dev/mapper/cryptswap rw\n";
    CHECK(use_of(find_boot_volumes(in), "cryptswap") ==
          "holds / (fstab, mountinfo) and the resume device (resume= on the kernel command "
          "line)");
  }
}

TEST_CASE("boot volumes: x-initrd.attach alone, and a volume the boot does not need", "[boot]") {
  FakeMachine m;
  BootInputs in = m.inputs();
  in.fstab = "/dev/mapper/cryptroot / ext4 defaults 0 1\n";
  in.cmdline = "resume=/dev/mapper/cryptswap";
  const BootVolumes boot = find_boot_volumes(in);
  const TabEntry attach = entry("home /dev/sdb1 none " + kOptions + ",x-initrd.attach");
  CHECK(opens_in_initrd(attach, boot));
  CHECK_FALSE(lbscrypt::boot_use(attach, boot).has_value());
  CHECK_FALSE(opens_in_initrd(entry("data /dev/sdc1 none " + kOptions), boot));
  CHECK(lbscrypt::kernel_command_line_words(" a='b c'  d=\"e\"\n") ==
        std::vector<std::string>{"a=b c", "d=e"});
}

namespace {

struct Listed {
  int rc;
  std::string out;
  std::string err;
};

// `lbscrypt ARGS` with every file read from the disk.
Listed run_cli(const std::vector<std::string> &args) {
  lbscrypt::cli::Services services;
  services.reencrypt_registry.reset();
  services.read_file = [](const std::string &path) -> lbscrypt::Result<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return lbscrypt::make_error(lbscrypt::Errc::not_found, "no " + path);
    }
    return read_text(in);
  };
  std::ostringstream out;
  std::ostringstream err;
  const int rc = lbscrypt::cli::run(args, out, err, services);
  return {rc, out.str(), err.str()};
}

}  // namespace

TEST_CASE("tab list --initrd: the volumes the boot needs, each with a note", "[boot][cli]") {
  FakeMachine m;
  const fs::path tab = m.dir.path / "lbscrypttab";
  const fs::path fstab = m.dir.path / "fstab";
  const fs::path resume = m.dir.path / "resume";
  const fs::path cmdline = m.dir.path / "cmdline";
  write(tab,
        "# NAME DEVICE KEY OPTIONS\n"
        "data /dev/sdc1 none " +
            kOptions +
            "\n"
            "cryptlvm /dev/sda2 none " +
            kOptions +
            "\n"
            "home /dev/sdb1 none " +
            kOptions +
            ",x-initrd.attach\n"
            "cryptswap LABEL=Swap(1) none " +
            kOptions +
            "\n"
            "broken /dev/sdd1 none cipher=aes-xts-plain64\n"
            "other /dev/sde1 none size=1\n");
  write(fstab, "/dev/vg/root / ext4 defaults 0 1\n/dev/mapper/broken /usr ext4 defaults 0 2\n");
  write(resume, "RESUME=/dev/mapper/cryptswap\n");
  write(cmdline, "quiet\n");
  const std::vector<std::string> args{"lbscrypt",      "tab",          "list",
                                      "--initrd",      "--tab",        tab.string(),
                                      "--fstab",       fstab.string(), "--resume-conf",
                                      resume.string(), "--cmdline",    cmdline.string(),
                                      "--mountinfo",   "/nonexistent", "--sysfs",
                                      m.sys.string(),  "--dev",        m.dev.string()};
  const Listed listed = run_cli(args);
  // broken holds /usr and is refused: the image would lack it, so exit 1
  CHECK(listed.rc == 1);
  CHECK(listed.out == "cryptlvm /dev/sda2 /dev/sda2 none 512 - aes-xts-plain64 " + kOptions + "\n" +
                          "home /dev/sdb1 /dev/sdb1 none 512 - aes-xts-plain64 " + kOptions +
                          ",x-initrd.attach\n" +
                          "cryptswap LABEL=Swap(1) /dev/disk/by-label/Swap\\x281\\x29 none 512 - "
                          "aes-xts-plain64 " +
                          kOptions + "\n");
  const std::string t = tab.string();
  std::vector<std::string> lines;
  std::istringstream err(listed.err);
  for (std::string line; std::getline(err, line);) {
    lines.push_back(line);
  }
  REQUIRE(lines.size() == 4);
  CHECK_THAT(lines[0], Catch::StartsWith("lbscrypt: " + t + ":6: broken: "));
  CHECK_THAT(lines[1], Catch::StartsWith("lbscrypt: warning: " + t + ":7: other: ") &&
                           Catch::EndsWith("(not an x-initrd.attach line: left out)"));
  CHECK(lines[2] == "lbscrypt: note: " + t +
                        " line 3 (cryptlvm) holds / (fstab): opened in the initramfs without "
                        "x-initrd.attach");
  CHECK(lines[3] == "lbscrypt: note: " + t +
                        " line 5 (cryptswap) holds the resume device (RESUME= in " +
                        resume.string() + "): opened in the initramfs without x-initrd.attach");

  SECTION("without the refused line: exit 0 with the notes") {
    write(fstab, "/dev/vg/root / ext4 defaults 0 1\n");
    const Listed ok = run_cli(args);
    CHECK(ok.rc == 0);
    CHECK(ok.out == listed.out);
    CHECK_THAT(ok.err, Catch::Contains("line 3 (cryptlvm) holds / (fstab): opened in the "
                                       "initramfs without x-initrd.attach"));
  }
  SECTION("without --initrd: every good line, no note") {
    std::vector<std::string> every = args;
    every.erase(every.begin() + 3);
    const Listed all = run_cli(every);
    CHECK(all.rc == 1);
    CHECK_THAT(all.err, !Catch::Contains("note:"));
    CHECK_THAT(all.out, Catch::StartsWith("data "));
  }
}

TEST_CASE("generate-units: a volume the boot needs is not stopped at shutdown", "[boot][cli]") {
  FakeMachine m;
  const fs::path tab = m.dir.path / "lbscrypttab";
  const fs::path fstab = m.dir.path / "fstab";
  const fs::path out = m.dir.path / "units";
  fs::create_directories(out);
  write(tab, "cryptroot /dev/sda1 none " + kOptions + "\ndata /dev/sdc1 none " + kOptions + "\n");
  write(fstab, "UUID=1111-root / ext4 defaults 0 1\n");
  const Listed ran = run_cli({"lbscrypt",      "generate-units",     "--tab",       tab.string(),
                              "--tool",        "/usr/sbin/lbscrypt", "--makefs",    "/bin/true",
                              "--fstab",       fstab.string(),       "--mountinfo", "/nonexistent",
                              "--resume-conf", "/nonexistent",       "--cmdline",   "/nonexistent",
                              "--sysfs",       m.sys.string(),       "--dev",       m.dev.string(),
                              out.string()});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  const auto unit = [&](const std::string &name) {
    std::ifstream in(out / name);
    return read_text(in);
  };
  CHECK_THAT(unit("lbscrypt@cryptroot.service"),
             Catch::Contains("ExecStop=") && !Catch::Contains("Conflicts=umount.target"));
  CHECK_THAT(unit("lbscrypt@data.service"), Catch::Contains("Conflicts=umount.target\n"));

  lbscrypt::GeneratorSettings settings{"/usr/sbin/lbscrypt", "/etc/lbscrypttab", "/bin/true", {}};
  const std::vector<TabEntry> entries{entry("cryptroot /dev/sda1 none " + kOptions)};
  CHECK_THAT(lbscrypt::generate_units(entries, settings).files.front().text,
             Catch::Contains("Conflicts=umount.target\n"));
  settings.boot.uses["cryptroot"].push_back(BootUse{"/", "fstab"});
  CHECK_THAT(lbscrypt::generate_units(entries, settings).files.front().text,
             !Catch::Contains("Conflicts=umount.target"));
}

TEST_CASE("reencrypt: a volume the boot needs is refused, its line kept", "[boot][reencrypt]") {
  lbscrypt::PlanFacts facts;
  facts.device = "/dev/sda1";
  facts.initrd_volume = "cryptroot";
  facts.boot_use = "holds / (fstab)";
  const auto r = lbscrypt::check_reencrypt_boot(facts);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == lbscrypt::Errc::refused);
  CHECK(r.error().message ==
        "/dev/sda1 is cryptroot in lbscrypttab, which holds / (fstab): the initramfs opens it at "
        "boot and cannot resume a run, so a reboot mid-way would not boot; keep its line as it "
        "is and reencrypt it from a rescue or live system (or another installation) where "
        "cryptroot holds no /, /usr or resume device, then boot this one again");
  CHECK_THAT(r.error().message, !Catch::Contains("drop x-initrd.attach"));
}
