// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/operations.hpp"

#include <fmt/format.h>

#include "lbscrypt/cipher.hpp"
#include "lbscrypt/numbers.hpp"
#include "lbscrypt/torn.hpp"

#include <filesystem>
#include <system_error>
#include <thread>

namespace lbscrypt {

namespace {

// The mapping's length in sectors, from --size or the device; and the LUKS rule. --size
// never skips the device: a path that exists must be a block device (or a regular file,
// which open attaches to a loop device), and --size must fit in it. Only a table for another
// machine (--assume-version) may name a path that is not here, or one whose size cannot be
// read here; its --size then stands in for the device.
Result<std::uint64_t> mapping_length(const MappingRequest &request, const Environment &env) {
  const bool offline = env.assume_version.has_value() && request.size.has_value();
  const auto kind = env.devices->path_kind(request.device);
  if (!kind) {
    return kind.error();
  }
  if (*kind == PathKind::missing) {
    if (offline) {
      return *request.size;
    }
    if (env.assume_version) {
      return make_error(Errc::device,
                        fmt::format("Device {} does not exist, and without --size (or with "
                                    "--size 0) the mapping is the rest of it: give --size in "
                                    "sectors for a table meant for another machine",
                                    request.device));
    }
    return make_error(
        Errc::device,
        fmt::format("Device {} does not exist: give the path of a block device{}", request.device,
                    request.size ? " (or --assume-version, for a table meant for "
                                   "another machine)"
                                 : ""));
  }
  if (*kind != PathKind::block_device && *kind != PathKind::regular_file) {
    return make_error(
        Errc::device,
        fmt::format("{} is {}, not a block device: dm-crypt needs a block device{}", request.device,
                    describe(*kind), request.size ? ", whatever --size says" : ""));
  }
  const auto bytes = env.devices->size_bytes(request.device);
  if (!bytes) {
    if (offline) {
      return *request.size;
    }
    return bytes.error();
  }
  const std::uint64_t device_sectors = *bytes / kSectorBytes;
  if (request.offset >= device_sectors) {
    return make_error(Errc::refused, fmt::format("--offset {} is not inside device {} ({} sectors)",
                                                 request.offset, request.device, device_sectors));
  }
  const std::uint64_t available = device_sectors - request.offset;
  if (request.size && *request.size > available) {
    return make_error(Errc::refused,
                      fmt::format("--size {} exceeds the {} sectors of {} after --offset {}",
                                  *request.size, available, request.device, request.offset));
  }
  if (request.sector_size > kPortableMaxSectorSize) {
    const auto luks = env.devices->has_luks_header(request.device);
    if (!luks) {
      return luks.error();
    }
    if (*luks) {
      return make_error(Errc::luks_refused,
                        fmt::format("{} holds a LUKS header; LUKS stays at sector size 4096 on "
                                    "every kernel, {} is refused",
                                    request.device, request.sector_size));
    }
  }
  return request.size.value_or(available);
}

Result<void> check_alignment(const MappingRequest &request, std::uint64_t length) {
  const std::uint64_t unit = request.sector_size / kSectorBytes;
  if (length == 0) {
    return make_error(Errc::refused,
                      "the mapping would be empty: give a device with room after "
                      "--offset");
  }
  if (length % unit != 0) {
    return make_error(Errc::refused,
                      fmt::format("the mapping's size, {} sectors, is not a multiple of sector "
                                  "size {} ({} sectors); use --size {}",
                                  length, request.sector_size, unit, length / unit * unit));
  }
  if (request.skip % unit != 0) {
    return make_error(Errc::refused,
                      fmt::format("--skip {} is not a multiple of sector size {} ({} sectors): "
                                  "the kernel refuses such an IV offset",
                                  request.skip, request.sector_size, unit));
  }
  if (request.offset % unit != 0) {
    return make_error(Errc::refused,
                      fmt::format("--offset {} is not a multiple of sector size {} ({} sectors)",
                                  request.offset, request.sector_size, unit));
  }
  return Ok{};
}

}  // namespace

Result<KnownCapabilities> capabilities(const Environment &env) {
  KnownCapabilities known;
  if (env.assume_version) {
    known.caps.version = *env.assume_version;
  } else if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument,
                      "no kernel to ask: give --assume-version and --assume-page-size");
  } else {
    const auto version = env.kernel->target_version(env.target_type);
    if (!version) {
      return version.error();
    }
    known.target_loaded = version->has_value();
    known.caps.version = version->value_or(TargetVersion{});
  }
  if (env.assume_page_size) {
    known.caps.page_size = *env.assume_page_size;
  } else if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument,
                      "no kernel to ask: give --assume-version and --assume-page-size");
  } else {
    known.caps.page_size = env.kernel->page_size();
  }
  return known;
}

