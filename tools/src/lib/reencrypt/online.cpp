// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/online.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <openssl/crypto.h>

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <variant>

#include "lbscrypt/reencrypt/io.hpp"

namespace lbscrypt {

namespace {

constexpr std::uint64_t kOnlineSectorBytes = 512;
constexpr std::size_t kOnlineRunNameChars = 16;

bool online_same_key(const KeySpec &spec, const SecretBuffer &key) {
  const auto *bytes = std::get_if<SecretBuffer>(&spec);
  return bytes != nullptr && bytes->size() == key.size() &&
         CRYPTO_memcmp(bytes->data(), key.data(), key.size()) == 0;
}

std::uint32_t online_sector(const CryptTable &line) {
  const auto sector = line.sector_size();
  return sector ? *sector : 0;
}

Error online_mismatch(std::string_view name, std::string_view field, const std::string &live,
                      const std::string &given) {
  return make_error(Errc::refused,
                    fmt::format("the active mapping {} has {} {}, not the {} given: give the "
                                "parameters {} was opened with (nothing was written)",
                                name, field, live, given, name));
}

// Whether `line` is the segment of `side` with `key` (at the line's own start).
bool online_is_segment(const CryptTable &line, const ReencryptState &state, const CryptSide &side,
                       const SecretBuffer &key) {
  return line.cipher == side.cipher && online_sector(line) == side.sector_size &&
         line.options.iv_large_sectors == side.iv_large_sectors &&
         line.offset == state.offset + line.start && line.iv_offset == state.skip + line.start &&
         online_same_key(line.key, key);
}

// Two tables alike as the kernel reads them: line by line, every field, keys in constant time.
bool online_same_table(const std::vector<CryptTable> &a, const std::vector<CryptTable> &b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const CryptTable &x = a[i];
    const CryptTable &y = b[i];
    const auto *key = std::get_if<SecretBuffer>(&y.key);
    if (x.start != y.start || x.length != y.length || x.cipher != y.cipher ||
        x.iv_offset != y.iv_offset || x.device != y.device || x.offset != y.offset ||
        !(x.options == y.options) || key == nullptr || !online_same_key(x.key, *key)) {
      return false;
    }
  }
  return true;
}

// "MAJOR:MINOR" of a block device node, or the path itself when it is none.
std::string online_device_word(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
    return fmt::format("{}:{}", major(st.st_rdev), minor(st.st_rdev));
  }
  return path;
}

constexpr const char *kOnlineHotzoneWord = "hotzone";

// The hotzone device's table: the whole device, one to one.
SecretBuffer online_linear_params(const std::string &device) {
  SecretBuffer params;
  params.append(fmt::format("{} 0", device));
  return params;
}

}  // namespace

Result<LiveMapping> read_live_mapping(Kernel &kernel, std::string_view name,
                                      std::string_view target_type) {
  auto info = kernel.info(name);
  if (!info) {
    if (info.error().code == Errc::not_found) {
      return make_error(Errc::not_found,
                        fmt::format("no active mapping named {}: --active-name takes the name of "
                                    "the open volume (as lbscrypt status shows it)",
                                    name));
    }
    return info.error();
  }
  auto lines = kernel.table(name);
  if (!lines) {
    return lines.error();
  }
  LiveMapping live;
  live.name = std::string(name);
  live.info = *info;
  if (lines->empty()) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} has no table: it is not a volume to "
                                  "reencrypt",
                                  name));
  }
  for (const TargetLine &line : *lines) {
    if (line.type != target_type) {
      return make_error(Errc::refused,
                        fmt::format("the active mapping {} has a {} line at sector {}, not {}: "
                                    "reencrypt converts plain crypt volumes",
                                    name, printable(line.type), line.start, target_type));
    }
    auto parsed = parse_table_params(line.params.view(), line.start, line.length);
    if (!parsed) {
      return make_error(Errc::refused,
                        fmt::format("the table of the active mapping {} does not parse: {}", name,
                                    parsed.error().message));
    }
    if (std::holds_alternative<KeyringKey>(parsed->key)) {
      return make_error(Errc::refused,
                        fmt::format("the active mapping {} takes its key from the kernel keyring, "
                                    "so its table does not carry it: close it and reencrypt "
                                    "offline, or open it with the key in the table",
                                    name));
    }
    if (!std::holds_alternative<SecretBuffer>(parsed->key)) {
      return make_error(Errc::refused,
                        fmt::format("the active mapping {} has no key: it is not a volume to "
                                    "reencrypt",
                                    name));
    }
    if (parsed->options.integrity) {
      return make_error(Errc::refused,
                        fmt::format("the active mapping {} has integrity metadata: reencrypt "
                                    "converts plain volumes without it",
                                    name));
    }
    live.lines.push_back(std::move(parsed).value());
  }
  return live;
}

