// SPDX-License-Identifier: GPL-2.0-only
// The identity of a reencrypt run's device (reencrypt/identity.hpp): read from sysfs, kept
// as JSON in the state file, compared on --resume.
#include "lbscrypt/reencrypt/identity.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <system_error>
#include <utility>

namespace lbscrypt {

namespace {

using IdentityJson = nlohmann::ordered_json;

constexpr std::uint64_t kIdentitySectorBytes = 512;
// How deep stacked devices are followed (a dm device on a partition of a loop device is 3).
constexpr int kIdentityMaxDepth = 8;
constexpr std::string_view kIdentityDeleted = " (deleted)";
// SCSI's Unit Serial Number VPD page: byte 1 is the page code, bytes 2-3 the length.
constexpr std::uint8_t kVpdSerialPage = 0x80;
constexpr std::size_t kVpdHeaderBytes = 4;
constexpr std::size_t kVpdMaxBytes = 4096;

std::string identity_devt(DevNumber number) {
  return fmt::format("{}:{}", number.major, number.minor);
}

std::optional<std::uint64_t> identity_number(const std::filesystem::path &file) {
  const auto text = read_sysfs_text(file);
  if (!text) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc{} || end != text->data() + text->size()) {
    return std::nullopt;
  }
  return value;
}

// The serial in SCSI's VPD page 0x80, as sysfs gives it raw.
std::optional<std::string> identity_vpd_serial(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::string page(kVpdMaxBytes, '\0');
  in.read(page.data(), static_cast<std::streamsize>(page.size()));
  page.resize(static_cast<std::size_t>(in.gcount()));
  if (page.size() < kVpdHeaderBytes || static_cast<std::uint8_t>(page[1]) != kVpdSerialPage) {
    return std::nullopt;
  }
  const std::size_t length =
      (std::size_t{static_cast<std::uint8_t>(page[2])} << 8U) | static_cast<std::uint8_t>(page[3]);
  std::string serial = page.substr(kVpdHeaderBytes, length);
  const auto first = serial.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return std::nullopt;
  }
  return serial.substr(first, serial.find_last_not_of(" \t\r\n") - first + 1);
}

// The USB device a SCSI disk hangs off: the nearest directory above its `device` that has a
// USB serial, with the disk's LUN (the last field of its H:C:T:L directory).
std::optional<std::string> identity_usb_serial(const std::filesystem::path &sysfs,
                                               const std::filesystem::path &dir) {
  std::error_code ec;
  const auto device = std::filesystem::canonical(dir / "device", ec);
  if (ec) {
    return std::nullopt;
  }
  const auto top = std::filesystem::canonical(sysfs, ec);
  if (ec) {
    return std::nullopt;
  }
  const std::string address = device.filename().string();
  const auto colon = address.rfind(':');
  const std::string lun = colon == std::string::npos ? std::string("?") : address.substr(colon + 1);
  for (auto at = device.parent_path(); at != at.parent_path() && at != top; at = at.parent_path()) {
    const auto vendor = read_sysfs_text(at / "idVendor");
    const auto serial = read_sysfs_text(at / "serial");
    if (vendor && serial) {
      return fmt::format("usb:{}:{}:{}:lun{}", ascii_id_text(*vendor),
                         ascii_id_text(read_sysfs_text(at / "idProduct").value_or("")),
                         ascii_id_text(*serial), ascii_id_text(lun));
    }
  }
  return std::nullopt;
}

std::optional<std::string> identity_serial(const std::filesystem::path &sysfs,
                                           const std::filesystem::path &dir) {
  if (const auto serial = read_sysfs_text(dir / "serial")) {
    return "virtio:" + ascii_id_text(*serial);
  }
  if (const auto serial = read_sysfs_text(dir / "device" / "serial")) {
    return "device:" + ascii_id_text(*serial);
  }
  if (const auto serial = identity_vpd_serial(dir / "device" / "vpd_pg80")) {
    return "vpd80:" + ascii_id_text(*serial);
  }
  return identity_usb_serial(sysfs, dir);
}

