// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt state file: the run's parameters and the two key verifiers as strict JSON,
// written atomically beside its journal, and the flock that keeps a second run off it.
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <set>
#include <utility>

#include "file_descriptor.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/table.hpp"
#include "reencrypt/files.hpp"

namespace lbscrypt {

namespace {

using detail::FileDescriptor;
using StatefileJson = nlohmann::json;

constexpr std::size_t kStatefileSaltBytes = 32;
constexpr std::size_t kStatefileDigestBytes = 32;
constexpr std::uint32_t kStatefileMinIterations = kVerifierMinIterations;
constexpr std::uint32_t kStatefileMinSector = 512;
constexpr std::uint32_t kStatefileMaxSector = 65536;
constexpr std::uint32_t kStatefileMaxKeyBytes = 512;
constexpr std::size_t kStatefileRunIdChars = 32;
// A state file is a few hundred bytes: anything this large is not one.
constexpr std::size_t kStatefileMaxBytes = std::size_t{1} << 20;
constexpr std::size_t kStatefileWipeChunk = std::size_t{1} << 20;

// getrandom(2) until `out` is full: 0 or the errno.
int statefile_random(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

std::string statefile_hex(std::span<const std::uint8_t> bytes) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::uint8_t byte : bytes) {
    out.push_back(kDigits[byte >> 4U]);
    out.push_back(kDigits[byte & 0xfU]);
  }
  return out;
}

bool statefile_power_of_two_sector(std::uint64_t size) {
  return size >= kStatefileMinSector && size <= kStatefileMaxSector && (size & (size - 1)) == 0;
}

// Reads a parsed state, remembering the first field that breaks a rule; later reads of a
// broken document return defaults and are never used.
class StatefileReader {
 public:
  explicit StatefileReader(std::string origin) : origin_(std::move(origin)) {}

  [[nodiscard]] bool failed() const { return error_.has_value(); }
  [[nodiscard]] Error error() const { return make_error(Errc::invalid_argument, *error_); }

  void fail(std::string_view what) {
    if (!error_) {
      error_ = fmt::format("{}: {}", printable(origin_), what);
    }
  }
  void fail_field(std::string_view field, std::string_view rule) {
    fail(fmt::format("field \"{}\" {}", field, rule));
  }

  // `object` (at `field`, "" for the top) has exactly `keys`: no stray key, none missing.
  void expect_keys(const StatefileJson &object, std::string_view field,
                   std::initializer_list<std::string_view> keys) {
    if (!object.is_object()) {
      fail_field(field, "is not a JSON object");
      return;
    }
    for (const auto &item : object.items()) {
      if (std::find(keys.begin(), keys.end(), item.key()) == keys.end()) {
        fail(fmt::format("unknown field \"{}\": the file is damaged or from another lbscrypt",
                         printable(join(field, item.key()))));
        return;
      }
    }
    for (const std::string_view key : keys) {
      if (!object.contains(key)) {
        fail(fmt::format("field \"{}\" is missing", join(field, key)));
        return;
      }
    }
  }

  std::uint64_t number(const StatefileJson &object, std::string_view field, std::string_view key,
                       std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const StatefileJson *value = member(object, key);
    if (value == nullptr) {
      return 0;
    }
    if (!value->is_number_unsigned() || value->get<std::uint64_t>() > max) {
      fail_field(join(field, key), fmt::format("is not a whole number from 0 to {}", max));
      return 0;
    }
    return value->get<std::uint64_t>();
  }

  std::uint32_t number32(const StatefileJson &object, std::string_view field,
                         std::string_view key) {
    return static_cast<std::uint32_t>(
        number(object, field, key, std::numeric_limits<std::uint32_t>::max()));
  }

  bool boolean(const StatefileJson &object, std::string_view field, std::string_view key) {
    const StatefileJson *value = member(object, key);
    if (value == nullptr) {
      return false;
    }
    if (!value->is_boolean()) {
      fail_field(join(field, key), "is not true or false");
      return false;
    }
    return value->get<bool>();
  }

