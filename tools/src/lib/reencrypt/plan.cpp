// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/plan.hpp"

#include <blkid/blkid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>
#include <utility>

#include "lbscrypt/gating.hpp"
#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

// ---- blkid ----

class BlkidProber final : public FilesystemProber {
 public:
  Result<std::optional<FilesystemProbe>> probe(const std::string &path) override {
    const std::unique_ptr<blkid_struct_probe, void (*)(blkid_probe)> handle(
        blkid_new_probe_from_filename(path.c_str()), blkid_free_probe);
    if (!handle) {
      return make_error(
          Errc::device,
          fmt::format("cannot open {} to look for a filesystem: {}", path, std::strerror(errno)),
          errno);
    }
    blkid_probe pr = handle.get();
    // TYPE, and the BLOCK_SIZE libblkid (2.36 and later) sets for every filesystem that
    // knows one; partition tables as `blkid -p` finds them.
    if (blkid_probe_enable_superblocks(pr, 1) != 0 ||
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE) != 0 ||
        blkid_probe_enable_partitions(pr, 1) != 0) {
      return make_error(Errc::device, fmt::format("cannot set up blkid's probe of {}", path));
    }
    const int found = blkid_do_safeprobe(pr);
    if (found == 1) {
      return std::optional<FilesystemProbe>{};
    }
    if (found == -2) {
      return std::optional(FilesystemProbe{"more than one signature", std::nullopt});
    }
    if (found != 0) {
      return make_error(Errc::device, fmt::format("blkid cannot read {}", path));
    }
    FilesystemProbe result;
    if (const auto type = plan_blkid_value(pr, "TYPE")) {
      result.type = *type;
    } else if (const auto table = plan_blkid_value(pr, "PTTYPE")) {
      result.type = "partition table " + *table;
    } else {
      return std::optional<FilesystemProbe>{};
    }
    if (const auto block = plan_blkid_value(pr, "BLOCK_SIZE")) {
      if (const auto value = parse_decimal_u32(*block); value && *value != 0) {
        result.block_size = *value;
      }
    }
    return std::optional(std::move(result));
  }

 private:
  static std::optional<std::string> plan_blkid_value(blkid_probe pr, const char *name) {
    const char *data = nullptr;
    std::size_t length = 0;
    if (blkid_probe_lookup_value(pr, name, &data, &length) != 0 || data == nullptr) {
      return std::nullopt;
    }
    std::string value(data, length);
    while (!value.empty() && value.back() == '\0') {  // the length counts the NUL
      value.pop_back();
    }
    return value;
  }
};

// ---- sysfs ----

std::optional<DevNumber> plan_read_dev(const std::filesystem::path &file) {
  std::ifstream in(file);
  std::string text;
  if (!in || !std::getline(in, text)) {
    return std::nullopt;
  }
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    return std::nullopt;
  }
  const std::string_view view(text);
  const auto dev_major = parse_decimal_u32(view.substr(0, colon));
  const auto dev_minor = parse_decimal_u32(view.substr(colon + 1));
  if (!dev_major || !dev_minor) {
    return std::nullopt;
  }
  return DevNumber{*dev_major, *dev_minor};
}

bool plan_is_partition(const std::filesystem::path &dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / "partition", ec);
}

// Walks the devices under (`up`) or over a block device's sysfs directory, adding each once.
class PlanFamilyWalk {
 public:
  explicit PlanFamilyWalk(DeviceFamily &family) : family_(family) {}

  void up(const std::filesystem::path &dir, bool start) {
    std::error_code ec;
    if (plan_is_partition(dir)) {
      const auto disk = dir.parent_path();
      if (add(disk, start ? "its disk" : "a device it is built on")) {
        up(disk, false);
      }
    }
    for (const auto &entry : std::filesystem::directory_iterator(dir / "slaves", ec)) {
      const auto below = std::filesystem::canonical(entry.path(), ec);
      if (!ec && add(below, "a device it is built on")) {
        up(below, false);
      }
    }
  }