Result<LoopBacking> identity_loop(const std::filesystem::path &loop, const std::string &name) {
  LoopBacking backing;
  const auto file = read_sysfs_text(loop / "backing_file");
  if (!file) {
    return make_error(Errc::device, fmt::format("the loop device {} names no file", name));
  }
  backing.file = ascii_id_text(*file);  // for messages, and JSON takes only UTF-8
  if (file->ends_with(kIdentityDeleted)) {
    return make_error(Errc::device, fmt::format("the loop device {} reads a deleted file ({})",
                                                name, ascii_id_text(*file)));
  }
  struct stat st {};
  if (stat(file->c_str(), &st) != 0) {
    return make_error(Errc::device,
                      fmt::format("the file {} of the loop device {} cannot be looked at: {}",
                                  ascii_id_text(*file), name, std::strerror(errno)),
                      errno);
  }
  backing.file_device = DevNumber{major(st.st_dev), minor(st.st_dev)};
  backing.inode = st.st_ino;
  backing.offset = identity_number(loop / "offset").value_or(0);
  backing.size_limit = identity_number(loop / "sizelimit").value_or(0);
  return backing;
}

void identity_sort_under(std::vector<DeviceFingerprint> &under);

// `dir` is a device's directory under sysfs, links resolved.
Result<DeviceFingerprint> identity_of_dir(const std::filesystem::path &sysfs,
                                          const std::filesystem::path &dir, int depth) {
  const std::string name = dir.filename().string();
  if (depth > kIdentityMaxDepth) {
    return make_error(Errc::device, fmt::format("{} is stacked more than {} devices deep", name,
                                                kIdentityMaxDepth));
  }
  DeviceFingerprint fingerprint;
  const auto sectors = identity_number(dir / "size");
  if (!sectors) {
    return make_error(Errc::device, fmt::format("sysfs has no size for {}", name));
  }
  fingerprint.size_bytes = *sectors * kIdentitySectorBytes;
  std::error_code ec;
  if (std::filesystem::is_directory(dir / "loop", ec)) {
    auto loop = identity_loop(dir / "loop", name);
    if (!loop) {
      return loop.error();
    }
    fingerprint.loop = std::move(loop).value();
    return fingerprint;
  }
  if (std::filesystem::is_directory(dir / "dm", ec)) {
    if (auto uuid = read_sysfs_text(dir / "dm" / "uuid")) {
      fingerprint.dm_uuid = ascii_id_text(*uuid);
    } else if (auto dm_name = read_sysfs_text(dir / "dm" / "name")) {
      fingerprint.dm_name = ascii_id_text(*dm_name);
    }
    for (std::filesystem::directory_iterator it(dir / "slaves", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      std::error_code link_error;
      const auto slave = std::filesystem::canonical(it->path(), link_error);
      if (link_error) {
        return make_error(Errc::device, fmt::format("{}: cannot follow slave {}", name,
                                                    it->path().filename().string()));
      }
      auto under = identity_of_dir(sysfs, slave, depth + 1);
      if (!under) {
        return under.error();
      }
      fingerprint.under.push_back(std::move(under).value());
    }
    identity_sort_under(fingerprint.under);  // as fingerprint_to_json writes them
    return fingerprint;
  }
  if (const auto number = identity_number(dir / "partition")) {
    fingerprint.partition = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(*number, std::numeric_limits<std::uint32_t>::max()));
    fingerprint.partition_start = identity_number(dir / "start").value_or(0);
    auto disk = identity_of_dir(sysfs, dir.parent_path(), depth + 1);
    if (!disk) {
      return disk.error();
    }
    fingerprint.under.push_back(std::move(disk).value());
    return fingerprint;
  }
  fingerprint.serial = identity_serial(sysfs, dir);
  return fingerprint;
}

IdentityJson identity_json(const DeviceFingerprint &fingerprint, bool with_names);
std::string identity_sort_key(const DeviceFingerprint &fingerprint);

// The text two identities are compared by: the loop files' names left out (a renamed file is
// the same file), the devices underneath sorted.
std::string identity_canonical(const DeviceFingerprint &fingerprint) {
  return identity_json(fingerprint, false).dump();
}