Result<std::uint64_t> check_live_parameters(const LiveMapping &live, const MappingRequest &given) {
  const std::string &name = live.name;
  if (live.lines.size() != 1) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} has {} table lines: a run of lbscrypt "
                                  "reencrypt left it so; go on with --resume and its state file",
                                  name, live.lines.size()));
  }
  if (live.info.suspended) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} is suspended: resume it first (if a "
                                  "reencrypt run left it so, run that run's --abort)",
                                  name));
  }
  const CryptTable &line = live.lines.front();
  if (line.cipher != given.cipher) {
    return online_mismatch(name, "cipher", line.cipher, given.cipher);
  }
  const std::uint32_t key_bytes = key_size_bytes(line.key);
  if (given.key_bytes != 0 && key_bytes != given.key_bytes) {
    return online_mismatch(name, "key size", fmt::format("{} bits", key_bytes * 8),
                           fmt::format("{} bits", given.key_bytes * 8));
  }
  const auto sector = line.sector_size();
  if (!sector || *sector != given.sector_size) {
    return online_mismatch(name, "sector size",
                           sector ? std::to_string(*sector) : line.options.sector_size_arg.value(),
                           std::to_string(given.sector_size));
  }
  if (line.options.iv_large_sectors != given.flags.iv_large_sectors) {
    return online_mismatch(name, "iv_large_sectors",
                           line.options.iv_large_sectors ? "set" : "unset",
                           given.flags.iv_large_sectors ? "set" : "unset");
  }
  if (line.offset != given.offset) {
    return online_mismatch(name, "offset", std::to_string(line.offset),
                           fmt::format("--offset {}", given.offset));
  }
  if (line.iv_offset != given.skip) {
    return online_mismatch(name, "iv_offset", std::to_string(line.iv_offset),
                           fmt::format("--skip {}", given.skip));
  }
  if (given.size.value_or(0) != 0 && *given.size != line.length) {
    return online_mismatch(name, "length", fmt::format("{} sectors", line.length),
                           fmt::format("--size {}", *given.size));
  }
  return line.length;
}

Result<void> check_live_key(const LiveMapping &live, const SecretBuffer &old_key) {
  if (live.lines.empty() || !online_same_key(live.lines.front().key, old_key)) {
    return make_error(Errc::key,
                      fmt::format("the old key given is not the key of the active mapping {}: "
                                  "give the key it was opened with (nothing was written)",
                                  live.name));
  }
  return Ok{};
}

Result<void> check_live_holder(const LiveMapping &live, const std::string &device,
                               const std::optional<std::string> &user, std::string_view run_id) {
  const std::string ours =
      fmt::format("device-mapper mapping {} (dm-{})", live.name, live.info.minor);
  // user_of joins the holders with ", "; a run's private mappings are lbscrypt-reenc-<16 hex
  // of its id>-old and -new (reencrypt/io.hpp).
  const std::string run_prefix =
      run_id.size() >= kOnlineRunNameChars
          ? "device-mapper mapping " + reencrypt_mapping_name_prefix(run_id)
          : std::string{};
  bool found = false;
  std::string others;
  const std::string_view text = user ? std::string_view(*user) : std::string_view{};
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t comma = text.find(", ", at);
    const std::string_view holder =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    at = comma == std::string_view::npos ? text.size() : comma + 2;
    if (holder == ours) {
      found = true;
    } else if (run_prefix.empty() || !holder.starts_with(run_prefix)) {
      others += others.empty() ? "" : ", ";
      others += holder;
    }
  }
  if (!found || !others.empty()) {
    return make_error(Errc::busy,
                      fmt::format("{} is held by {}, not by {} alone: online reencrypt needs the "
                                  "device under the active mapping and nothing else",
                                  device, user.value_or("nothing"), live.name));
  }
  return Ok{};
}