  void down(const std::filesystem::path &dir, bool start) {
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_directory(ec) && !entry.is_symlink(ec) && plan_is_partition(entry.path()) &&
          add(entry.path(), start ? "a partition of it" : "a device built on it")) {
        down(entry.path(), false);
      }
    }
    for (const auto &entry : std::filesystem::directory_iterator(dir / "holders", ec)) {
      const auto above = std::filesystem::canonical(entry.path(), ec);
      if (!ec && add(above, "a device built on it")) {
        down(above, false);
      }
    }
  }

 private:
  // False when it was seen (or has no number).
  bool add(const std::filesystem::path &dir, const char *relation) {
    const auto number = plan_read_dev(dir / "dev");
    if (!number || (family_.device && *number == *family_.device)) {
      return false;
    }
    const auto same = [&](const RelatedDevice &r) { return r.number == *number; };
    if (std::any_of(family_.related.begin(), family_.related.end(), same)) {
      return false;
    }
    family_.related.push_back(RelatedDevice{*number, dir.filename().string(), relation});
    return true;
  }

  DeviceFamily &family_;
};

std::string plan_dev(DevNumber n) { return fmt::format("{}:{}", n.major, n.minor); }

// The largest power of two that divides `bytes` (its lowest set bit), at most 65536.
std::uint64_t plan_largest_dividing(std::uint64_t bytes) {
  const std::uint64_t low = bytes & (~bytes + 1);
  return low == 0 ? kBlockLayerMaxSectorSize
                  : std::min<std::uint64_t>(low, kBlockLayerMaxSectorSize);
}

Result<void> plan_check_side(const CryptSide &side, const KnownCapabilities &known,
                             std::string_view which) {
  const std::uint32_t sector = side.sector_size;
  if (auto gated = check_sector_size(sector, known.caps, MappingType::plain, known.target_loaded);
      !gated) {
    return make_error(gated.error().code, fmt::format("{}: {}", which, gated.error().message));
  }
  if (side.iv_large_sectors && sector <= kSectorBytes) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: iv_large_sectors counts the IV in sector-size units and "
                                  "needs a sector size above 512",
                                  which));
  }
  return Ok{};
}

Result<void> plan_check_aligned(const PlanFacts &facts, std::uint32_t sector,
                                std::string_view which) {
  const std::uint64_t unit = sector / kSectorBytes;
  for (const auto &[name, value] :
       {std::pair<const char *, std::uint64_t>{"--offset", facts.offset},
        std::pair<const char *, std::uint64_t>{"--skip", facts.skip}}) {
    if (value % unit != 0) {
      return make_error(Errc::refused,
                        fmt::format("{} {} is not a multiple of {} sector size {} ({} sectors): "
                                    "offset and skip stay as they are, so they must be; choose "
                                    "a sector size that divides them",
                                    name, value, which, sector, unit));
    }
  }
  return Ok{};
}

}  // namespace

std::unique_ptr<FilesystemProber> make_blkid_prober() { return std::make_unique<BlkidProber>(); }

DeviceFamily device_family(const std::filesystem::path &sysfs, DevNumber device) {
  DeviceFamily family;
  family.device = device;
  std::error_code ec;
  const auto dir = std::filesystem::canonical(sysfs / "dev" / "block" / plan_dev(device), ec);
  if (ec) {
    return family;
  }
  PlanFamilyWalk walk(family);
  walk.up(dir, true);
  walk.down(dir, true);
  return family;
}

Result<DeviceFamily> device_family_of(const std::string &device,
                                      const std::filesystem::path &sysfs) {
  struct stat st {};
  if (stat(device.c_str(), &st) != 0) {
    return make_error(Errc::device,
                      fmt::format("cannot look at {}: {}", device, std::strerror(errno)), errno);
  }
  if (!S_ISBLK(st.st_mode)) {
    return DeviceFamily{};
  }
  return device_family(sysfs, DevNumber{major(st.st_rdev), minor(st.st_rdev)});
}

Result<StatePlace> state_place(const std::filesystem::path &state) {
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(state, ec);
  const auto dir = (ec ? state : absolute).parent_path();
  StatePlace place;
  place.state = state.string();
  struct stat st {};
  const bool found = stat(dir.c_str(), &st) == 0;
  if (!found || !S_ISDIR(st.st_mode)) {
    const std::string why = found ? std::string("is not a directory")
                            : errno == ENOENT
                                ? std::string("does not exist")
                                : fmt::format("cannot be looked at ({})", std::strerror(errno));
    return make_error(Errc::invalid_argument,
                      fmt::format("the state file's directory {} {}: make it on a filesystem "
                                  "other than the volume's",
                                  dir.string(), why));
  }
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("cannot ask which filesystem {} is on: {}", dir.string(), std::strerror(errno)),
        errno);
  }
  place.fs_magic = static_cast<std::uint32_t>(fs.f_type);  // a 32-bit magic, signed or not
  place.fs_device = DevNumber{major(st.st_dev), minor(st.st_dev)};
  return place;
}