  std::string text(const StatefileJson &object, std::string_view field, std::string_view key,
                   bool allow_empty) {
    const StatefileJson *value = member(object, key);
    if (value == nullptr) {
      return {};
    }
    if (!value->is_string()) {
      fail_field(join(field, key), "is not a string");
      return {};
    }
    auto out = value->get<std::string>();
    if (out.empty() && !allow_empty) {
      fail_field(join(field, key), "is empty");
    }
    return out;
  }

  std::vector<std::uint8_t> hex_bytes(const StatefileJson &object, std::string_view field,
                                      std::string_view key, std::size_t bytes) {
    const std::string value = text(object, field, key, true);
    if (failed()) {
      return {};
    }
    auto out = detail::lower_hex_bytes(value, bytes);
    if (!out) {
      fail_field(join(field, key),
                 fmt::format("is not {} lower-case hex characters ({} bytes)", bytes * 2, bytes));
      return {};
    }
    return *out;
  }

  static std::string join(std::string_view field, std::string_view key) {
    return field.empty() ? std::string(key) : fmt::format("{}.{}", field, key);
  }

 private:
  // The member, or nullptr after an earlier failure (expect_keys reported a missing one).
  [[nodiscard]] const StatefileJson *member(const StatefileJson &object,
                                            std::string_view key) const {
    if (failed() || !object.is_object()) {
      return nullptr;
    }
    const auto found = object.find(key);
    return found == object.end() ? nullptr : &*found;
  }

  std::string origin_;
  std::optional<std::string> error_;
};

CryptSide statefile_read_side(StatefileReader &reader, const StatefileJson &object,
                              std::string_view field) {
  reader.expect_keys(object, field, {"cipher", "key_bytes", "sector_size", "iv_large_sectors"});
  CryptSide side;
  side.cipher = reader.text(object, field, "cipher", false);
  side.key_bytes = reader.number32(object, field, "key_bytes");
  if (!reader.failed() && (side.key_bytes < 1 || side.key_bytes > kStatefileMaxKeyBytes)) {
    reader.fail_field(StatefileReader::join(field, "key_bytes"),
                      fmt::format("is {}, not 1 to {}", side.key_bytes, kStatefileMaxKeyBytes));
  }
  side.sector_size = reader.number32(object, field, "sector_size");
  if (!reader.failed() && !statefile_power_of_two_sector(side.sector_size)) {
    reader.fail_field(StatefileReader::join(field, "sector_size"),
                      fmt::format("is {}, not a power of two from {} to {}", side.sector_size,
                                  kStatefileMinSector, kStatefileMaxSector));
  }
  side.iv_large_sectors = reader.boolean(object, field, "iv_large_sectors");
  return side;
}

KeyVerifier statefile_read_verifier(StatefileReader &reader, const StatefileJson &object,
                                    std::string_view field) {
  reader.expect_keys(object, field, {"salt", "iterations", "digest"});
  KeyVerifier verifier;
  verifier.salt = reader.hex_bytes(object, field, "salt", kStatefileSaltBytes);
  verifier.iterations = reader.number32(object, field, "iterations");
  if (!reader.failed() && verifier.iterations < kStatefileMinIterations) {
    reader.fail_field(StatefileReader::join(field, "iterations"),
                      fmt::format("is {}, below {}", verifier.iterations, kStatefileMinIterations));
  }
  verifier.digest = reader.hex_bytes(object, field, "digest", kStatefileDigestBytes);
  return verifier;
}

nlohmann::ordered_json statefile_side_json(const CryptSide &side) {
  nlohmann::ordered_json out;
  out["cipher"] = side.cipher;
  out["key_bytes"] = side.key_bytes;
  out["sector_size"] = side.sector_size;
  out["iv_large_sectors"] = side.iv_large_sectors;
  return out;
}

nlohmann::ordered_json statefile_verifier_json(const KeyVerifier &verifier) {
  nlohmann::ordered_json out;
  out["salt"] = statefile_hex(verifier.salt);
  out["iterations"] = verifier.iterations;
  out["digest"] = statefile_hex(verifier.digest);
  return out;
}

// lstat of a state or journal path: false when nothing is there, true for a regular file, the
// refusal for anything else.
Result<bool> statefile_exists(const std::filesystem::path &path, std::string_view what) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return false;
    }
    return detail::state_file_error(what, path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return detail::not_regular_file_error(path, st.st_mode);
  }
  return true;
}

