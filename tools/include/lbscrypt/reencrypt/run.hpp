// SPDX-License-Identifier: GPL-2.0-only
// One offline `lbscrypt reencrypt`, start or resume, in this order: every check that needs no
// key (the tables of both sides load here, the device is free and not listed, or listed with
// --update-tab and its line can follow, the state path is safe), then the keys and their
// proof, the state file, the journal and the registry entry, and only then the first write.
// At the end (the final switch) the lbscrypttab line is rewritten (--update-tab), then the
// registry entry and the state go.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/operations.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "lbscrypt/reencrypt/io.hpp"
#include "lbscrypt/reencrypt/plan.hpp"
#include "lbscrypt/reencrypt/tab.hpp"
#include "lbscrypt/result.hpp"
#include "lbscrypt/secret.hpp"
#include "lbscrypt/table.hpp"

namespace lbscrypt {

inline constexpr std::uint64_t kDefaultHotzoneBytes = 64ULL << 20U;

struct ReencryptRequest {
  std::filesystem::path state;
  bool resume = false;  // the parameters come from the state file
  bool force = false;   // go on without a recognised signature (the old key unproven)
  // A new run: the PBKDF2 iterations of both key verifiers (kVerifierMinIterations or more).
  std::uint32_t verifier_iterations = kVerifierIterations;
  // A new run: the old side as `open` takes it, the new side's words.
  MappingRequest old_mapping;
  CryptSide new_side;
  std::uint64_t hotzone_bytes = kDefaultHotzoneBytes;
  std::filesystem::path registry_dir{kReencryptRegistry};
  std::filesystem::path sysfs = "/sys";
  // Online: where /proc is (reencrypt/online_checks.hpp), and the key files given (not "-"),
  // which must not be on NAME.
  std::filesystem::path proc = "/proc";
  std::vector<std::filesystem::path> key_files;
  // lbscrypttab's text, when there is one: a listed volume is refused (its line would open it
  // with the old parameters at the next boot), unless update_tab.
  std::optional<std::string> tab_text;
  std::string tab_path = "/etc/lbscrypttab";
  // The mappings the boot needs (find_boot_volumes): a listed volume among them is refused as
  // an x-initrd.attach one is, the initramfs opening it all the same.
  BootVolumes boot;
  // Online (reencrypt/online.hpp): the active mapping over the device, opened by lbscrypt or
  // cryptsetup plain, held by nothing else. A new run reads the old side from its table (the
  // device may be left empty: it is the table's); the table must match old_mapping.
  std::optional<std::string> active_name;
  // With active_name and resume: only put the mapping right (a hotzone in flight put back and
  // converted, the table of the journal's position loaded, resumed), remove the private
  // mappings and keep the run for a later --resume.
  bool abort = false;
  // --update-tab: a listed volume is taken (not one the initramfs opens), and at the final
  // switch its line, read again from tab_path, gets the new parameters (reencrypt/tab.hpp).
  // A --resume of a run whose data is all converted does only the switch, and asks no key.
  std::optional<TabUpdate> update_tab;
};

struct ReencryptSteps {
  // The keys, asked for once every check that needs none has passed; their sizes in bytes.
  std::function<Result<SecretBuffer>(std::uint32_t key_bytes)> old_key;
  std::function<Result<SecretBuffer>(std::uint32_t key_bytes)> new_key;
  // The two private mappings over the device: old read-only, new read-write
  // (open_reencrypt_io on the running kernel).
  std::function<Result<std::unique_ptr<DeviceReencryptIo>>(
      const ReencryptState &state, const SecretBuffer &old_key, const SecretBuffer &new_key)>
      make_io;
  // blkid on the old mapping's node.
  std::function<Result<std::optional<FilesystemProbe>>(const std::string &node)> probe;
  std::function<std::string()> now_utc;
  std::function<void(const ReencryptState &)> started;  // optional: the state is written
  // Online, once the refusals of reencrypt/online_checks.hpp passed and before NAME is first
  // suspended: lock the process's memory (lock_memory_for_online); a warning line or nullopt.
  // Optional (the unit tests lock nothing).
  std::function<std::optional<std::string>()> lock_memory;
  EngineHooks hooks;
};

struct ReencryptOutcome {
  ReencryptState state;
  EngineReport report;
  std::optional<FilesystemProbe> probe;
  std::vector<std::string> warnings;  // one line each: what --force let through, an unstable id
  std::optional<std::string> active_name;  // online: the mapping now on the new parameters
  std::optional<TabOutcome> tab;           // --update-tab: what the final switch did to the line
};

// Offline, or online when request.active_name is set. The state is the same: a run started
// online can be finished offline after a reboot.
[[nodiscard]] Result<ReencryptOutcome> reencrypt_offline(const ReencryptRequest &request,
                                                         const Environment &env,
                                                         const ReencryptSteps &steps);

}  // namespace lbscrypt
