// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt_online.hpp"

#include <openssl/crypto.h>

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <variant>

#include "lbscrypt/reencrypt_io.hpp"

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

// Whether `line` is the segment of `side` with `key` that starts at `start` (512-byte sectors).
bool online_is_segment(const CryptTable &line, const ReencryptState &state, const CryptSide &side,
                       const SecretBuffer &key, std::uint64_t start) {
  return line.cipher == side.cipher && online_sector(line) == side.sector_size &&
         line.options.iv_large_sectors == side.iv_large_sectors &&
         line.offset == state.offset + start && line.iv_offset == state.skip + start &&
         online_same_key(line.key, key);
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
  // of its id>-old and -new (reencrypt_io.hpp).
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

std::vector<CryptTable> online_segments(const ReencryptState &state, std::uint64_t boundary,
                                        const SecretBuffer &old_key, const SecretBuffer &new_key,
                                        const std::string &device, const CryptFlags &flags) {
  const std::uint64_t end = state.data_bytes / kOnlineSectorBytes;
  const std::uint64_t split = std::min(boundary, state.data_bytes) / kOnlineSectorBytes;
  std::vector<CryptTable> segments;
  const auto add = [&](std::uint64_t start, std::uint64_t stop, const CryptSide &side,
                       const SecretBuffer &key) {
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
    line.device = device;
    line.offset = state.offset + start;
    static_cast<CryptFlags &>(line.options) = flags;
    line.options.iv_large_sectors = side.iv_large_sectors;
    if (side.sector_size != kDefaultSectorSize) {
      line.options.sector_size_arg = std::to_string(side.sector_size);
    }
    segments.push_back(std::move(line));
  };
  add(0, split, state.new_side, new_key);
  add(split, end, state.old_side, old_key);
  return segments;
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

Result<std::uint64_t> live_boundary(const LiveMapping &live, const ReencryptState &state,
                                    const SecretBuffer &old_key, const SecretBuffer &new_key) {
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
  if (live.lines.size() == 1) {
    const CryptTable &line = live.lines.front();
    if (online_is_segment(line, state, state.new_side, new_key, 0)) {
      return state.data_bytes;
    }
    if (online_is_segment(line, state, state.old_side, old_key, 0)) {
      return std::uint64_t{0};
    }
    return not_ours("its one line has neither the old parameters and key nor the new");
  }
  if (live.lines.size() != 2) {
    return not_ours(fmt::format("{} lines", live.lines.size()));
  }
  const CryptTable &done = live.lines.at(0);
  const CryptTable &rest = live.lines.at(1);
  if (done.device != rest.device) {
    return not_ours("its lines are on two devices");
  }
  if (!online_is_segment(done, state, state.new_side, new_key, 0)) {
    return not_ours("its first line does not have the new parameters and key");
  }
  if (!online_is_segment(rest, state, state.old_side, old_key, rest.start)) {
    return not_ours("its second line does not have the old parameters and key");
  }
  return rest.start * kOnlineSectorBytes;
}

OnlineSwitch::OnlineSwitch(Kernel &kernel, const LiveMapping &live, const ReencryptState &state,
                           SecretBuffer old_key, SecretBuffer new_key, std::string target_type)
    : kernel_(&kernel),
      name_(live.name),
      state_(state),
      old_key_(std::move(old_key)),
      new_key_(std::move(new_key)),
      device_(live.lines.empty() ? state.device : live.lines.front().device),
      flags_(live.lines.empty() ? CryptFlags{}
                                : static_cast<const CryptFlags &>(live.lines.front().options)),
      read_only_(live.info.read_only),
      target_type_(std::move(target_type)),
      suspended_(live.info.suspended) {}

Result<void> OnlineSwitch::suspend() {
  if (suspended_) {
    return Ok{};
  }
  if (auto r = kernel_->suspend(name_, true); !r) {
    return Error{r.error().code,
                 fmt::format("cannot suspend {} (its filesystem frozen) for the next hotzone: {}",
                             name_, r.error().message),
                 r.error().os_errno};
  }
  suspended_ = true;
  return Ok{};
}

Result<void> OnlineSwitch::switch_to(std::uint64_t boundary) {
  const auto lines = online_table_lines(
      online_segments(state_, boundary, old_key_, new_key_, device_, flags_), target_type_);
  if (auto r = kernel_->reload(name_, lines, read_only_); !r) {
    return r.error();
  }
  if (auto r = kernel_->resume(name_); !r) {
    return r.error();
  }
  suspended_ = false;
  boundary_ = boundary;
  return Ok{};
}

EngineHooks OnlineSwitch::hooks(EngineHooks base) {
  base.before_hotzone = [this](std::uint64_t /*position*/, std::uint64_t /*length*/) {
    return suspend();
  };
  base.after_completed = [this](std::uint64_t position) { return switch_to(position); };
  base.users_live = true;
  return base;
}

Result<std::uint64_t> settle_online(OnlineSwitch &live_switch, const ReencryptState &state,
                                    ReencryptIo &io, JournalStore &journal) {
  EngineHooks hooks = live_switch.hooks({});
  hooks.stop = [] { return true; };  // only the hotzone in flight, if there is one
  auto report = run_engine(state, io, journal, hooks);
  if (!report) {
    return report.error();
  }
  const std::uint64_t position = report->progress.done_bytes;
  if (live_switch.suspended() || live_switch.boundary() != position) {
    if (auto r = live_switch.switch_to(position); !r) {
      return r.error();
    }
  }
  return position;
}

}  // namespace lbscrypt