namespace {

// What prepare_table() knows of the kernel. Up to 4096 every crypt target takes the size, so
// an unreachable device-mapper (a build machine, a container) is no reason to refuse.
Result<KnownCapabilities> table_capabilities(const MappingRequest &request,
                                             const Environment &env) {
  auto known = capabilities(env);
  if (known && !known->target_loaded && env.load_target && !env.assume_version &&
      request.sector_size > kPortableMaxSectorSize && env.target_type == "crypt" &&
      !env.kernel->module_installed(kModuleName)) {
    // No dm-crypt-lbs here (a kernel whose own dm_crypt has the larger sectors, or a
    // machine that never installed ours): the in-tree target is loaded and judged.
    const auto loaded = env.kernel->load_target(env.target_type);
    if (loaded && loaded->has_value()) {
      known->target_loaded = true;
      known->caps.version = **loaded;
    }
  }
  if (known || env.assume_version || env.kernel == nullptr ||
      known.error().code == Errc::invalid_argument) {
    return known;
  }
  if (request.sector_size > kPortableMaxSectorSize) {
    return make_error(known.error().code,
                      fmt::format("sector size {} needs the crypt target's version and "
                                  "device-mapper cannot be asked ({}); pass --assume-version",
                                  request.sector_size, known.error().message));
  }
  KnownCapabilities fallback;
  fallback.target_reachable = false;
  fallback.target_loaded = false;
  fallback.caps.version = TargetVersion{};  // below 1.30.0: the rules every target shares
  fallback.caps.page_size = env.assume_page_size ? *env.assume_page_size : env.kernel->page_size();
  return fallback;
}

}  // namespace

Result<CryptTable> prepare_table(const MappingRequest &given, const Environment &env) {
  MappingRequest request = given;
  if (request.size == 0U) {
    request.size.reset();  // as cryptsetup: --size 0 is the rest of the device
  }
  if (request.flags.iv_large_sectors && request.sector_size <= kDefaultSectorSize) {
    // cryptsetup refuses it too: at 512 there is nothing to count in larger units.
    return make_error(Errc::invalid_argument,
                      "--iv-large-sectors counts the IV in sector-size units and needs "
                      "--sector-size above 512: drop it, or give the sector size");
  }
  // Every word that goes into the line, before anything else is asked.
  if (auto r = check_target_name(env.target_type); !r) {
    return r.error();
  }
  if (auto r = check_table_word("device", request.device); !r) {
    return r.error();
  }
  if (auto r = check_table_word("--cipher", request.cipher); !r) {
    return r.error();
  }
  const auto known = table_capabilities(request, env);
  if (!known) {
    return known.error();
  }
  if (const auto gated =
          check_sector_size(request.sector_size, known->caps, request.type, known->target_loaded);
      !gated) {
    return gated.error();
  }
  if (const auto cipher = parse_cipher_spec(request.cipher); !cipher) {
    return cipher.error();
  }
  const auto length = mapping_length(request, env);
  if (!length) {
    return length.error();
  }
  if (const auto aligned = check_alignment(request, *length); !aligned) {
    return aligned.error();
  }
  CryptTable table;
  table.length = *length;
  table.cipher = request.cipher;
  table.iv_offset = request.skip;
  table.device = request.device;
  if (!request.device.starts_with('/')) {
    // The kernel would look a relative path up in the loading process's directory: a path
    // that is here goes into the table absolute (predict() refuses any other relative word).
    const auto kind = env.devices->path_kind(request.device);
    std::error_code error;
    const auto absolute = std::filesystem::absolute(request.device, error);
    if (kind && *kind != PathKind::missing && !error) {
      table.device = absolute.lexically_normal().string();
      if (auto r = check_table_word("device", table.device); !r) {
        return r.error();  // the current directory's path cannot go into a table line
      }
    }
  }
  table.offset = request.offset;
  CryptOptions &o = table.options;
  static_cast<CryptFlags &>(o) = request.flags;
  if (request.sector_size != kDefaultSectorSize) {
    o.sector_size_arg = std::to_string(request.sector_size);
  }
  // Belt and braces: never hand out a table the kernel would load differently. The key is
  // not asked for yet; its size is what the cipher is checked against.
  CryptTable probe = table;
  if (request.key_bytes != 0) {
    probe.key = SecretBuffer(request.key_bytes);
  }
  const Prediction p = predict(probe, known->caps.version, known->caps.page_size);
  if (p.outcome != Outcome::accepted) {
    return make_error(Errc::refused, fmt::format("the kernel would not load this table as "
                                                 "written: {}",
                                                 p.reason));
  }
  return table;
}