std::vector<CryptTable> online_segments(const ReencryptState &state, OnlineLayout layout,
                                        const SecretBuffer &old_key, const SecretBuffer &new_key,
                                        const std::string &device,
                                        const std::string &hotzone_device,
                                        const CryptFlags &flags) {
  const std::uint64_t end = state.data_bytes / kOnlineSectorBytes;
  const std::uint64_t split = std::min(layout.converted, state.data_bytes) / kOnlineSectorBytes;
  const std::uint64_t routed_end =
      std::min(layout.converted + layout.routed, state.data_bytes) / kOnlineSectorBytes;
  std::vector<CryptTable> segments;
  const auto add = [&](std::uint64_t start, std::uint64_t stop, const CryptSide &side,
                       const SecretBuffer &key, const std::string &under) {
    if (stop <= start) {
      return;
    }
    CryptTable line;
    line.start = start;
    line.length = stop - start;
    line.cipher = side.cipher;
    line.key = key;
    // dm-crypt's IV of a sector: iv_offset + (the sector - the line's start), in 512-byte
    // units, shifted to the sector size's units with iv_large_sectors. Starting each line's
    // iv_offset (and its offset on the device) at the line's own start gives every sector
    // what the whole-device table gives it, with or without iv_large_sectors.
    line.iv_offset = state.skip + start;
    line.device = under;
    line.offset = state.offset + start;
    static_cast<CryptFlags &>(line.options) = flags;
    line.options.iv_large_sectors = side.iv_large_sectors;
    if (side.sector_size != kDefaultSectorSize) {
      line.options.sector_size_arg = std::to_string(side.sector_size);
    }
    segments.push_back(std::move(line));
  };
  add(0, split, state.new_side, new_key, device);
  add(split, routed_end, state.new_side, new_key, hotzone_device);
  add(std::max(split, routed_end), end, state.old_side, old_key, device);
  return segments;
}

std::vector<CryptTable> online_segments(const ReencryptState &state, std::uint64_t boundary,
                                        const SecretBuffer &old_key, const SecretBuffer &new_key,
                                        const std::string &device, const CryptFlags &flags) {
  return online_segments(state, OnlineLayout{boundary, 0}, old_key, new_key, device, device, flags);
}

std::vector<TargetLine> online_table_lines(const std::vector<CryptTable> &segments,
                                           std::string_view target_type) {
  std::vector<TargetLine> lines;
  for (const CryptTable &segment : segments) {
    TargetLine line;
    line.start = segment.start;
    line.length = segment.length;
    line.type = std::string(target_type);
    line.params = format_table_params(segment);
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string online_hotzone_name(std::string_view run_id) {
  return reencrypt_mapping_name_prefix(run_id) + kOnlineHotzoneWord;
}

Result<std::optional<std::string>> online_hotzone_device(Kernel &kernel, std::string_view run_id) {
  const std::string name = online_hotzone_name(run_id);
  auto info = kernel.info(name);
  if (!info) {
    if (info.error().code == Errc::not_found) {
      return std::optional<std::string>{};
    }
    return info.error();
  }
  if (info->uuid != reencrypt_mapping_uuid_prefix(run_id) + kOnlineHotzoneWord) {
    return make_error(Errc::exists,
                      fmt::format("a device-mapper device named {} exists and is not this run's "
                                  "(uuid '{}'): remove or rename it (dmsetup), then resume",
                                  name, printable(info->uuid)));
  }
  return std::optional<std::string>(fmt::format("{}:{}", info->major, info->minor));
}

std::optional<std::string> live_device(const LiveMapping &live, std::string_view hotzone_device) {
  for (const CryptTable &line : live.lines) {
    if (line.device != hotzone_device) {
      return line.device;
    }
  }
  return std::nullopt;
}

Result<OnlineLayout> live_layout(const LiveMapping &live, const ReencryptState &state,
                                 const SecretBuffer &old_key, const SecretBuffer &new_key,
                                 std::string_view hotzone_device) {
  const std::string &name = live.name;
  const std::uint64_t end = state.data_bytes / kOnlineSectorBytes;
  const auto not_ours = [&](const std::string &why) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} is not a table of this run ({}): give "
                                  "the name of the volume the run converts, and its keys",
                                  name, why));
  };
  std::uint64_t total = 0;
  for (const CryptTable &line : live.lines) {
    if (line.start != total) {
      return not_ours(fmt::format("a line starts at {}, not {}", line.start, total));
    }
    total += line.length;
  }
  if (total != end) {
    return not_ours(fmt::format("{} sectors long, the run's data {}", total, end));
  }
  // The lines in order: new on the device, new through the hotzone device, old on the device;
  // each part at most once, any of them absent.
  enum Part { converted = 0, routed = 1, rest = 2 };
  const std::optional<std::string> device = live_device(live, hotzone_device);
  OnlineLayout layout;
  int next = converted;
  for (const CryptTable &line : live.lines) {
    const bool on_hotzone = !hotzone_device.empty() && line.device == hotzone_device;
    int part = rest;
    if (on_hotzone) {
      part = routed;
    } else if (online_is_segment(line, state, state.new_side, new_key)) {
      part = converted;
    } else if (online_is_segment(line, state, state.old_side, old_key)) {
      part = rest;
    } else {
      return not_ours(
          fmt::format("its line at sector {} has neither the old parameters and key "
                      "nor the new",
                      line.start));
    }
    if (part == routed && !online_is_segment(line, state, state.new_side, new_key)) {
      return not_ours(
          fmt::format("its line at sector {} on the run's hotzone device does not "
                      "have the new parameters and key",
                      line.start));
    }
    if (!on_hotzone && line.device != device) {
      return not_ours("its lines are on two devices");
    }
    if (part < next) {
      return not_ours(fmt::format("its line at sector {} is out of order", line.start));
    }
    next = part + 1;
    if (part == converted) {
      layout.converted = (line.start + line.length) * kOnlineSectorBytes;
    } else if (part == routed) {
      layout.converted = line.start * kOnlineSectorBytes;
      layout.routed = line.length * kOnlineSectorBytes;
    }
  }
  return layout;
}

