// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/registry.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "file_descriptor.hpp"

namespace lbscrypt {

namespace {

using detail::FileDescriptor;

constexpr std::size_t kRegistryNameMax = 255;     // NAME_MAX
constexpr std::size_t kRegistryKeptPrefix = 233;  // 233 + "~" + 16 + ".json" = 255
constexpr std::string_view kRegistrySuffix = ".json";
constexpr std::uintmax_t kRegistryMaxEntryBytes = 65536;  // an entry is a few hundred bytes
constexpr std::size_t kRegistryRunIdChars = 32;
constexpr mode_t kRegistryDirMode = 0755;
constexpr mode_t kRegistryFileMode = 0644;

std::optional<std::string> registry_id_of(const std::filesystem::path &dir) {
  if (std::error_code ec; std::filesystem::exists(dir / "dm", ec)) {
    if (const auto uuid = read_sysfs_text(dir / "dm" / "uuid")) {
      return "dm-uuid-" + ascii_id_text(*uuid);
    }
    if (const auto name = read_sysfs_text(dir / "dm" / "name")) {
      return "dm-name-" + ascii_id_text(*name);
    }
    return std::nullopt;
  }
  if (const auto number = read_sysfs_text(dir / "partition")) {
    const auto disk = registry_id_of(dir.parent_path());
    if (!disk) {
      return std::nullopt;
    }
    return *disk + "-part" + ascii_id_text(*number);
  }
  for (const auto &file : {dir / "wwid", dir / "device" / "wwid"}) {
    if (const auto wwid = read_sysfs_text(file)) {
      return "wwid-" + ascii_id_text(*wwid);
    }
  }
  return std::nullopt;
}

bool registry_safe_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

Error registry_bad(const std::string &origin, std::string_view what) {
  return make_error(Errc::invalid_argument, fmt::format("{}: {}", origin, what));
}

bool registry_is_run_id(std::string_view text) {
  return text.size() == kRegistryRunIdChars && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// What makes an entry one, whichever way it came: Errc::invalid_argument naming the field.
Result<void> registry_check_fields(const RegistryEntry &entry, const std::string &origin) {
  if (entry.format != kRegistryFormat) {
    return registry_bad(origin, fmt::format("format {} is not one this lbscrypt knows ({}): a "
                                            "newer lbscrypt wrote it; finish the run with that",
                                            entry.format, kRegistryFormat));
  }
  if (!entry.device.starts_with('/')) {
    return registry_bad(origin, "\"device\" is not an absolute path");
  }
  if (entry.device_id.empty()) {
    return registry_bad(origin, "\"device_id\" is empty");
  }
  if (!entry.state.starts_with('/')) {
    return registry_bad(origin, "\"state\" is not an absolute path");
  }
  if (!registry_is_run_id(entry.run_id)) {
    return registry_bad(origin, "\"run_id\" is not 32 lower-case hex digits");
  }
  for (const std::string *text : {&entry.device, &entry.device_id, &entry.state}) {
    if (text->find('\0') != std::string::npos) {
      return registry_bad(origin, "a path or id holds a NUL byte");
    }
  }
  return Ok{};
}

Result<std::string> registry_read_file(const std::filesystem::path &file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (!ec && size > kRegistryMaxEntryBytes) {
    return registry_bad(file.string(), fmt::format("{} bytes is too large for an entry", size));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const int error = errno;
    return make_error(error == ENOENT ? Errc::not_found : Errc::invalid_argument,
                      fmt::format("cannot read the reencrypt registry entry {}: {}", file.string(),
                                  std::strerror(error)),
                      error);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<void> registry_fsync_dir(const std::filesystem::path &dir) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  const FileDescriptor fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || fsync(fd.get()) != 0) {
    return make_error(
        Errc::device,
        fmt::format("cannot sync directory {}: {}", dir.string(), std::strerror(errno)), errno);
  }
  return Ok{};
}

// The directory, made 0755 with any missing parent (each parent synced after its new child).
Result<void> registry_make_dir(const std::filesystem::path &dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return make_error(
          Errc::invalid_argument,
          fmt::format("the reencrypt registry {} is not a directory: move it away", dir.string()));
    }
    return Ok{};
  }
  if (errno != ENOENT) {
    return make_error(Errc::device,
                      fmt::format("cannot look at the reencrypt registry {}: {}", dir.string(),
                                  std::strerror(errno)),
                      errno);
  }
  const auto parent = dir.parent_path();
  if (parent != dir && !parent.empty()) {
    if (auto made = registry_make_dir(parent); !made) {
      return made;
    }
  }
  if (mkdir(dir.c_str(), kRegistryDirMode) != 0 && errno != EEXIST) {
    return make_error(Errc::device,
                      fmt::format("cannot make the reencrypt registry {}: {}", dir.string(),
                                  std::strerror(errno)),
                      errno);
  }
  if (chmod(dir.c_str(), kRegistryDirMode) != 0) {  // whatever the umask took away
    return make_error(
        Errc::device,
        fmt::format("cannot make {} mode 0755: {}", dir.string(), std::strerror(errno)), errno);
  }
  return registry_fsync_dir(parent.empty() ? std::filesystem::path(".") : parent);
}

Result<void> registry_write_all(int fd, std::string_view text, const std::string &path) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return make_error(Errc::device,
                        fmt::format("cannot write {}: {}", path, std::strerror(errno)), errno);
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return Ok{};
}