std::string mapping_name(std::string_view argument) {
  constexpr std::string_view kMapperDir = "/dev/mapper/";
  if (argument.substr(0, kMapperDir.size()) == kMapperDir && argument.size() > kMapperDir.size()) {
    argument.remove_prefix(kMapperDir.size());
  }
  return std::string(argument);
}

std::string plain_uuid(std::string_view name) {
  constexpr std::size_t kDmUuidBytes = 128;
  std::string uuid = fmt::format("CRYPT-PLAIN-{}", name);
  if (uuid.size() > kDmUuidBytes) {
    uuid.resize(kDmUuidBytes);
  }
  return uuid;
}

std::string type_from_uuid(std::string_view uuid) {
  constexpr std::string_view kPrefix = "CRYPT-";
  if (uuid.substr(0, kPrefix.size()) != kPrefix) {
    return "n/a";
  }
  uuid.remove_prefix(kPrefix.size());
  const std::string_view type = uuid.substr(0, uuid.find('-'));
  for (const std::string_view known : {"PLAIN", "LUKS1", "LUKS2", "LOOPAES", "TCRYPT", "BITLK",
                                       "FVAULT2", "VERITY", "INTEGRITY"}) {
    if (type == known && uuid.size() > type.size()) {
      return std::string(type);
    }
  }
  return "n/a";
}

Result<CheckReport> check(const Environment &env, std::optional<std::uint64_t> sector_size,
                          MappingType type, const std::optional<std::string> &device) {
  if (device) {
    if (env.devices == nullptr) {
      return make_error(Errc::invalid_argument, "--device needs the block devices to look at");
    }
    const auto kind = env.devices->path_kind(*device);
    if (!kind) {
      return kind.error();
    }
    if (*kind != PathKind::block_device) {
      return make_error(Errc::device,
                        *kind == PathKind::missing
                            ? fmt::format("Device {} does not exist", *device)
                            : fmt::format("--device {} is {}, not a block device: name the "
                                          "block device a mapping would sit on",
                                          *device, describe(*kind)));
    }
  }
  const auto known = capabilities(env);
  if (!known) {
    return known.error();
  }
  CheckReport report;
  report.known = *known;
  report.type = type;
  report.sector_size = sector_size;
  report.max_plain = max_sector_size(known->caps, MappingType::plain);
  report.max_luks = max_sector_size(known->caps, MappingType::luks);
  if (!known->target_loaded) {
    report.max_plain = kPortableMaxSectorSize;
  }
  if (sector_size) {
    if (const auto verdict =
            check_sector_size(*sector_size, known->caps, type, known->target_loaded);
        !verdict) {
      report.refusal = verdict.error();
    }
  }
  if (device && !report.refusal) {
    MappingPlace place;
    place.device = *device;
    place.sector_size =
        sector_size.value_or(type == MappingType::luks ? report.max_luks : report.max_plain);
    report.torn_warning = torn_sector_warning(place, env);
  }
  return report;
}

Result<void> check_device_free(const std::string &device, bool shared, const Environment &env) {
  if (shared || env.devices == nullptr) {
    return Ok{};
  }
  if (const auto user = env.devices->user_of(device)) {
    return make_error(Errc::busy,
                      fmt::format("Cannot use device {} which is in use (held by {}): close that "
                                  "first, or give --shared to map it a second time",
                                  printable(device), printable(*user)));
  }
  return Ok{};
}