Result<std::uint64_t> live_boundary(const LiveMapping &live, const ReencryptState &state,
                                    const SecretBuffer &old_key, const SecretBuffer &new_key,
                                    std::string_view hotzone_device) {
  auto layout = live_layout(live, state, old_key, new_key, hotzone_device);
  if (!layout) {
    return layout.error();
  }
  return layout->converted;
}

OnlineSwitch::OnlineSwitch(Kernel &kernel, const LiveMapping &live, const ReencryptState &state,
                           SecretBuffer old_key, SecretBuffer new_key, std::string target_type,
                           std::string hotzone_device)
    : kernel_(&kernel),
      name_(live.name),
      state_(state),
      old_key_(std::move(old_key)),
      new_key_(std::move(new_key)),
      device_(live_device(live, hotzone_device).value_or(online_device_word(state.device))),
      flags_(live.lines.empty() ? CryptFlags{}
                                : static_cast<const CryptFlags &>(live.lines.front().options)),
      read_only_(live.info.read_only),
      target_type_(std::move(target_type)),
      name_suspended_(live.info.suspended),
      expected_(live.lines),
      hz_name_(online_hotzone_name(state.run_id)),
      hz_device_(std::move(hotzone_device)) {}

void OnlineSwitch::set_layout(OnlineLayout layout) {
  layout_ = layout;
  boundary_ = layout.converted;
}

std::vector<CryptTable> OnlineSwitch::segments(OnlineLayout layout) const {
  return online_segments(state_, layout, old_key_, new_key_, device_, hz_device_, flags_);
}

// Loads `segments` into NAME's inactive slot.
Result<void> OnlineSwitch::load_name(const std::vector<CryptTable> &segments) {
  return kernel_->reload(name_, online_table_lines(segments, target_type_), read_only_);
}

// NAME's table becomes the one of `layout`: loaded, NAME suspended for the swap alone (no
// freeze: I/O in flight completes, new I/O waits the moment of the swap), resumed.
Result<void> OnlineSwitch::swap_name(OnlineLayout layout) {
  const auto wanted = segments(layout);
  if (auto r = load_name(wanted); !r) {
    return r;
  }
  if (!name_suspended_) {
    if (auto r = kernel_->suspend(name_, SuspendMode::queue); !r) {
      static_cast<void>(load_name(expected_));  // a resume by anyone keeps the live table
      return Error{r.error().code,
                   fmt::format("cannot suspend {} to swap its table: {}", name_, r.error().message),
                   r.error().os_errno};
    }
    name_suspended_ = true;
  }
  if (auto r = kernel_->resume(name_); !r) {
    return r;
  }
  name_suspended_ = false;
  expected_ = wanted;
  layout_ = layout;
  return Ok{};
}