// How well an entry names a device: 0 not at all, 1 by path, 2 by number, 3 by stable id.
int registry_match_strength(const RegistryEntry &entry, const DeviceIdentity &identity) {
  const bool entry_stable =
      registry_key_survives_reboot(entry.device_id) && !entry.device_id.starts_with("path-");
  if (entry_stable && identity.stable_id) {
    return entry.device_id == *identity.stable_id ? 3 : 0;
  }
  if (identity.number && entry.device_id == fmt::format("devt-{}:{}", identity.number->major,
                                                        identity.number->minor)) {
    return 2;
  }
  return entry.device == identity.canonical ? 1 : 0;
}

// Writes the entry's text to the temporary `fd`, syncs it, and links it into place unless an
// entry is there already (Errc::exists naming that run's state file).
Result<void> registry_place(int fd, const std::string &temp,
                            const std::filesystem::path &final_path, std::string_view text,
                            const RegistryEntry &entry) {
  if (auto written = registry_write_all(fd, text, temp); !written) {
    return written;
  }
  if (fchmod(fd, kRegistryFileMode) != 0 || fsync(fd) != 0) {
    return make_error(Errc::device, fmt::format("cannot sync {}: {}", temp, std::strerror(errno)),
                      errno);
  }
  if (link(temp.c_str(), final_path.c_str()) == 0) {
    return Ok{};
  }
  if (errno != EEXIST) {
    return make_error(Errc::device,
                      fmt::format("cannot file the reencrypt registry entry {}: {}",
                                  final_path.string(), std::strerror(errno)),
                      errno);
  }
  const auto other_text = registry_read_file(final_path);
  const auto other = other_text ? entry_from_json(*other_text, final_path.string())
                                : Result<RegistryEntry>(other_text.error());
  if (!other) {
    return make_error(Errc::exists,
                      fmt::format("{} already has a reencrypt registry entry, {}, which cannot "
                                  "be read ({}): see to it first",
                                  entry.device, final_path.string(), other.error().message));
  }
  return make_error(Errc::exists,
                    fmt::format("{} is already being reencrypted (state {}, registry entry {}): "
                                "finish that run with 'lbscrypt reencrypt --resume --state {} "
                                "...' first",
                                entry.device, other->state, final_path.string(), other->state));
}

// The strongest match among the entries.
std::optional<RegistryEntry> registry_best(const std::vector<RegistryEntry> &entries,
                                           const DeviceIdentity &identity) {
  std::optional<RegistryEntry> best;
  int best_strength = 0;
  for (const auto &entry : entries) {
    if (const int strength = registry_match_strength(entry, identity); strength > best_strength) {
      best = entry;
      best_strength = strength;
    }
  }
  return best;
}

}  // namespace