// An open state or journal file must be a regular file (the path may have changed since the
// lstat).
Result<struct stat> statefile_fstat_regular(int fd, const std::filesystem::path &path,
                                            std::string_view what) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return detail::state_file_error(what, path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return detail::not_regular_file_error(path, st.st_mode);
  }
  return st;
}

// open(2) of an existing state or journal file that follows no symbolic link and does not
// block on a FIFO.
Result<FileDescriptor> statefile_open(const std::filesystem::path &path, int flags,
                                      std::string_view what) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  FileDescriptor fd(open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ELOOP) {
      return detail::not_regular_file_error(path, S_IFLNK);
    }
    if (errno == ENOENT) {
      return make_error(
          Errc::not_found,
          fmt::format("{}: no such file: give the state file of the run", printable(path.string())),
          ENOENT);
    }
    return detail::state_file_error(what, path, errno);
  }
  if (auto st = statefile_fstat_regular(fd.get(), path, what); !st) {
    return st.error();
  }
  return fd;
}
// Zeros over a whole state or journal file, in place and durable (fdatasync).
Result<void> statefile_overwrite(const std::filesystem::path &path, std::string_view what) {
  auto fd = statefile_open(path, O_WRONLY, what);
  if (!fd) {
    return fd.error();
  }
  const auto st = statefile_fstat_regular(fd->get(), path, what);
  if (!st) {
    return st.error();
  }
  const auto size = static_cast<std::uint64_t>(st->st_size);
  const std::vector<std::uint8_t> zeros(
      static_cast<std::size_t>(std::min<std::uint64_t>(size, kStatefileWipeChunk)));
  for (std::uint64_t at = 0; at < size; at += zeros.size()) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), size - at));
    if (const int err = detail::pwrite_full(fd->get(), {zeros.data(), n}, at); err != 0) {
      return detail::state_file_error(what, path, err);
    }
  }
  if (fdatasync(fd->get()) != 0) {
    return detail::state_file_error(what, path, errno);
  }
  return {};
}
}  // namespace

Result<std::vector<std::uint8_t>> pbkdf2_sha256(std::span<const std::uint8_t> secret,
                                                std::span<const std::uint8_t> salt,
                                                std::uint32_t iterations, std::size_t out_bytes) {
  constexpr auto kIntMax = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (iterations == 0 || iterations > kIntMax || out_bytes == 0 || out_bytes > kIntMax ||
      secret.size() > kIntMax || salt.size() > kIntMax) {
    return make_error(Errc::invalid_argument,
                      fmt::format("PBKDF2-HMAC-SHA256 of {} iterations to {} bytes: give 1 to {} "
                                  "iterations and 1 to {} bytes",
                                  iterations, out_bytes, kIntMax, kIntMax));
  }
  static constexpr std::uint8_t kNothing = 0;  // libcrypto wants pointers even for 0 bytes
  std::vector<std::uint8_t> out(out_bytes);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  const auto *pass = reinterpret_cast<const char *>(secret.empty() ? &kNothing : secret.data());
  const std::uint8_t *salt_bytes = salt.empty() ? &kNothing : salt.data();
  if (PKCS5_PBKDF2_HMAC(pass, static_cast<int>(secret.size()), salt_bytes,
                        static_cast<int>(salt.size()), static_cast<int>(iterations), EVP_sha256(),
                        static_cast<int>(out_bytes), out.data()) != 1) {
    const char *reason = ERR_reason_error_string(ERR_get_error());
    return make_error(Errc::key, fmt::format("PBKDF2-HMAC-SHA256 failed in libcrypto: {}",
                                             reason == nullptr ? "no reason given" : reason));
  }
  return out;
}

Result<KeyVerifier> make_verifier(const SecretBuffer &key, std::uint32_t iterations) {
  KeyVerifier verifier;
  verifier.iterations = iterations;
  verifier.salt.resize(kStatefileSaltBytes);
  if (const int err = statefile_random(verifier.salt); err != 0) {
    return make_error(Errc::key,
                      fmt::format("cannot draw a random salt for the key verifier (getrandom): {}",
                                  std::strerror(err)),
                      err);
  }
  auto digest = pbkdf2_sha256(key.bytes(), verifier.salt, iterations, kStatefileDigestBytes);
  if (!digest) {
    return digest.error();
  }
  verifier.digest = std::move(digest).value();
  return verifier;
}