Result<void> OnlineSwitch::adopt() {
  if (hz_known_ || hz_device_.empty()) {
    return Ok{};
  }
  auto info = kernel_->info(hz_name_);
  if (!info) {
    return info.error();
  }
  hz_suspended_ = info->suspended;
  // Any table but the linear one (an error table a failed run loaded) is replaced by it
  // before the device resumes.
  const auto table = kernel_->table(hz_name_);
  hz_error_ = !table || table->size() != 1 || table->front().type != "linear" ||
              table->front().params.view() != online_linear_params(device_).view();
  hz_known_ = true;
  // A hotzone NAME routes to a held or failing device is not known to be converted.
  pending_ = layout_.routed > 0 && (hz_suspended_ || hz_error_);
  return Ok{};
}

// The hotzone device, made (linear over the whole device, private) or found.
Result<void> OnlineSwitch::hotzone_device() {
  if (hz_known_) {
    return Ok{};
  }
  if (hz_device_.empty()) {
    auto found = online_hotzone_device(*kernel_, state_.run_id);
    if (!found) {
      return found.error();
    }
    hz_device_ = found->value_or(std::string{});
  }
  if (!hz_device_.empty()) {
    return adopt();
  }
  CreateRequest request;
  request.name = hz_name_;
  request.uuid = reencrypt_mapping_uuid_prefix(state_.run_id) + kOnlineHotzoneWord;
  request.target_type = "linear";
  request.length = state_.offset + state_.data_bytes / kOnlineSectorBytes;
  request.params = online_linear_params(device_);
  request.read_only = read_only_;
  request.private_device = true;
  auto made = kernel_->create(request);
  if (!made) {
    return made.error();
  }
  hz_device_ = fmt::format("{}:{}", made->major, made->minor);
  hz_known_ = true;
  hz_suspended_ = false;
  hz_error_ = false;
  return Ok{};
}

// The hotzone device suspended, its linear table waiting in the inactive slot when the live
// one is not (a resume after an error).
Result<void> OnlineSwitch::hold_hotzone() {
  if (!hz_suspended_) {
    if (auto r = kernel_->suspend(hz_name_, SuspendMode::queue); !r) {
      return r;
    }
    hz_suspended_ = true;
  }
  if (hz_error_ && !hz_inactive_linear_) {
    TargetLine line;
    line.start = 0;
    line.length = state_.offset + state_.data_bytes / kOnlineSectorBytes;
    line.type = "linear";
    line.params = online_linear_params(device_);
    if (auto r = kernel_->reload(hz_name_, {line}, read_only_); !r) {
      return r;
    }
    hz_inactive_linear_ = true;
  }
  return Ok{};
}

Result<void> OnlineSwitch::release_hotzone() {
  if (auto r = kernel_->resume(hz_name_); !r) {
    return r;
  }
  hz_suspended_ = false;
  if (hz_inactive_linear_) {
    hz_error_ = false;
    hz_inactive_linear_ = false;
  }
  pending_ = false;
  return Ok{};
}

Error OnlineSwitch::foreign(const std::string &what) {
  const std::uint64_t position = boundary_.value_or(0);
  std::string done;
  if (hz_suspended_) {
    done = fmt::format("{} was left as it is (the run's hotzone device is held)", name_);
  } else {
    const auto info = kernel_->info(name_);
    name_suspended_ = name_suspended_ || (info && info->suspended);
    auto put = swap_name(OnlineLayout{position, 0});
    done = put ? fmt::format(
                     "{} was given back the table of position {} (the new parameters "
                     "before it, the old after it)",
                     name_, position)
               : fmt::format("{} could not be given back the table of position {} ({})", name_,
                             position, put.error().message);
  }
  return make_error(Errc::refused,
                    fmt::format("the table of {} was changed by another process ({}: dmsetup "
                                "reload, cryptsetup refresh or resize?) while it was being "
                                "reencrypted; {}; the run stopped: find what changed it",
                                name_, what, done));
}