// The text of a sysfs attribute, trimmed; nullopt when it is absent or blank.
std::optional<std::string> read_sysfs_text(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  const auto first = value.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return std::nullopt;
  }
  const auto last = value.find_last_not_of(" \t\r\n");
  return value.substr(first, last - first + 1);
}

// Printable ASCII is kept, the backslash and every other byte written as \xNN: an id is
// ASCII, and two different texts never give the same id.
std::string ascii_id_text(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

std::optional<std::string> stable_device_id(const std::filesystem::path &sysfs, DevNumber device) {
  std::error_code ec;
  const auto dir = std::filesystem::canonical(
      sysfs / "dev" / "block" / fmt::format("{}:{}", device.major, device.minor), ec);
  if (ec) {
    return std::nullopt;
  }
  return registry_id_of(dir);
}

std::optional<std::string> find_device_by_stable_id(const std::filesystem::path &sysfs,
                                                    std::string_view id) {
  if (!registry_key_survives_reboot(id) || id.starts_with("path-")) {
    return std::nullopt;
  }
  std::error_code ec;
  std::filesystem::directory_iterator entry(sysfs / "dev" / "block", ec);
  std::optional<std::string> found;
  for (; !ec && entry != std::filesystem::directory_iterator(); entry.increment(ec)) {
    std::error_code link_error;
    const auto dir = std::filesystem::canonical(entry->path(), link_error);
    if (link_error) {
      continue;
    }
    const auto got = registry_id_of(dir);
    if (!got || *got != id) {
      continue;
    }
    if (found) {
      return std::nullopt;  // two devices say the same: neither is taken for the run's
    }
    std::string name = dir.filename().string();
    std::replace(name.begin(), name.end(), '!', '/');
    found = "/dev/" + name;
  }
  if (ec) {
    return std::nullopt;  // not every device was seen: a second with the id may be among them
  }
  return found;
}

DeviceIdentity identify_device(const std::string &path, const std::filesystem::path &sysfs) {
  DeviceIdentity identity;
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(path, ec);
  auto canonical = ec ? std::filesystem::path(path) : absolute.lexically_normal();
  if (const auto resolved = std::filesystem::weakly_canonical(canonical, ec); !ec) {
    canonical = resolved;
  }
  identity.canonical = canonical.string();
  struct stat st {};
  if (stat(identity.canonical.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
    identity.number = DevNumber{major(st.st_rdev), minor(st.st_rdev)};
    identity.stable_id = stable_device_id(sysfs, *identity.number);
  }
  return identity;
}

std::string registry_key(const DeviceIdentity &identity) {
  if (identity.stable_id) {
    return *identity.stable_id;
  }
  if (identity.number) {
    return fmt::format("devt-{}:{}", identity.number->major, identity.number->minor);
  }
  return "path-" + identity.canonical;
}

bool registry_key_survives_reboot(std::string_view key) { return !key.starts_with("devt-"); }

std::uint64_t fnv1a_64(std::string_view bytes) {
  constexpr std::uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::uint64_t hash = kOffsetBasis;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kPrime;
  }
  return hash;
}

std::string entry_file_name(std::string_view key) {
  std::string escaped;
  std::vector<std::size_t> cuts;  // where an escaped byte ends: the prefix may stop there
  for (std::size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    if (registry_safe_byte(c) && !(i == 0 && c == '.')) {
      escaped += c;
    } else {
      escaped += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
    cuts.push_back(escaped.size());
  }
  if (escaped.size() + kRegistrySuffix.size() <= kRegistryNameMax) {
    return escaped + std::string(kRegistrySuffix);
  }
  const auto keep = std::upper_bound(cuts.begin(), cuts.end(), kRegistryKeptPrefix);
  const std::size_t kept = keep == cuts.begin() ? 0 : *(keep - 1);
  return fmt::format("{}~{:016x}{}", escaped.substr(0, kept), fnv1a_64(key), kRegistrySuffix);
}

Result<std::string> entry_to_json(const RegistryEntry &entry) {
  if (auto ok = registry_check_fields(entry, "reencrypt registry entry"); !ok) {
    return ok.error();
  }
  const nlohmann::json object = {{"format", entry.format},
                                 {"device", entry.device},
                                 {"device_id", entry.device_id},
                                 {"state", entry.state},
                                 {"run_id", entry.run_id}};
  try {
    return object.dump() + "\n";
  } catch (const nlohmann::json::type_error &) {
    return make_error(Errc::invalid_argument,
                      "reencrypt registry entry: a path is not UTF-8, which the registry's JSON "
                      "cannot hold: give the state file a path in UTF-8");
  }
}

Result<RegistryEntry> entry_from_json(std::string_view text, const std::string &origin) {
  std::set<std::string, std::less<>> seen;
  std::optional<std::string> repeated;
  const nlohmann::json::parser_callback_t note_keys =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
          const auto &key = parsed.get_ref<const std::string &>();
          if (!seen.insert(key).second && !repeated) {
            repeated = key;
          }
        }
        return true;
      };
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(text, note_keys);
  } catch (const nlohmann::json::exception &e) {
    return registry_bad(origin, fmt::format("not JSON ({})", e.what()));
  }
  if (!object.is_object()) {
    return registry_bad(origin, "not a JSON object");
  }
  if (repeated) {
    return registry_bad(origin, fmt::format("\"{}\" is given twice", *repeated));
  }
  constexpr std::array<std::string_view, 5> kKeys{"device", "device_id", "format", "run_id",
                                                  "state"};
  for (const auto &item : object.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), item.key()) == kKeys.end()) {
      return registry_bad(origin, fmt::format("unknown key \"{}\"", item.key()));
    }
  }
  RegistryEntry entry;
  for (const std::string_view key : kKeys) {
    const auto it = object.find(std::string(key));
    if (it == object.end()) {
      return registry_bad(origin, fmt::format("\"{}\" is missing", key));
    }
    if (key == "format") {
      if (!it->is_number_unsigned() || it->get<std::uint64_t>() > UINT32_MAX) {
        return registry_bad(origin, "\"format\" is not a whole number");
      }
      entry.format = it->get<std::uint32_t>();
      continue;
    }
    if (!it->is_string()) {
      return registry_bad(origin, fmt::format("\"{}\" is not a string", key));
    }
    std::string value = it->get<std::string>();
    if (key == "device") {
      entry.device = std::move(value);
    } else if (key == "device_id") {
      entry.device_id = std::move(value);
    } else if (key == "run_id") {
      entry.run_id = std::move(value);
    } else {
      entry.state = std::move(value);
    }
  }
  if (auto ok = registry_check_fields(entry, origin); !ok) {
    return ok.error();
  }
  return entry;
}