Result<void> check_verifier(const KeyVerifier &verifier, const SecretBuffer &key,
                            std::string_view which) {
  if (verifier.salt.size() != kStatefileSaltBytes ||
      verifier.digest.size() != kStatefileDigestBytes || verifier.iterations == 0) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("the {} key's verifier is damaged ({}-byte salt, {}-byte digest, "
                    "{} iterations): the state file was changed",
                    which, verifier.salt.size(), verifier.digest.size(), verifier.iterations));
  }
  const auto digest =
      pbkdf2_sha256(key.bytes(), verifier.salt, verifier.iterations, verifier.digest.size());
  if (!digest) {
    return digest.error();
  }
  if (CRYPTO_memcmp(digest->data(), verifier.digest.data(), verifier.digest.size()) != 0) {
    if (which == "old") {
      return make_error(Errc::key,
                        "the old key is not the one this run started with: give the key the "
                        "volume was opened with");
    }
    return make_error(Errc::key, fmt::format("the {0} key is not the one this run started with: "
                                             "give the {0} key the run was started with",
                                             which));
  }
  return {};
}

std::string state_to_json(const ReencryptState &state) {
  nlohmann::ordered_json out;
  out["format"] = state.format;
  out["run_id"] = state.run_id;
  out["device"] = state.device;
  out["device_id"] = state.device_id;
  if (state.device_identity) {
    out["device_identity"] =
        nlohmann::ordered_json::parse(fingerprint_to_json(*state.device_identity));
  }
  out["offset"] = state.offset;
  out["skip"] = state.skip;
  out["data_bytes"] = state.data_bytes;
  out["hotzone_bytes"] = state.hotzone_bytes;
  out["old_side"] = statefile_side_json(state.old_side);
  out["new_side"] = statefile_side_json(state.new_side);
  out["old_verifier"] = statefile_verifier_json(state.old_verifier);
  out["new_verifier"] = statefile_verifier_json(state.new_verifier);
  out["started"] = state.started;
  out["first_unit_mac"] = statefile_hex(state.first_unit_mac);
  out["started_online"] = state.started_online;
  out["switch_mac"] = statefile_hex(state.switch_mac);
  out["mac"] = statefile_hex(state.mac);
  // A string that is not UTF-8 is replaced, not thrown on: write_state reads its text back
  // and refuses a state that does not survive.
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

Result<ReencryptState> state_from_json(std::string_view text, const std::string &origin) {
  // nlohmann keeps the last of two equal keys: a state file with both is refused instead.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  const StatefileJson::parser_callback_t watch_keys =
      [&](int /*depth*/, StatefileJson::parse_event_t event, const StatefileJson &parsed) {
        if (event == StatefileJson::parse_event_t::object_start) {
          open_objects.emplace_back();
        } else if (event == StatefileJson::parse_event_t::object_end && !open_objects.empty()) {
          open_objects.pop_back();
        } else if (event == StatefileJson::parse_event_t::key && !open_objects.empty() &&
                   !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
          duplicate = parsed.get<std::string>();
        }
        return true;
      };
  StatefileJson doc;
  try {
    doc = StatefileJson::parse(text.begin(), text.end(), watch_keys);
  } catch (const StatefileJson::exception &e) {
    std::string_view why = e.what();
    if (const auto end = why.find("] ");
        why.starts_with("[json.exception") && end != std::string_view::npos) {
      why.remove_prefix(end + 2);
    }
    return make_error(Errc::invalid_argument,
                      fmt::format("{} is not a state file lbscrypt reencrypt wrote: {}",
                                  printable(origin), printable(why)));
  }
  StatefileReader reader(origin);
  if (duplicate) {
    reader.fail(fmt::format("field \"{}\" is there twice", printable(*duplicate)));
    return reader.error();
  }
  if (!doc.is_object()) {
    reader.fail("the state is not a JSON object");
    return reader.error();
  }
  // A format this lbscrypt does not know may have other fields: say so first.
  if (const auto format = doc.find("format"); format != doc.end() && format->is_number_unsigned() &&
                                              format->get<std::uint64_t>() != kStateFormat) {
    reader.fail(fmt::format(
        "format {} is not the one this lbscrypt reads ({}){}: finish or abort the run with the "
        "lbscrypt that started it",
        format->get<std::uint64_t>(), kStateFormat,
        format->get<std::uint64_t>() < kStateFormat
            ? ": an earlier lbscrypt wrote it, without the MACs this one checks"
            : ""));
    return reader.error();
  }
  // "device_identity" is absent only where the run's device was no block device (the unit
  // tests' stand-in, reencrypt/run.cpp); the MAC covers its absence as every other field.
  if (doc.contains("device_identity")) {
    reader.expect_keys(
        doc, "",
        {"format", "run_id", "device", "device_id", "device_identity", "offset", "skip",
         "data_bytes", "hotzone_bytes", "old_side", "new_side", "old_verifier", "new_verifier",
         "started", "first_unit_mac", "started_online", "switch_mac", "mac"});
  } else {
    reader.expect_keys(doc, "",
                       {"format", "run_id", "device", "device_id", "offset", "skip", "data_bytes",
                        "hotzone_bytes", "old_side", "new_side", "old_verifier", "new_verifier",
                        "started", "first_unit_mac", "started_online", "switch_mac", "mac"});
  }
  ReencryptState state;
  state.format = reader.number32(doc, "", "format");
  state.run_id = reader.text(doc, "", "run_id", true);
  if (!reader.failed() && !detail::lower_hex_bytes(state.run_id, kStatefileRunIdChars / 2)) {
    reader.fail_field("run_id",
                      fmt::format("is not {} lower-case hex characters", kStatefileRunIdChars));
  }
  state.device = reader.text(doc, "", "device", false);
  state.device_id = reader.text(doc, "", "device_id", false);
  if (!reader.failed() && doc.contains("device_identity")) {
    auto identity = fingerprint_from_json(doc.at("device_identity").dump(), "device_identity");
    if (identity) {
      state.device_identity = std::move(identity).value();
    } else {
      reader.fail(identity.error().message);
    }
  }
  state.offset = reader.number(doc, "", "offset");
  state.skip = reader.number(doc, "", "skip");
  state.data_bytes = reader.number(doc, "", "data_bytes");
  state.hotzone_bytes = reader.number(doc, "", "hotzone_bytes");
  if (!reader.failed()) {
    state.old_side = statefile_read_side(reader, doc.at("old_side"), "old_side");
    state.new_side = statefile_read_side(reader, doc.at("new_side"), "new_side");
  }
  if (!reader.failed()) {
    const std::uint64_t unit = std::max(state.old_side.sector_size, state.new_side.sector_size);
    // Both are powers of two: a multiple of the larger is a multiple of both.
    if (state.data_bytes % unit != 0) {
      reader.fail_field("data_bytes", fmt::format("{} is not a multiple of both sector sizes "
                                                  "({} and {})",
                                                  state.data_bytes, state.old_side.sector_size,
                                                  state.new_side.sector_size));
    } else if (state.hotzone_bytes == 0 || state.hotzone_bytes % unit != 0 ||
               state.hotzone_bytes > kMaxHotzoneBytes) {
      reader.fail_field("hotzone_bytes",
                        fmt::format("{} is not a multiple of both sector sizes ({} and {}) from "
                                    "{} to {}",
                                    state.hotzone_bytes, state.old_side.sector_size,
                                    state.new_side.sector_size, unit, kMaxHotzoneBytes));
    }
  }
  if (!reader.failed()) {
    state.old_verifier = statefile_read_verifier(reader, doc.at("old_verifier"), "old_verifier");
    state.new_verifier = statefile_read_verifier(reader, doc.at("new_verifier"), "new_verifier");
  }
  state.started = reader.text(doc, "", "started", true);
  state.first_unit_mac = reader.hex_bytes(doc, "", "first_unit_mac", kStatefileDigestBytes);
  state.started_online = reader.boolean(doc, "", "started_online");
  // empty until the final switch begins
  if (const std::string switch_mac = reader.text(doc, "", "switch_mac", true);
      !reader.failed() && !switch_mac.empty()) {
    state.switch_mac = reader.hex_bytes(doc, "", "switch_mac", kStatefileDigestBytes);
  }
  state.mac = reader.hex_bytes(doc, "", "mac", kStatefileDigestBytes);
  if (reader.failed()) {
    return reader.error();
  }
  return state;
}

std::filesystem::path journal_path(const std::filesystem::path &state) {
  std::filesystem::path out = state;
  out += ".journal";
  return out;
}

Result<void> write_state(const std::filesystem::path &path, const ReencryptState &state) {
  // What is written must read back as this state: the same rules, and nothing lost to JSON.
  const std::string text = state_to_json(state);
  const auto back = state_from_json(text, path.string());
  if (!back) {
    return back.error();
  }
  if (*back != state) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: the state does not survive JSON: the device path {} or "
                                  "another text in it is not UTF-8",
                                  printable(path.string()), printable(state.device)));
  }
  if (auto exists = statefile_exists(path, "replace the state file"); !exists) {
    return exists.error();
  }
  if (path.filename().empty()) {
    return make_error(Errc::invalid_argument, fmt::format("{} names a directory, not a state file",
                                                          printable(path.string())));
  }

  std::array<std::uint8_t, 8> tag{};
  if (const int err = statefile_random(tag); err != 0) {
    return make_error(
        Errc::device,
        fmt::format("cannot name a temporary state file (getrandom): {}", std::strerror(err)), err);
  }
  detail::UnlinkOnFailure temporary(
      path.parent_path() / fmt::format(".{}.tmp-{}", path.filename().string(), statefile_hex(tag)));
  constexpr int kCreate = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
  const FileDescriptor fd(open(temporary.path().c_str(), kCreate, 0600));
  if (fd.get() < 0) {
    temporary.keep();  // not ours
    return detail::state_file_error("create", temporary.path(), errno);
  }
  if (fchmod(fd.get(), 0600) != 0) {  // whatever the umask
    return detail::state_file_error("set the mode of", temporary.path(), errno);
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  const auto *text_bytes = reinterpret_cast<const std::uint8_t *>(text.data());
  if (const int err = detail::pwrite_full(fd.get(), {text_bytes, text.size()}, 0); err != 0) {
    return detail::state_file_error("write", temporary.path(), err);
  }
  if (fsync(fd.get()) != 0) {
    return detail::state_file_error("write", temporary.path(), errno);
  }
  if (rename(temporary.path().c_str(), path.c_str()) != 0) {
    return detail::state_file_error("replace the state file", path, errno);
  }
  temporary.keep();
  if (const int err = detail::fsync_parent_directory(path); err != 0) {
    return detail::state_file_error("make durable the directory of", path, err);
  }
  return {};
}