IdentityJson identity_json(const DeviceFingerprint &fingerprint, bool with_names) {
  IdentityJson out;
  out["size_bytes"] = fingerprint.size_bytes;
  if (fingerprint.loop) {
    IdentityJson loop;
    if (with_names) {
      loop["file"] = fingerprint.loop->file;
    }
    loop["device"] = identity_devt(fingerprint.loop->file_device);
    loop["inode"] = fingerprint.loop->inode;
    loop["offset"] = fingerprint.loop->offset;
    loop["size_limit"] = fingerprint.loop->size_limit;
    out["loop"] = std::move(loop);
  }
  if (fingerprint.serial) {
    out["serial"] = *fingerprint.serial;
  }
  if (fingerprint.dm_uuid) {
    out["dm_uuid"] = *fingerprint.dm_uuid;
  }
  if (fingerprint.dm_name) {
    out["dm_name"] = *fingerprint.dm_name;
  }
  if (fingerprint.partition) {
    out["partition"] = *fingerprint.partition;
  }
  if (fingerprint.partition_start) {
    out["partition_start"] = *fingerprint.partition_start;
  }
  if (!fingerprint.under.empty()) {
    std::vector<std::pair<std::string, IdentityJson>> under;
    for (const auto &item : fingerprint.under) {
      under.emplace_back(identity_sort_key(item), identity_json(item, with_names));
    }
    std::sort(under.begin(), under.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    IdentityJson list = IdentityJson::array();
    for (auto &item : under) {
      list.push_back(std::move(item.second));
    }
    out["under"] = std::move(list);
  }
  return out;
}

// The order of the devices underneath: by what is compared, then by the file names.
std::string identity_sort_key(const DeviceFingerprint &fingerprint) {
  return identity_canonical(fingerprint) + "\n" + identity_json(fingerprint, true).dump();
}

void identity_sort_under(std::vector<DeviceFingerprint> &under) {
  std::sort(under.begin(), under.end(), [](const auto &a, const auto &b) {
    return identity_sort_key(a) < identity_sort_key(b);
  });
}

std::string identity_optional(const std::optional<std::string> &text) {
  return text ? fmt::format("'{}'", *text) : std::string("none");
}

std::string identity_loop_text(const LoopBacking &loop) {
  return fmt::format("{}, inode {} on {}", loop.file.empty() ? "?" : loop.file, loop.inode,
                     identity_devt(loop.file_device));
}

// The devices underneath, in canonical order.
std::vector<const DeviceFingerprint *> identity_sorted_under(const DeviceFingerprint &fp) {
  std::vector<const DeviceFingerprint *> out;
  for (const auto &item : fp.under) {
    out.push_back(&item);
  }
  std::sort(out.begin(), out.end(), [](const auto *a, const auto *b) {
    return identity_canonical(*a) < identity_canonical(*b);
  });
  return out;
}

std::optional<FingerprintDifference> identity_loop_difference(const DeviceFingerprint &run,
                                                              const DeviceFingerprint &now) {
  constexpr std::string_view kAttach = "attach the run's file and resume";
  if (run.loop && !now.loop) {
    return FingerprintDifference{fmt::format("is not a loop device over the run's file now ({})",
                                             identity_loop_text(*run.loop)),
                                 std::string(kAttach)};
  }
  if (!run.loop && now.loop) {
    return FingerprintDifference{
        fmt::format("is now a loop device over {}, and the run's device was not one",
                    identity_loop_text(*now.loop)),
        "give the run's device"};
  }
  if (!run.loop) {
    return std::nullopt;
  }
  const LoopBacking &was = *run.loop;
  const LoopBacking &is = *now.loop;
  if (was.file_device != is.file_device || was.inode != is.inode) {
    return FingerprintDifference{fmt::format("now reads another file ({}; the run's was {})",
                                             identity_loop_text(is), identity_loop_text(was)),
                                 std::string(kAttach)};
  }
  if (was.offset != is.offset) {
    return FingerprintDifference{
        fmt::format("now reads its file from byte {}, the run's from byte {}", is.offset,
                    was.offset),
        fmt::format("attach the run's file with offset {} and resume", was.offset)};
  }
  if (was.size_limit != is.size_limit) {
    return FingerprintDifference{
        fmt::format("now has a size limit of {} bytes, the run's {} (0: none)", is.size_limit,
                    was.size_limit),
        fmt::format("attach the run's file with size limit {} and resume", was.size_limit)};
  }
  return std::nullopt;
}

std::optional<FingerprintDifference> identity_own_difference(const DeviceFingerprint &run,
                                                             const DeviceFingerprint &now) {
  if (auto loop = identity_loop_difference(run, now)) {
    return loop;
  }
  if (run.dm_uuid != now.dm_uuid) {
    return FingerprintDifference{
        fmt::format("has device-mapper uuid {} now, the run's had {}",
                    identity_optional(now.dm_uuid), identity_optional(run.dm_uuid)),
        "set up the run's mapping and resume"};
  }
  if (run.dm_name != now.dm_name) {
    return FingerprintDifference{
        fmt::format("is now the device-mapper device named {}, the run's was {}",
                    identity_optional(now.dm_name), identity_optional(run.dm_name)),
        "set up the run's mapping and resume"};
  }
  if (run.serial != now.serial) {
    return FingerprintDifference{
        fmt::format("has serial {} now, the run's disk had {}", identity_optional(now.serial),
                    identity_optional(run.serial)),
        "connect the run's disk and resume"};
  }
  if (run.partition != now.partition || run.partition_start != now.partition_start) {
    const auto where = [](const DeviceFingerprint &fp) {
      return fp.partition ? fmt::format("partition {} at sector {}", *fp.partition,
                                        fp.partition_start.value_or(0))
                          : std::string("no partition");
    };
    return FingerprintDifference{fmt::format("is now {}, the run's was {}", where(now), where(run)),
                                 "give the run's partition (its table as it was) and resume"};
  }
  if (run.size_bytes != now.size_bytes) {
    return FingerprintDifference{
        fmt::format("is now {} bytes, the run's device was {} bytes", now.size_bytes,
                    run.size_bytes),
        "give the run's device at the size it had (a device that grew or shrank is not the one "
        "the run converts)"};
  }
  return std::nullopt;
}

// Reads an identity back from JSON; `field` names where it is, for messages.
class IdentityReader {
 public:
  [[nodiscard]] bool failed() const { return error_.has_value(); }
  [[nodiscard]] const std::string &error() const { return *error_; }
  void fail(const std::string &field, std::string_view rule) {
    if (!error_) {
      error_ = fmt::format("field \"{}\" {}", field, rule);
    }
  }

  DeviceFingerprint read(const nlohmann::json &object, const std::string &field, int depth) {
    DeviceFingerprint fp;
    if (depth > kIdentityMaxDepth) {
      fail(field, "is nested too deep");
      return fp;
    }
    if (!keys(object, field,
              {"size_bytes", "loop", "serial", "dm_uuid", "dm_name", "partition", "partition_start",
               "under"},
              {"size_bytes"})) {
      return fp;
    }
    fp.size_bytes = number(object, field, "size_bytes");
    if (object.contains("loop")) {
      fp.loop = read_loop(object.at("loop"), field + ".loop");
    }
    fp.serial = text(object, field, "serial");
    fp.dm_uuid = text(object, field, "dm_uuid");
    fp.dm_name = text(object, field, "dm_name");
    if (object.contains("partition")) {
      fp.partition = static_cast<std::uint32_t>(
          number(object, field, "partition", std::numeric_limits<std::uint32_t>::max()));
    }
    if (object.contains("partition_start")) {
      fp.partition_start = number(object, field, "partition_start");
    }
    if (const auto under = object.find("under"); under != object.end()) {
      if (!under->is_array()) {
        fail(field + ".under", "is not a list");
        return fp;
      }
      for (std::size_t i = 0; i < under->size() && !failed(); ++i) {
        fp.under.push_back(read(under->at(i), fmt::format("{}.under[{}]", field, i), depth + 1));
      }
    }
    return fp;
  }

 private:
  bool keys(const nlohmann::json &object, const std::string &field,
            std::initializer_list<std::string_view> allowed,
            std::initializer_list<std::string_view> required) {
    if (!object.is_object()) {
      fail(field, "is not a JSON object");
      return false;
    }
    for (const auto &item : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
        fail(fmt::format("{}.{}", field, ascii_id_text(item.key())),
             "is not a field lbscrypt knows");
        return false;
      }
    }
    const auto *const missing =
        std::find_if(required.begin(), required.end(),
                     [&](std::string_view key) { return !object.contains(key); });
    if (missing != required.end()) {
      fail(fmt::format("{}.{}", field, *missing), "is missing");
      return false;
    }
    return true;
  }

  std::uint64_t number(const nlohmann::json &object, const std::string &field, std::string_view key,
                       std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const auto it = object.find(key);
    if (failed() || it == object.end()) {
      return 0;
    }
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > max) {
      fail(fmt::format("{}.{}", field, key),
           fmt::format("is not a whole number from 0 to {}", max));
      return 0;
    }
    return it->get<std::uint64_t>();
  }

  std::optional<std::string> text(const nlohmann::json &object, const std::string &field,
                                  std::string_view key) {
    const auto it = object.find(key);
    if (failed() || it == object.end()) {
      return std::nullopt;
    }
    if (!it->is_string()) {
      fail(fmt::format("{}.{}", field, key), "is not a string");
      return std::nullopt;
    }
    return it->get<std::string>();
  }

  LoopBacking read_loop(const nlohmann::json &object, const std::string &field) {
    LoopBacking loop;
    if (!keys(object, field, {"file", "device", "inode", "offset", "size_limit"},
              {"device", "inode", "offset", "size_limit"})) {
      return loop;
    }
    loop.file = text(object, field, "file").value_or("");
    const std::string devt = text(object, field, "device").value_or("");
    const auto colon = devt.find(':');
    const auto part = [&](std::string_view digits) -> std::optional<std::uint32_t> {
      std::uint32_t value = 0;
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size()) {
        return std::nullopt;
      }
      return value;
    };
    const std::string_view view(devt);
    const auto dev_major = colon == std::string::npos ? std::nullopt : part(view.substr(0, colon));
    const auto dev_minor = colon == std::string::npos ? std::nullopt : part(view.substr(colon + 1));
    if (!failed() && (!dev_major || !dev_minor)) {
      fail(field + ".device", "is not MAJOR:MINOR");
      return loop;
    }
    if (dev_major && dev_minor) {
      loop.file_device = DevNumber{*dev_major, *dev_minor};
    }
    loop.inode = number(object, field, "inode");
    loop.offset = number(object, field, "offset");
    loop.size_limit = number(object, field, "size_limit");
    return loop;
  }

  std::optional<std::string> error_;
};

}  // namespace