// NAME's table as the kernel has it now, against the one the switch loaded last.
Result<void> OnlineSwitch::check_table() {
  auto lines = kernel_->table(name_);
  if (!lines) {
    return lines.error();
  }
  std::vector<CryptTable> live;
  for (const TargetLine &line : *lines) {
    if (line.type != target_type_) {
      return foreign(fmt::format("a {} line at sector {}", printable(line.type), line.start));
    }
    auto parsed = parse_table_params(line.params.view(), line.start, line.length);
    if (!parsed) {
      return foreign(fmt::format("a line that does not parse at sector {}", line.start));
    }
    live.push_back(std::move(parsed).value());
  }
  if (!online_same_table(live, expected_)) {
    return foreign(
        fmt::format("{} lines, not the {} the run loaded", live.size(), expected_.size()));
  }
  return Ok{};
}

Result<void> OnlineSwitch::route(std::uint64_t position, std::uint64_t length) {
  if (auto r = check_table(); !r) {
    return r;
  }
  const std::uint64_t routed_end = layout_.converted + layout_.routed;
  if (pending_ && position >= routed_end) {
    // The journal has the routed hotzone converted (a kill came before its device resumed).
    if (auto r = release_hotzone(); !r) {
      return r;
    }
    boundary_ = routed_end;
  }
  if (auto r = hotzone_device(); !r) {
    return r;
  }
  const OnlineLayout wanted{position, length};
  if (layout_ == wanted && !name_suspended_) {
    // NAME routes it already (a resume after a kill or an error): hold its device.
    if (auto r = hold_hotzone(); !r) {
      return r;
    }
    pending_ = true;
    return Ok{};
  }
  if (pending_ || position < layout_.converted) {
    return make_error(Errc::invalid_argument,
                      fmt::format("the hotzone at byte {} is not the one {}'s table routes "
                                  "(bytes {} to {}): nothing of it was touched",
                                  position, name_, layout_.converted, routed_end));
  }
  // Top to bottom: NAME suspended first (its I/O through the hotzone device, the last hotzone's,
  // completes), then the hotzone device, then NAME resumed with the hotzone routed to it.
  const auto table = segments(wanted);
  if (auto r = load_name(table); !r) {
    return r;
  }
  if (!name_suspended_) {
    if (auto r = kernel_->suspend(name_, SuspendMode::queue); !r) {
      static_cast<void>(load_name(expected_));
      return Error{r.error().code,
                   fmt::format("cannot suspend {} to swap its table: {}", name_, r.error().message),
                   r.error().os_errno};
    }
    name_suspended_ = true;
  }
  // On an error: back as it was, NAME resumed with its live table (which does not route the
  // new hotzone), then the hotzone device (it held nothing of the new hotzone). What cannot be
  // undone is left to the caller's fail_safe.
  const auto undo = [this](const Error &error) -> Result<void> {
    static_cast<void>(load_name(expected_));
    if (kernel_->resume(name_)) {
      name_suspended_ = false;
      if (hz_suspended_ && !hz_inactive_linear_ && kernel_->resume(hz_name_)) {
        hz_suspended_ = false;
      }
    }
    return error;
  };
  if (auto r = hold_hotzone(); !r) {
    return undo(r.error());
  }
  if (auto r = kernel_->resume(name_); !r) {
    return undo(r.error());
  }
  name_suspended_ = false;
  pending_ = true;
  expected_ = table;
  layout_ = wanted;
  return Ok{};
}

Result<void> OnlineSwitch::complete(std::uint64_t position) {
  if (pending_) {
    if (position != layout_.converted + layout_.routed) {
      return make_error(Errc::invalid_argument,
                        fmt::format("the hotzone completed ends at byte {}, the one {}'s table "
                                    "routes at byte {}",
                                    position, name_, layout_.converted + layout_.routed));
    }
    if (auto r = release_hotzone(); !r) {
      return r;
    }
  }
  boundary_ = position;
  return check_table();
}