Result<ReencryptState> read_state(const std::filesystem::path &path) {
  const auto exists = statefile_exists(path, "read the state file");
  if (!exists) {
    return exists.error();
  }
  if (!*exists) {
    return make_error(Errc::not_found,
                      fmt::format("{}: no such state file: give the state file the run was "
                                  "started with",
                                  printable(path.string())),
                      ENOENT);
  }
  auto fd = statefile_open(path, O_RDONLY, "read the state file");
  if (!fd) {
    return fd.error();
  }
  std::string text(kStatefileMaxBytes + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = read(fd->get(), text.data() + size, text.size() - size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return detail::state_file_error("read the state file", path, errno);
    }
    if (n == 0) {
      break;
    }
    size += static_cast<std::size_t>(n);
  }
  if (size > kStatefileMaxBytes) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} is larger than {} bytes: it is not a state file lbscrypt "
                                  "reencrypt wrote",
                                  printable(path.string()), kStatefileMaxBytes));
  }
  text.resize(size);
  if (size > 0 && std::all_of(text.begin(), text.end(), [](char c) { return c == '\0'; })) {
    return make_error(Errc::invalid_argument,
                      fmt::format("{} is all zeros: the run that wrote it ended and wiped it "
                                  "(a cut came before it was removed): remove it and its "
                                  "journal",
                                  printable(path.string())));
  }
  return state_from_json(text, path.string());
}