Result<std::uint64_t> check_reencrypt_geometry(const PlanFacts &facts) {
  if (auto ok = plan_check_side(facts.old_side, facts.known, "the volume's sector size"); !ok) {
    return ok.error();
  }
  if (auto ok = plan_check_side(facts.new_side, facts.known, "the new sector size"); !ok) {
    return ok.error();
  }
  if (auto ok = plan_check_aligned(facts, facts.old_side.sector_size, "the volume's"); !ok) {
    return ok.error();
  }
  if (auto ok = plan_check_aligned(facts, facts.new_side.sector_size, "the new"); !ok) {
    return ok.error();
  }
  const std::uint64_t device_sectors = facts.device_bytes / kSectorBytes;
  if (facts.offset >= device_sectors) {
    return make_error(Errc::refused, fmt::format("--offset {} is not inside {} ({} sectors)",
                                                 facts.offset, facts.device, device_sectors));
  }
  const std::uint64_t available = device_sectors - facts.offset;
  const std::uint64_t sectors = facts.size.value_or(0) == 0 ? available : *facts.size;
  if (sectors > available) {
    return make_error(Errc::refused,
                      fmt::format("--size {} exceeds the {} sectors of {} after --offset {}",
                                  sectors, available, facts.device, facts.offset));
  }
  const std::uint64_t data_bytes = sectors * kSectorBytes;
  const std::uint64_t larger = std::max(facts.old_side.sector_size, facts.new_side.sector_size);
  if (data_bytes % larger != 0) {
    const std::uint64_t whole = data_bytes / larger * larger;
    return make_error(
        Errc::refused,
        fmt::format("the data on {}, {} bytes from --offset {}, is not a multiple of {} bytes, "
                    "the larger sector size: its last {} bytes would be in no whole sector; "
                    "shrink what is on it and give --size {}, or use sector sizes of at most {}",
                    facts.device, data_bytes, facts.offset, larger, data_bytes - whole,
                    whole / kSectorBytes, plan_largest_dividing(data_bytes)));
  }
  if (data_bytes == 0) {
    return make_error(Errc::refused,
                      fmt::format("no data on {} after --offset {} is a whole sector of {} "
                                  "bytes: nothing to reencrypt",
                                  facts.device, facts.offset, larger));
  }
  return data_bytes;
}

Result<void> check_reencrypt_device_free(const PlanFacts &facts) {
  if (facts.user) {
    return make_error(Errc::busy,
                      fmt::format("{} is in use ({}): reencrypt converts a closed volume; close "
                                  "its mapping and whatever holds it first",
                                  facts.device, *facts.user));
  }
  return Ok{};
}

Result<void> check_reencrypt_state_place(const PlanFacts &facts) {
  const StatePlace &place = facts.state;
  if (place.fs_magic == kTmpfsMagic || place.fs_magic == kRamfsMagic) {
    return make_error(
        Errc::refused,
        fmt::format("the state file {} is on a {}, which a reboot empties: a power "
                    "cut mid-way would lose the run's position and its journal; "
                    "put it on a disk filesystem that is not on {}",
                    place.state, place.fs_magic == kTmpfsMagic ? "tmpfs" : "ramfs", facts.device));
  }
  if (!facts.family.device || !place.fs_device) {
    return Ok{};
  }
  if (*place.fs_device == *facts.family.device) {
    return make_error(Errc::refused,
                      fmt::format("the state file {} is on {} itself, which the run overwrites: "
                                  "put it on another disk (a plain volume has no room of its "
                                  "own)",
                                  place.state, facts.device));
  }
  for (const RelatedDevice &related : facts.family.related) {
    if (related.number == *place.fs_device) {
      return make_error(Errc::refused,
                        fmt::format("the state file {} is on {} ({}), which shares its storage "
                                    "with {} ({}): put it on another disk",
                                    place.state, related.name, plan_dev(related.number),
                                    facts.device, related.relation));
    }
  }
  return Ok{};
}