Result<DeviceFingerprint> read_device_fingerprint(const std::filesystem::path &sysfs,
                                                  DevNumber device) {
  std::error_code ec;
  const auto dir = std::filesystem::canonical(sysfs / "dev" / "block" / identity_devt(device), ec);
  if (ec) {
    return make_error(Errc::device,
                      fmt::format("sysfs does not know block device {}", identity_devt(device)));
  }
  return identity_of_dir(sysfs, dir, 0);
}

bool fingerprint_distinguishes(const DeviceFingerprint &fingerprint) {
  if (fingerprint.loop || fingerprint.serial || fingerprint.dm_uuid) {
    return true;
  }
  return std::any_of(
      fingerprint.under.begin(), fingerprint.under.end(),
      [](const DeviceFingerprint &under) { return fingerprint_distinguishes(under); });
}

std::optional<FingerprintDifference> fingerprint_difference(const DeviceFingerprint &run,
                                                            const DeviceFingerprint &now) {
  if (identity_canonical(run) == identity_canonical(now)) {
    return std::nullopt;
  }
  if (auto own = identity_own_difference(run, now)) {
    return own;
  }
  if (run.under.size() != now.under.size()) {
    return FingerprintDifference{fmt::format("is now built on {} devices, the run's on {}",
                                             now.under.size(), run.under.size()),
                                 "give the run's device and resume"};
  }
  const auto was = identity_sorted_under(run);
  const auto is = identity_sorted_under(now);
  for (std::size_t i = 0; i < was.size(); ++i) {
    if (auto inner = fingerprint_difference(*was[i], *is[i])) {
      return FingerprintDifference{fmt::format("is built on a device that {}", inner->what),
                                   inner->hint};
    }
  }
  return FingerprintDifference{fmt::format("is {} now, the run's was {}", describe_fingerprint(now),
                                           describe_fingerprint(run)),
                               "give the run's device and resume"};
}