std::filesystem::path ended_state_path(const std::filesystem::path &state) {
  std::filesystem::path out = state;
  out += ".ended";
  return out;
}

Result<void> remove_state(const std::filesystem::path &path) {
  // Nothing is removed unless every path is a regular file (or absent).
  const auto journal = journal_path(path);
  const auto ended = ended_state_path(path);
  const auto state_exists = statefile_exists(path, "remove the state file");
  if (!state_exists) {
    return state_exists.error();
  }
  const auto ended_exists = statefile_exists(ended, "wipe the ended state file");
  if (!ended_exists) {
    return ended_exists.error();
  }
  const auto journal_exists = statefile_exists(journal, "wipe the journal");
  if (!journal_exists) {
    return journal_exists.error();
  }
  // The state goes first, durably: while it exists --resume reads the journal, so a power cut
  // must never find the state beside a journal already wiped (its blank slots would read as
  // a run at position 0, and the volume would be converted a second time) or already gone.
  // It is renamed away before it is wiped: a cut during the wipe leaves STATE.ended, which
  // --resume finishes removing, never a state file it cannot read.
  if (*state_exists) {
    if (rename(path.c_str(), ended.c_str()) != 0) {
      return detail::state_file_error("rename the state file", path, errno);
    }
    if (const int err = detail::fsync_parent_directory(path); err != 0) {
      return detail::state_file_error("make durable the directory of", path, err);
    }
  }
  if (*state_exists || *ended_exists) {
    // Its verifiers and MAC are zeros in place, durable, so the unlinked blocks do not keep
    // them (a copy-on-write filesystem or an SSD may still: see the documentation).
    if (auto r = statefile_overwrite(ended, "wipe the state file"); !r) {
      return r;
    }
    if (unlink(ended.c_str()) != 0 && errno != ENOENT) {
      return detail::state_file_error("remove the state file", ended, errno);
    }
    if (const int err = detail::fsync_parent_directory(ended); err != 0) {
      return detail::state_file_error("make durable the directory of", ended, err);
    }
  }
  if (!*journal_exists) {
    return {};
  }
  // The journal held old ciphertext: zeros over it, durable, before it is unlinked.
  if (auto r = statefile_overwrite(journal, "wipe the journal"); !r) {
    return r;
  }
  if (unlink(journal.c_str()) != 0 && errno != ENOENT) {
    return detail::state_file_error("remove the journal", journal, errno);
  }
  if (const int err = detail::fsync_parent_directory(journal); err != 0) {
    return detail::state_file_error("make durable the directory of", journal, err);
  }
  return {};
}