Result<OpenResult> open_mapping(const std::string &name, CryptTable table, bool read_only,
                                const Environment &env, bool shared) {
  if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument, "opening a mapping needs the running kernel");
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return make_error(Errc::invalid_argument,
                      fmt::format("'{}' is not a mapping name: give a name without '/'", name));
  }
  const auto existing = env.kernel->info(name);
  if (existing) {
    return make_error(Errc::exists, fmt::format("Device {} already exists.", name));
  }
  if (existing.error().code != Errc::not_found) {
    return existing.error();
  }
  if (auto free = check_device_free(table.device, shared, env); !free) {
    return free.error();
  }
  OpenResult result;
  LoopDevice loop;  // held until the mapping holds the loop device itself
  if (env.devices != nullptr && env.devices->is_regular_file(table.device)) {
    auto attached = env.devices->attach_loop(table.device, read_only);
    if (!attached) {
      return attached.error();
    }
    result.loop_file = table.device;
    loop = std::move(attached).value();
    table.device = loop.path;
  }
  CreateRequest request;
  request.name = name;
  request.uuid = plain_uuid(name);
  request.target_type = env.target_type;
  request.length = table.length;
  request.params = format_table_params(table);
  request.read_only = read_only;
  auto created = env.kernel->create(request);
  if (!created) {
    return created.error();
  }
  // Read back what the kernel recorded; a mapping that differs from the request goes away.
  const auto lines = env.kernel->table(name);
  const auto expected = table.sector_size();
  if (lines && lines->size() == 1) {
    const auto loaded = parse_table_params(lines->front().params.view(), 0, table.length);
    if (loaded && expected && loaded->sector_size() && *loaded->sector_size() == *expected) {
      result.torn_warning = torn_sector_warning(place_of(table), env);
      result.device = *created;
      result.table = std::move(table);
      return result;
    }
  }
  const auto removed = env.kernel->remove(name);
  return make_error(
      Errc::kernel,
      fmt::format("{} was created but its table does not read back "
                  "as requested; {}",
                  name, removed ? "it was removed again" : "and it could not be removed"));
}

namespace {

// Whether the live table's device word (major:minor from the kernel) is `path`.
bool same_device(const std::string &live, const std::string &path, const Environment &env) {
  if (live == path || env.devices == nullptr) {
    return live == path;
  }
  const std::string node = env.devices->resolve(live);
  if (env.devices->is_regular_file(path)) {
    const auto file = env.devices->loop_backing_file(node);
    return file && *file == path;
  }
  std::error_code ec;
  const auto real = std::filesystem::canonical(path, ec);
  return node == path || (!ec && node == real.string());
}

// The first way `live` differs from `wanted`, or nullopt.
std::optional<std::string> table_difference(const CryptTable &live, const CryptTable &wanted,
                                            std::uint32_t key_bytes, const Environment &env) {
  const auto differs = [](std::string_view what, const auto &have, const auto &want) {
    return fmt::format("{} {}, not {}", what, have, want);
  };
  if (live.cipher != wanted.cipher) {
    return differs("cipher", live.cipher, wanted.cipher);
  }
  if (key_size_bytes(live.key) != key_bytes) {
    return differs("key size", key_size_bytes(live.key) * 8, key_bytes * 8);
  }
  if (!same_device(live.device, wanted.device, env)) {
    return differs("device",
                   env.devices != nullptr ? env.devices->resolve(live.device) : live.device,
                   wanted.device);
  }
  if (live.offset != wanted.offset) {
    return differs("offset", live.offset, wanted.offset);
  }
  if (live.iv_offset != wanted.iv_offset) {
    return differs("skip", live.iv_offset, wanted.iv_offset);
  }
  if (live.length != wanted.length) {
    return differs("size", live.length, wanted.length);
  }
  const auto live_sector = live.sector_size();
  const auto wanted_sector = wanted.sector_size();
  if (!live_sector || !wanted_sector || *live_sector != *wanted_sector) {
    return differs("sector size", live_sector ? *live_sector : 0,
                   wanted_sector ? *wanted_sector : 0);
  }
  for (const FlagWord &flag : kFlagWords) {
    if (live.options.*flag.member != wanted.options.*flag.member) {
      return fmt::format("{} {}", flag.table, live.options.*flag.member ? "set" : "not set");
    }
  }
  if (live.options.integrity || live.options.integrity_key_size) {
    return std::string("integrity set");
  }
  return std::nullopt;
}

}  // namespace