std::string describe_fingerprint(const DeviceFingerprint &fingerprint) {
  if (fingerprint.loop) {
    std::string text = fmt::format("a loop device over {}", identity_loop_text(*fingerprint.loop));
    if (fingerprint.loop->offset != 0) {
      text += fmt::format(", offset {}", fingerprint.loop->offset);
    }
    if (fingerprint.loop->size_limit != 0) {
      text += fmt::format(", size limit {}", fingerprint.loop->size_limit);
    }
    return text;
  }
  if (fingerprint.dm_uuid) {
    return fmt::format("the device-mapper device with uuid '{}'", *fingerprint.dm_uuid);
  }
  if (fingerprint.dm_name) {
    return fmt::format("the device-mapper device named '{}'", *fingerprint.dm_name);
  }
  if (fingerprint.partition && fingerprint.under.size() == 1) {
    return fmt::format("partition {} of {}", *fingerprint.partition,
                       describe_fingerprint(fingerprint.under.front()));
  }
  if (fingerprint.serial) {
    return fmt::format("a disk with serial '{}'", *fingerprint.serial);
  }
  return fmt::format("a device of {} bytes", fingerprint.size_bytes);
}

std::vector<std::string> find_devices_by_fingerprint(const std::filesystem::path &sysfs,
                                                     const DeviceFingerprint &fingerprint) {
  const std::string want = identity_canonical(fingerprint);
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(sysfs / "dev" / "block", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code link_error;
    const auto dir = std::filesystem::canonical(it->path(), link_error);
    if (link_error) {
      continue;
    }
    const auto got = identity_of_dir(sysfs, dir, 0);
    if (!got || identity_canonical(*got) != want) {
      continue;
    }
    std::string name = dir.filename().string();
    std::replace(name.begin(), name.end(), '!', '/');
    found.push_back("/dev/" + name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string fingerprint_to_json(const DeviceFingerprint &fingerprint) {
  return identity_json(fingerprint, true)
      .dump(-1, ' ', false, IdentityJson::error_handler_t::replace);
}

Result<DeviceFingerprint> fingerprint_from_json(std::string_view text, std::string_view field) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    return make_error(Errc::invalid_argument,
                      fmt::format("field \"{}\" is not JSON ({})", field, e.what()));
  }
  IdentityReader reader;
  DeviceFingerprint fingerprint = reader.read(object, std::string(field), 0);
  if (reader.failed()) {
    return make_error(Errc::invalid_argument, reader.error());
  }
  return fingerprint;
}

Result<std::string> bind_run_device(const std::filesystem::path &sysfs, const std::string &path,
                                    std::optional<DevNumber> number, const DeviceFingerprint &run) {
  std::optional<FingerprintDifference> difference;
  std::optional<std::string> unreadable;
  if (number) {
    auto now = read_device_fingerprint(sysfs, *number);
    if (now) {
      difference = fingerprint_difference(run, *now);
      if (!difference) {
        return path;
      }
    } else {
      unreadable = now.error().message;
    }
  }
  if (fingerprint_distinguishes(run)) {
    const auto found = find_devices_by_fingerprint(sysfs, run);
    if (found.size() == 1) {
      return found.front();
    }
    if (found.size() > 1) {
      return make_error(
          Errc::refused,
          fmt::format("{} devices are the run's device ({}: {}): detach or "
                      "disconnect all but one and resume",
                      found.size(), describe_fingerprint(run), fmt::join(found, ", ")));
    }
  }
  if (difference) {
    return make_error(Errc::refused,
                      fmt::format("{} {}: {}", path, difference->what, difference->hint));
  }
  if (unreadable) {
    return make_error(Errc::refused,
                      fmt::format("{} cannot be identified ({}), and no other device is the "
                                  "run's ({}): give the run's device and resume",
                                  path, *unreadable, describe_fingerprint(run)));
  }
  return make_error(Errc::refused,
                    fmt::format("{} is no block device now, and no device is the run's ({}): "
                                "attach or connect it and resume",
                                path, describe_fingerprint(run)));
}

}  // namespace lbscrypt