Result<void> add_entry(const std::filesystem::path &directory, const RegistryEntry &entry) {
  const auto text = entry_to_json(entry);
  if (!text) {
    return text.error();
  }
  if (auto made = registry_make_dir(directory); !made) {
    return made;
  }
  const auto final_path = directory / entry_file_name(entry.device_id);
  std::string temp = (directory / ".add-XXXXXX").string();
  const FileDescriptor fd(mkostemp(temp.data(), O_CLOEXEC));
  if (fd.get() < 0) {
    return make_error(Errc::device,
                      fmt::format("cannot write in the reencrypt registry {}: {}",
                                  directory.string(), std::strerror(errno)),
                      errno);
  }
  // The temporary goes whatever happened: once linked, the entry is in place.
  auto placed = registry_place(fd.get(), temp, final_path, *text, entry);
  unlink(temp.c_str());
  if (!placed) {
    return placed;
  }
  return registry_fsync_dir(directory);
}

Result<void> remove_entry(const std::filesystem::path &directory, const RegistryEntry &entry) {
  const auto file = directory / entry_file_name(entry.device_id);
  const auto text = registry_read_file(file);
  if (!text) {
    if (text.error().code == Errc::not_found) {
      return Ok{};
    }
    return text.error();
  }
  const auto filed = entry_from_json(*text, file.string());
  if (!filed) {
    return filed.error();
  }
  if (filed->run_id != entry.run_id) {
    return make_error(Errc::refused,
                      fmt::format("the reencrypt registry entry {} is another run's (run {}, "
                                  "state {}), not this one's (run {}): it is left in place",
                                  file.string(), filed->run_id, filed->state, entry.run_id));
  }
  if (unlink(file.c_str()) != 0 && errno != ENOENT) {
    return make_error(Errc::device,
                      fmt::format("cannot remove the reencrypt registry entry {}: {}",
                                  file.string(), std::strerror(errno)),
                      errno);
  }
  return registry_fsync_dir(directory);
}