Result<std::optional<DeviceInfo>> active_as(const std::string &name, const CryptTable &table,
                                            std::uint32_t key_bytes, bool read_only,
                                            const Environment &env) {
  if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument, "comparing a mapping needs the running kernel");
  }
  const auto info = env.kernel->info(name);
  if (!info) {
    if (info.error().code == Errc::not_found) {
      return std::optional<DeviceInfo>();
    }
    return info.error();
  }
  const auto refuse = [&](const std::string &why) {
    return make_error(Errc::exists,
                      fmt::format("Device {} is already active with another table ({}): close it "
                                  "first, or give another name",
                                  name, printable(why)));
  };
  const auto lines = env.kernel->table(name);
  if (!lines) {
    return lines.error();
  }
  if (lines->size() != 1 || lines->front().type != env.target_type) {
    return refuse(fmt::format("not one {} target", env.target_type));
  }
  const auto live =
      parse_table_params(lines->front().params.view(), lines->front().start, lines->front().length);
  if (!live) {
    return refuse(live.error().message);
  }
  if (const auto difference = table_difference(*live, table, key_bytes, env)) {
    return refuse(*difference);
  }
  if (info->read_only != read_only) {
    return refuse(info->read_only ? "read-only" : "read/write");
  }
  return std::optional<DeviceInfo>(*info);
}

Result<void> close_mapping(const std::string &name, const Environment &env,
                           const CloseRetry &retry) {
  if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument, "closing a mapping needs the running kernel");
  }
  // info() tells a missing mapping (cryptsetup's exit 4); the table ioctl only fails.
  if (const auto info = env.kernel->info(name); !info) {
    return info.error().code == Errc::not_found
               ? make_error(Errc::not_found, fmt::format("Device {} is not active.", name))
               : info.error();
  }
  const auto lines = env.kernel->table(name);
  if (!lines) {
    return lines.error();
  }
  for (const auto &line : *lines) {
    if (line.type != env.target_type) {
      return make_error(Errc::invalid_argument,
                        fmt::format("{} is a '{}' mapping, not '{}'; not removed", name, line.type,
                                    env.target_type));
    }
  }
  for (unsigned attempt = 0;; ++attempt) {
    const auto info = env.kernel->info(name);
    if (!info) {
      return info.error().code == Errc::not_found
                 ? make_error(Errc::not_found, fmt::format("Device {} is not active.", name))
                 : info.error();
    }
    Result<void> removed = make_error(Errc::busy, "in use");
    if (info->open_count == 0) {
      removed = env.kernel->remove(name);
    }
    if (removed || removed.error().code != Errc::busy) {
      return removed;
    }
    if (attempt >= retry.busy_retries) {
      return make_error(Errc::busy, fmt::format("Device {} is still in use.", name));
    }
    std::this_thread::sleep_for(retry.retry_delay);
  }
}

Result<StatusReport> mapping_status(const std::string &name, const Environment &env) {
  if (env.kernel == nullptr) {
    return make_error(Errc::invalid_argument, "status needs the running kernel");
  }
  const auto info = env.kernel->info(name);
  if (!info) {
    return info.error();
  }
  StatusReport report;
  report.device = *info;
  report.type = type_from_uuid(info->uuid);
  const auto lines = env.kernel->table(name);
  if (!lines) {
    return lines.error();
  }
  if (lines->size() != 1 || lines->front().type != env.target_type) {
    report.is_crypt = false;
    return report;
  }
  const TargetLine &line = lines->front();
  auto table = parse_table_params(line.params.view(), line.start, line.length);
  if (!table) {
    return table.error();
  }
  report.key_bits = key_size_bytes(table->key) * 8;
  report.key_location = std::holds_alternative<KeyringKey>(table->key) ? "keyring" : "dm-crypt";
  if (auto *bytes = std::get_if<SecretBuffer>(&table->key)) {
    *bytes = SecretBuffer(bytes->size());  // zeros: status never shows the key
  }
  const auto sector_size = table->sector_size();
  report.sector_size = sector_size ? *sector_size : 0;
  report.device_path = env.devices != nullptr ? env.devices->resolve(table->device) : table->device;
  if (env.devices != nullptr) {
    report.loop_file = env.devices->loop_backing_file(report.device_path);
  }
  MappingPlace place = place_of(*table);
  place.device = report.device_path;
  report.torn_warning = torn_sector_warning(place, env);
  report.table = std::move(table).value();
  const auto version = env.kernel->target_version(line.type);
  if (version) {
    report.target_version = *version;
  }
  return report;
}

}  // namespace lbscrypt