Result<bool> finish_ended_state(const std::filesystem::path &path) {
  const auto state_exists = statefile_exists(path, "read the state file");
  if (!state_exists) {
    return state_exists.error();
  }
  const auto ended_exists = statefile_exists(ended_state_path(path), "wipe the ended state file");
  if (!ended_exists) {
    return ended_exists.error();
  }
  if (*state_exists || !*ended_exists) {
    return false;
  }
  if (auto r = remove_state(path); !r) {
    return r.error();
  }
  return true;
}

StateLock::~StateLock() {
  if (fd_ >= 0) {
    close(fd_);  // releases the flock
  }
}

StateLock::StateLock(StateLock &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

StateLock &StateLock::operator=(StateLock &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Result<StateLock> StateLock::acquire(const std::filesystem::path &state) {
  // The lock holds the inode opened here: write_state's rename puts a new inode at the path,
  // so a run takes the lock after its state file is written and does not replace it after.
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  StateLock lock(open(state.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (lock.fd_ < 0) {
    if (errno == ELOOP) {
      return detail::not_regular_file_error(state, S_IFLNK);
    }
    if (errno == ENOENT) {
      return make_error(Errc::not_found,
                        fmt::format("{}: no such state file: give the state file of the run",
                                    printable(state.string())),
                        ENOENT);
    }
    return detail::state_file_error("lock", state, errno);
  }
  if (auto st = statefile_fstat_regular(lock.fd_, state, "lock"); !st) {
    return st.error();
  }
  while (flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno == EWOULDBLOCK) {
      return make_error(Errc::busy,
                        fmt::format("another lbscrypt reencrypt is running this state file ({}): "
                                    "wait for it to end, or stop it (Ctrl-C, SIGTERM) first",
                                    printable(state.string())),
                        EWOULDBLOCK);
    }
    return detail::state_file_error("lock", state, errno);
  }
  return lock;
}

}  // namespace lbscrypt