Result<std::vector<RegistryEntry>> list_entries(const std::filesystem::path &directory) {
  std::vector<std::pair<std::string, RegistryEntry>> found;
  std::error_code ec;
  std::filesystem::directory_iterator it(directory, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      return std::vector<RegistryEntry>{};
    }
    return make_error(Errc::invalid_argument,
                      fmt::format("cannot read the reencrypt registry {}: {}: every open is "
                                  "refused until it can be read",
                                  directory.string(), ec.message()),
                      ec.value());
  }
  const std::string_view damaged =
      ": every open and attach is refused while it is there, as it may be the entry of the "
      "device asked for; finish the run it names, or remove the file if no reencrypt is in "
      "progress";
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const auto path = it->path();
    const std::string name = path.filename().string();
    if (name.starts_with('.')) {
      continue;  // add_entry's temporaries: no entry was filed
    }
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) {
      return make_error(Errc::invalid_argument,
                        fmt::format("{}: not a regular file, so not a reencrypt registry entry{}",
                                    path.string(), damaged));
    }
    const auto text = registry_read_file(path);
    if (!text) {
      return make_error(Errc::invalid_argument, text.error().message + std::string(damaged));
    }
    auto entry = entry_from_json(*text, path.string());
    if (!entry) {
      return make_error(Errc::invalid_argument, entry.error().message + std::string(damaged));
    }
    if (entry_file_name(entry->device_id) != name) {
      return make_error(Errc::invalid_argument,
                        fmt::format("{}: the entry of \"{}\" is filed as {}, not {}: it was "
                                    "renamed or copied{}",
                                    path.string(), entry->device_id, name,
                                    entry_file_name(entry->device_id), damaged));
    }
    found.emplace_back(name, std::move(entry).value());
  }
  if (ec) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("cannot read the reencrypt registry {}: {}", directory.string(), ec.message()),
        ec.value());
  }
  std::sort(found.begin(), found.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<RegistryEntry> entries;
  entries.reserve(found.size());
  for (auto &item : found) {
    entries.push_back(std::move(item.second));
  }
  return entries;
}

bool entry_matches(const RegistryEntry &entry, const DeviceIdentity &identity) {
  return registry_match_strength(entry, identity) > 0;
}

Result<std::optional<RegistryEntry>> find_entry(const std::filesystem::path &directory,
                                                const DeviceIdentity &identity) {
  const auto entries = list_entries(directory);
  if (!entries) {
    return entries.error();
  }
  return registry_best(*entries, identity);
}

Result<std::optional<RegistryEntry>> find_entry(const std::filesystem::path &directory,
                                                const std::string &device,
                                                const std::filesystem::path &sysfs) {
  const auto entries = list_entries(directory);
  if (!entries) {
    return entries.error();
  }
  if (entries->empty()) {
    return std::optional<RegistryEntry>{};
  }
  return registry_best(*entries, identify_device(device, sysfs));
}

Error reencrypt_in_progress(const std::string &device, const RegistryEntry &entry) {
  return make_error(Errc::refused,
                    fmt::format("{} is being reencrypted (state {}): finish with 'lbscrypt "
                                "reencrypt --resume --state {} ...' before opening it",
                                device, entry.state, entry.state));
}

}  // namespace lbscrypt