Result<void> OnlineSwitch::finish(std::uint64_t position) {
  if (pending_) {
    if (position < layout_.converted + layout_.routed) {
      return make_error(Errc::invalid_argument,
                        fmt::format("the hotzone {} routes (bytes {} to {}) is not converted",
                                    name_, layout_.converted, layout_.converted + layout_.routed));
    }
    if (auto r = release_hotzone(); !r) {
      return r;
    }
  }
  boundary_ = position;
  const OnlineLayout wanted{position, 0};
  bool same = false;
  if (!name_suspended_ && layout_ == wanted) {
    auto lines = kernel_->table(name_);
    std::vector<CryptTable> live;
    for (const TargetLine &line : lines ? *lines : std::vector<TargetLine>{}) {
      auto parsed = parse_table_params(line.params.view(), line.start, line.length);
      if (parsed) {
        live.push_back(std::move(parsed).value());
      }
    }
    same = lines && online_same_table(live, segments(wanted));
  }
  if (!same) {
    if (auto r = swap_name(wanted); !r) {
      return r;
    }
  }
  if (!hz_device_.empty() && !hz_suspended_) {
    if (auto r = remove_reencrypt_mapping(*kernel_, hz_name_);
        !r && r.error().code != Errc::not_found) {
      return r;
    }
    hz_device_.clear();
    hz_known_ = false;
    hz_error_ = false;
    hz_inactive_linear_ = false;
  }
  return Ok{};
}

Result<std::string> OnlineSwitch::fail_safe() {
  std::string said;
  if (hz_suspended_) {
    TargetLine line;
    line.start = 0;
    line.length = state_.offset + state_.data_bytes / kOnlineSectorBytes;
    line.type = "error";
    if (auto r = kernel_->reload(hz_name_, {line}, read_only_); !r) {
      return Error{r.error().code,
                   fmt::format("the run's hotzone device {} could not be given an error table "
                               "({}): it stays suspended and the users of {}'s bytes {} to {} "
                               "wait; do not resume it by hand (it would let them reach "
                               "unconverted bytes)",
                               hz_name_, r.error().message, name_, layout_.converted,
                               layout_.converted + layout_.routed),
                   r.error().os_errno};
    }
    if (auto r = kernel_->resume(hz_name_); !r) {
      return Error{r.error().code,
                   fmt::format("the run's hotzone device {} has an error table but could not be "
                               "resumed ({}): resume it with dmsetup resume {} (its I/O then "
                               "fails with EIO)",
                               hz_name_, r.error().message, hz_name_),
                   r.error().os_errno};
    }
    hz_suspended_ = false;
    hz_error_ = true;
    hz_inactive_linear_ = false;
    pending_ = false;
    said = fmt::format(
        "{}'s bytes {} to {} (the hotzone) fail with EIO until the run is "
        "finished or aborted, the rest of {} reads and writes as before",
        name_, layout_.converted, layout_.converted + layout_.routed, name_);
  }
  if (name_suspended_) {
    if (auto r = load_name(expected_); !r) {
      return r.error();
    }
    if (auto r = kernel_->resume(name_); !r) {
      return Error{r.error().code,
                   fmt::format("{} could not be resumed ({})", name_, r.error().message),
                   r.error().os_errno};
    }
    name_suspended_ = false;
    said += said.empty() ? fmt::format("{} was resumed", name_) : "";
  }
  return said;
}

EngineHooks OnlineSwitch::hooks(EngineHooks base) {
  base.before_hotzone = [this](std::uint64_t position, std::uint64_t length) {
    return route(position, length);
  };
  base.after_completed = [this](std::uint64_t position) { return complete(position); };
  base.users_live = true;
  return base;
}

Result<std::uint64_t> settle_online(OnlineSwitch &live_switch, const ReencryptState &state,
                                    ReencryptIo &io, JournalStore &journal) {
  if (auto r = live_switch.adopt(); !r) {
    return r.error();
  }
  EngineHooks hooks = live_switch.hooks({});
  // Only the hotzone in flight, or the one NAME routes through the held hotzone device.
  hooks.stop = [&live_switch] { return !live_switch.hotzone_pending(); };
  auto report = run_engine(state, io, journal, hooks);
  Result<void> finished = Ok{};
  if (report) {
    finished = live_switch.finish(report->progress.done_bytes);
    if (finished) {
      return report->progress.done_bytes;
    }
  }
  const Error error = report ? finished.error() : report.error();
  auto safe = live_switch.fail_safe();
  return Error{error.code,
               safe ? (safe->empty() ? error.message : fmt::format("{}; {}", error.message, *safe))
                    : fmt::format("{}; and {}", error.message, safe.error().message),
               error.os_errno};
}

}  // namespace lbscrypt