Result<void> check_reencrypt_boot(const PlanFacts &facts) {
  if (facts.initrd_volume && facts.boot_use) {
    return make_error(
        Errc::refused,
        fmt::format("{} is {} in lbscrypttab, which {}: the initramfs opens it at boot and "
                    "cannot resume a run, so a reboot mid-way would not boot; keep its line as "
                    "it is and reencrypt it from a rescue or live system (or another "
                    "installation) where {} holds no /, /usr or resume device, then boot this "
                    "one again",
                    facts.device, *facts.initrd_volume, *facts.boot_use, *facts.initrd_volume));
  }
  if (facts.initrd_volume) {
    return make_error(
        Errc::refused,
        fmt::format("{} is {} in lbscrypttab, an x-initrd.attach volume: the initramfs opens it "
                    "at boot and cannot resume a run, so a reboot mid-way would boot without "
                    "it; drop x-initrd.attach from its line and run update-initramfs for the "
                    "run, or reencrypt it from another system",
                    facts.device, *facts.initrd_volume));
  }
  return Ok{};
}

Result<void> check_reencrypt_old_key(const PlanFacts &facts, std::vector<std::string> &notes) {
  if (facts.probe || facts.old_key_checked) {
    return Ok{};
  }
  if (facts.force) {
    notes.push_back(
        fmt::format("warning: --force: nothing shows the old key of {} is right (no "
                    "signature through it, no check=): a wrong one turns all of it "
                    "into noise",
                    facts.device));
    return Ok{};
  }
  return make_error(Errc::key,
                    fmt::format("nothing shows the old key of {} is right: blkid finds no "
                                "signature through it and no check= confirmed it, and a wrong "
                                "old key turns the whole volume into noise; check the key and "
                                "parameters (open it read-only and look), or give --force for "
                                "a volume of raw data",
                                facts.device));
}

Result<void> check_reencrypt_write_unit(const PlanFacts &facts, std::vector<std::string> &notes) {
  const std::uint32_t new_sector = facts.new_side.sector_size;
  if (facts.probe && facts.probe->block_size && *facts.probe->block_size < new_sector) {
    const std::uint32_t block = *facts.probe->block_size;
    return make_error(
        Errc::refused,
        fmt::format("the {} filesystem on {} writes in units of {} bytes (blkid's BLOCK_SIZE), "
                    "below the new sector size {}: it could not write once the sector grows; "
                    "choose a new "
                    "sector size of at most {}, or recreate the filesystem with blocks (XFS: "
                    "sectors) of at least {} bytes",
                    facts.probe->type, facts.device, block, new_sector, block, new_sector));
  }
  if (new_sector <= facts.old_side.sector_size || (facts.probe && facts.probe->block_size)) {
    return Ok{};
  }
  const std::string what =
      facts.probe ? fmt::format("blkid finds {}, which has no BLOCK_SIZE", facts.probe->type)
                  : std::string("blkid finds no signature");
  if (facts.force) {
    notes.push_back(
        fmt::format("warning: --force: the smallest write to {} is unknown ({}); "
                    "writes below {} bytes will fail",
                    facts.device, what, new_sector));
    return Ok{};
  }
  return make_error(Errc::refused,
                    fmt::format("the smallest write to {} is unknown ({}), as for swap, an "
                                "LVM PV or a database on the raw device: a write below the new "
                                "sector size {} would fail; give --force if everything on it "
                                "writes whole {}-byte units",
                                facts.device, what, new_sector, new_sector));
}

Result<ReencryptPlan> plan_reencrypt(const PlanFacts &facts) {
  ReencryptPlan plan;
  const auto data_bytes = check_reencrypt_geometry(facts);
  if (!data_bytes) {
    return data_bytes.error();
  }
  plan.data_bytes = *data_bytes;
  if (auto ok = check_reencrypt_device_free(facts); !ok) {
    return ok.error();
  }
  if (auto ok = check_reencrypt_state_place(facts); !ok) {
    return ok.error();
  }
  if (auto ok = check_reencrypt_boot(facts); !ok) {
    return ok.error();
  }
  if (auto ok = check_reencrypt_old_key(facts, plan.notes); !ok) {
    return ok.error();
  }
  if (auto ok = check_reencrypt_write_unit(facts, plan.notes); !ok) {
    return ok.error();
  }
  return plan;
}

}  // namespace lbscrypt
