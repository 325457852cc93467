// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/reencrypt/run.hpp"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "lbscrypt/boot_volumes.hpp"
#include "lbscrypt/crypttab.hpp"
#include "lbscrypt/reencrypt/identity.hpp"
#include "lbscrypt/reencrypt/leftovers.hpp"
#include "lbscrypt/reencrypt/online.hpp"
#include "lbscrypt/reencrypt/online_checks.hpp"
#include "lbscrypt/reencrypt/plan.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/reencrypt/tab.hpp"

namespace lbscrypt {

namespace {

constexpr std::uint64_t kRunSectorBytes = 512;
constexpr std::size_t kRunIdRandomBytes = 16;

Result<std::string> random_run_id() {
  std::array<std::uint8_t, kRunIdRandomBytes> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      const int error = errno;
      return make_error(Errc::key, fmt::format("getrandom failed: {}", std::strerror(error)),
                        error);
    }
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (const std::uint8_t b : bytes) {
    hex += fmt::format("{:02x}", b);
  }
  return hex;
}

std::string run_resume_hint(const std::filesystem::path &state) {
  return fmt::format("lbscrypt reencrypt --resume --state {} with both keys", state.string());
}

// The side's table: the old mapping's request with the side's words.
MappingRequest side_request(const MappingRequest &base, const CryptSide &side) {
  MappingRequest request = base;
  request.cipher = side.cipher;
  request.sector_size = side.sector_size;
  request.key_bytes = side.key_bytes;
  request.flags = CryptFlags{};
  request.flags.iv_large_sectors = side.iv_large_sectors;
  request.type = MappingType::plain;
  return request;
}

CryptSide side_of(const MappingRequest &request) {
  return CryptSide{request.cipher, request.key_bytes, request.sector_size,
                   request.flags.iv_large_sectors};
}

// Both sides' tables, each checked as open checks it (gate, cipher, length, alignment).
Result<void> run_tables(const MappingRequest &old_request, const CryptSide &new_side,
                        const Environment &env) {
  auto old_table = prepare_table(old_request, env);
  if (!old_table) {
    return old_table.error();
  }
  auto new_table = prepare_table(side_request(old_request, new_side), env);
  if (!new_table) {
    return Error{new_table.error().code,
                 fmt::format("the new parameters: {}", new_table.error().message),
                 new_table.error().os_errno};
  }
  return {};
}

Result<void> run_device_checks(const std::string &device, const Environment &env) {
  const auto kind = env.devices->path_kind(device);
  if (!kind) {
    return kind.error();
  }
  if (*kind != PathKind::block_device) {
    return make_error(Errc::device,
                      fmt::format("{} is {}: reencrypt works on a block device (for an image "
                                  "file, attach it with losetup first)",
                                  device, describe(*kind)));
  }
  const auto luks = env.devices->has_luks_header(device);
  if (!luks) {
    return luks.error();
  }
  if (*luks) {
    return make_error(Errc::refused, fmt::format("{} holds a LUKS header: lbscrypt reencrypts "
                                                 "plain volumes; use cryptsetup reencrypt",
                                                 device));
  }
  return {};
}

Result<SecretBuffer> run_key(const std::function<Result<SecretBuffer>(std::uint32_t)> &ask,
                             std::uint32_t key_bytes, std::string_view which) {
  auto key = ask(key_bytes);
  if (!key) {
    return key.error();
  }
  if (key->size() != key_bytes) {
    return make_error(Errc::key, fmt::format("the {} key is {} bytes, not the {} its cipher takes",
                                             which, key->size(), key_bytes));
  }
  return key;
}

// The new key: with --update-tab and a new credential for a sealed line, unsealed under the
// name of the line's credential it replaces at the end (tab_new_sealed_key); otherwise the
// step's (a new credential under its own name among them).
Result<SecretBuffer> run_new_key(const ReencryptRequest &request, const std::string &device,
                                 const CryptSide &new_side, const ReencryptSteps &steps) {
  const auto ask = [&](std::uint32_t key_bytes) -> Result<SecretBuffer> {
    if (request.update_tab && request.tab_text) {
      const Lbscrypttab tab = parse_lbscrypttab(*request.tab_text, request.tab_path);
      auto sealed =
          tab_new_sealed_key(tab, request.tab_path, device, new_side, *request.update_tab);
      if (!sealed) {
        return sealed.error();
      }
      if (*sealed) {
        return std::move(**sealed);
      }
    }
    return steps.new_key(key_bytes);
  };
  return run_key(ask, new_side.key_bytes, "new");
}

struct RunDevice {
  DeviceIdentity identity;
  std::string key;  // the registry's key of the device
};

RunDevice run_device(const std::string &device, const std::filesystem::path &sysfs) {
  DeviceIdentity identity = identify_device(device, sysfs);
  std::string key = registry_key(identity);
  return RunDevice{std::move(identity), std::move(key)};
}

// What the device is made of (reencrypt/identity.hpp), recorded in the state. A device sysfs
// cannot describe (a loop device over a deleted file) could not be found again: refused.
// nullopt only for a path that stat does not see as a block device (the unit tests' stand-in).
Result<std::optional<DeviceFingerprint>> run_identity(const std::string &device,
                                                      const RunDevice &where,
                                                      const std::filesystem::path &sysfs) {
  if (!where.identity.number) {
    return std::optional<DeviceFingerprint>{};
  }
  auto identity = read_device_fingerprint(sysfs, *where.identity.number);
  if (!identity) {
    return make_error(Errc::refused,
                      fmt::format("{}: {}: --resume could not tell it from another device; give "
                                  "a device sysfs describes",
                                  device, identity.error().message));
  }
  return std::optional<DeviceFingerprint>(std::move(identity).value());
}

// The facts every refusal before the keys looks at; the probe comes later.
Result<PlanFacts> run_facts(const ReencryptRequest &request, const std::string &device,
                            const MappingRequest &old_request, const CryptSide &new_side,
                            const Environment &env) {
  PlanFacts facts;
  facts.device = device;
  auto bytes = env.devices->size_bytes(device);
  if (!bytes) {
    return bytes.error();
  }
  facts.device_bytes = *bytes;
  facts.offset = old_request.offset;
  facts.skip = old_request.skip;
  facts.size = old_request.size;
  facts.old_side = side_of(old_request);
  facts.new_side = new_side;
  auto known = capabilities(env);
  if (!known) {
    return known.error();
  }
  facts.known = *known;
  facts.user = env.devices->user_of(device);
  auto family = device_family_of(device, request.sysfs);
  if (!family) {
    return family.error();
  }
  facts.family = std::move(family).value();
  auto place = state_place(request.state);
  if (!place) {
    return place.error();
  }
  facts.state = std::move(place).value();
  facts.force = request.force;
  return facts;
}

// Every refusal that needs no key: the data's length in bytes. Online, the device is held by
// the active mapping alone.
Result<std::uint64_t> run_plan_checks(const PlanFacts &facts, const LiveMapping *live,
                                      std::string_view run_id = {}) {
  auto data_bytes = check_reencrypt_geometry(facts);
  if (!data_bytes) {
    return data_bytes.error();
  }
  if (auto r = live != nullptr ? check_live_holder(*live, facts.device, facts.user, run_id)
                               : check_reencrypt_device_free(facts);
      !r) {
    return r.error();
  }
  if (auto r = check_reencrypt_state_place(facts); !r) {
    return r.error();
  }
  if (auto r = check_reencrypt_boot(facts); !r) {
    return r.error();
  }
  return data_bytes;
}

// A volume lbscrypttab lists would be opened with the old parameters at the next boot: refused,
// unless --update-tab and its line can follow the run (not a volume the initramfs opens,
// opens_in_initrd: the initramfs cannot resume a run).
Result<void> run_tab_check(const ReencryptRequest &request, const std::string &device,
                           const CryptSide &new_side) {
  if (!request.tab_text) {
    return {};
  }
  const Lbscrypttab tab = parse_lbscrypttab(*request.tab_text, request.tab_path);
  const auto entries = tab_entries_for(tab, device);
  if (entries.empty()) {
    return {};
  }
  const TabEntry &entry = *entries.front();
  // First: the advice to the other refusals (comment the line out) would cost a volume the
  // initramfs opens its boot.
  if (opens_in_initrd(entry, request.boot)) {
    PlanFacts facts;
    facts.device = device;
    facts.initrd_volume = entry.name;
    facts.boot_use = boot_use(entry, request.boot);
    return check_reencrypt_boot(facts);
  }
  if (!request.update_tab) {
    return make_error(
        Errc::refused,
        fmt::format("{} is listed in {} as {} (line {}): that line would open it with the old "
                    "parameters at the next boot; give --update-tab to have the line rewritten "
                    "at the end, or comment it out, reencrypt, then write it with the new "
                    "parameters",
                    device, request.tab_path, entry.name, entry.line));
  }
  if (entries.size() > 1) {
    return make_error(Errc::refused,
                      fmt::format("{} is listed in {} twice (lines {} and {}): keep one line",
                                  device, request.tab_path, entry.line, entries[1]->line));
  }
  auto change = plan_tab_change(entry, new_side, *request.update_tab, request.tab_path);
  if (!change) {
    return change.error();
  }
  return {};
}

RegistryEntry run_entry(const ReencryptRequest &request, const ReencryptState &state) {
  RegistryEntry entry;
  entry.device = state.device;
  entry.device_id = state.device_id;
  entry.state = std::filesystem::absolute(request.state).lexically_normal().string();
  entry.run_id = state.run_id;
  return entry;
}

// The run's entries filed under another key than the device's now (a loop device's file
// attached again under another number: its "devt-" key moved), removed. Only ever a leftover
// beside the run's entry, so a registry that cannot be listed (which every open refuses until
// it is put right) is left as it is.
void run_remove_moved_entries(const ReencryptRequest &request, const ReencryptState &state) {
  const auto entries = list_entries(request.registry_dir);
  if (!entries) {
    return;
  }
  for (const RegistryEntry &filed : *entries) {
    if (filed.run_id == state.run_id && filed.device_id != state.device_id) {
      static_cast<void>(remove_entry(request.registry_dir, filed));
    }
  }
}

// What the final switch seals the state with before it changes a file: the run's new key and
// its MACs' key.
struct RunSeal {
  const SecretBuffer &new_key;
  const RunAuth &auth;
};

// Before the first change to lbscrypttab or a key file, the state gets the switch's MAC under
// the new key alone (then its own MAC again, which covers it), durably: a --resume that finds
// only the switch left, perhaps without the old key any more, checks the parameters it writes
// into the line with the new key. The state file written is a new inode, and the run's lock
// holds the old one: the new one is locked here, for the rest of the switch (another run that
// took it in between does the switch itself, and this one stops).
Result<StateLock> run_seal_switch(const ReencryptRequest &request, const ReencryptState &state,
                                  const RunSeal &seal) {
  ReencryptState sealed = state;
  auto switch_auth = RunAuth::derive_switch(seal.new_key, state.run_id);
  if (!switch_auth) {
    return switch_auth.error();
  }
  if (auto r = seal_switch(sealed, *switch_auth); !r) {
    return r.error();
  }
  if (auto r = seal_state(sealed, seal.auth); !r) {
    return r.error();
  }
  if (auto r = write_state(request.state, sealed); !r) {
    return r.error();
  }
  return StateLock::acquire(request.state);
}

// The final switch, the data all converted: the lbscrypttab line (--update-tab) first, then the
// registry entry and the state. A cut anywhere in it leaves the state, and a --resume does
// what is left (each step sees whether it was done). `seal`: the run's keys, nullptr where the
// state carries the switch's MAC already (checked by the caller).
Result<void> run_final_switch(const ReencryptRequest &request, const ReencryptState &state,
                              ReencryptOutcome &outcome, const RunSeal *seal) {
  std::optional<StateLock> sealed_lock;
  if (request.update_tab && state.switch_mac.empty() && seal != nullptr) {
    auto locked = run_seal_switch(request, state, *seal);
    if (!locked) {
      return Error{locked.error().code,
                   fmt::format("{}; the data is all converted, the run ends with: {}",
                               locked.error().message, run_resume_hint(request.state)),
                   locked.error().os_errno};
    }
    sealed_lock.emplace(std::move(locked).value());
  }
  if (request.update_tab) {
    auto tab = apply_tab_change(request.tab_path, state.device, state.new_side, *request.update_tab,
                                state.new_verifier);
    if (!tab) {
      return Error{tab.error().code,
                   fmt::format("{}; the data is all converted, the run ends with: {}",
                               tab.error().message, run_resume_hint(request.state)),
                   tab.error().os_errno};
    }
    outcome.warnings.insert(outcome.warnings.end(), tab->warnings.begin(), tab->warnings.end());
    if (!tab->name.empty()) {
      outcome.tab = std::move(tab).value();
    }
  }
  if (auto r = remove_entry(request.registry_dir, run_entry(request, state)); !r) {
    return r;
  }
  run_remove_moved_entries(request, state);
  return remove_state(request.state);
}

Result<void> finish_run(DeviceReencryptIo &io, const ReencryptRequest &request,
                        const ReencryptState &state, ReencryptOutcome &outcome,
                        const RunSeal &seal) {
  auto closed = io.close();
  if (outcome.report.outcome != EngineOutcome::finished) {
    return closed;
  }
  if (auto r = run_final_switch(request, state, outcome, &seal); !r) {
    return r;
  }
  return closed;
}

// The new key for a --resume that has only the switch left: read from the new key file or,
// once it was renamed, the line's key file; asked for only where the line has no such file.
// Checked against the run's new verifier.
Result<SecretBuffer> switch_new_key(const ReencryptRequest &request, const ReencryptState &state,
                                    const ReencryptSteps &steps) {
  auto from_tab =
      tab_switch_key(request.tab_path, state.device, state.new_side, *request.update_tab);
  if (!from_tab) {
    return from_tab.error();
  }
  auto key = *from_tab ? Result<SecretBuffer>(std::move(**from_tab))
                       : run_key(steps.new_key, state.new_side.key_bytes, "new");
  if (!key) {
    return key.error();
  }
  if (auto r = check_verifier(state.new_verifier, *key, "new"); !r) {
    return r.error();
  }
  return key;
}

// A --resume with --update-tab of a run whose data is all converted and whose final switch
// began (a cut in it): only the switch is left. The old key may be gone (the new key file may
// have replaced it), so the state is checked with the new key alone (its switch MAC), which
// comes from the line's files where it can. nullopt: the run is not that far, or its switch
// had not begun (no switch MAC: the keyed --resume checks everything and does it).
// `recorded`: the state as read, whose MAC is checked.
Result<std::optional<ReencryptOutcome>> run_finish_only(const ReencryptRequest &request,
                                                        const ReencryptState &state,
                                                        const ReencryptState &recorded,
                                                        const ReencryptSteps &steps) {
  {
    // No key: the slots are read without their MACs (nothing is written to the device).
    auto journal = open_journal(journal_path(request.state), state.run_id, state.hotzone_bytes,
                                false, std::nullopt);
    if (!journal) {
      return journal.error();
    }
    auto slots = (*journal)->read_slots();
    if (!slots) {
      return slots.error();
    }
    if (!slots->completed || slots->completed->position < state.data_bytes) {
      return std::optional<ReencryptOutcome>{};
    }
  }
  if (state.switch_mac.empty()) {
    return std::optional<ReencryptOutcome>{};
  }
  {
    auto new_key = switch_new_key(request, state, steps);
    if (!new_key) {
      return new_key.error();
    }
    auto switch_auth = RunAuth::derive_switch(*new_key, state.run_id);
    if (!switch_auth) {
      return switch_auth.error();
    }
    if (auto r = check_switch_seal(recorded, *switch_auth, request.state); !r) {
      return r.error();
    }
  }
  ReencryptOutcome outcome{state, {}, {}, {}, {}, {}};
  outcome.report.outcome = EngineOutcome::finished;
  outcome.report.progress = Progress{state.data_bytes, state.data_bytes, state.data_bytes, 0};
  if (auto r = run_final_switch(request, state, outcome, nullptr); !r) {
    return r.error();
  }
  return std::optional<ReencryptOutcome>(std::move(outcome));
}

// Online: the active mapping, and the kernel and target type its tables load with.
struct RunOnline {
  Kernel *kernel = nullptr;
  const LiveMapping *live = nullptr;
  std::string target_type;
};

std::string run_abort_hint(const ReencryptRequest &request, const std::string &name) {
  return fmt::format("lbscrypt reencrypt --abort --active-name {} --state {} with both keys", name,
                     request.state.string());
}

// After the state is locked and the journal open: the registry entry, the engine (online, with
// the switch's hooks), and at the end the entry and the state removed. An engine error online
// first puts the mapping right.
Result<ReencryptOutcome> run_registered(const ReencryptRequest &request,
                                        const ReencryptState &state, DeviceReencryptIo &io,
                                        JournalStore &journal, bool create,
                                        const ReencryptSteps &steps, OnlineSwitch *live_switch,
                                        ReencryptOutcome outcome, const RunSeal &seal) {
  const RegistryEntry entry = run_entry(request, state);
  const auto listed = find_entry(request.registry_dir, state.device, request.sysfs);
  if (!listed) {
    return listed.error();
  }
  if (*listed && (*listed)->run_id != state.run_id) {
    return make_error(Errc::busy, fmt::format("{} is registered for another run (state {}): "
                                              "finish that one first",
                                              state.device, (*listed)->state));
  }
  // A new run, one whose entry is gone, or one whose device moved (its file attached under
  // another loop number): the boot path must see the device as it is now, then the entry
  // under the old key goes.
  if (!*listed || (*listed)->device_id != entry.device_id) {
    if (auto r = add_entry(request.registry_dir, entry); !r) {
      if (create) {
        static_cast<void>(remove_state(request.state));
      }
      return r.error();
    }
  }
  run_remove_moved_entries(request, state);
  if (create && steps.started) {
    steps.started(state);
  }
  const EngineHooks hooks = live_switch != nullptr ? live_switch->hooks(steps.hooks) : steps.hooks;
  auto report = run_engine(state, io, journal, hooks);
  if (!report) {
    std::string message = report.error().message;
    if (live_switch != nullptr) {
      // A hotzone may be held mid-way: its users wait until it is converted, or fail.
      auto settled = settle_online(*live_switch, state, io, journal);
      message +=
          settled ? fmt::format("; {} has the table of position {}", live_switch->name(), *settled)
                  : fmt::format("; and {} could not be put right: {}", live_switch->name(),
                                settled.error().message);
      static_cast<void>(io.close());
      return Error{report.error().code,
                   fmt::format("{}; to finish: lbscrypt reencrypt --resume --active-name {} "
                               "--state {} with both keys (or {})",
                               message, live_switch->name(), request.state.string(),
                               run_abort_hint(request, live_switch->name())),
                   report.error().os_errno};
    }
    static_cast<void>(io.close());
    // Errc::invalid_argument: the journal and the device disagree (a damaged journal, one older
    // than the device), which a --resume as it is cannot mend: its message says what to do.
    if (report.error().code != Errc::invalid_argument) {
      message = fmt::format("{}; the run can go on: {}", message, run_resume_hint(request.state));
    }
    return Error{report.error().code, message, report.error().os_errno};
  }
  outcome.report = *report;
  if (!report->buffer_locked) {
    outcome.warnings.push_back(
        fmt::format("the hotzone's buffer ({} bytes) could not be locked in memory (mlock, "
                    "RLIMIT_MEMLOCK): its plaintext may have reached swap; run as root, or "
                    "raise the limit (ulimit -l) or give a smaller --hotzone-size",
                    state.hotzone_bytes));
  }
  if (live_switch != nullptr) {
    // NAME gets the table of where the run is, nothing routed, and the hotzone device goes.
    if (auto r = live_switch->finish(report->progress.done_bytes); !r) {
      auto safe = live_switch->fail_safe();
      return Error{r.error().code,
                   fmt::format("{}{}; {}", r.error().message,
                               safe && !safe->empty() ? "; " + *safe : std::string{},
                               run_resume_hint(request.state)),
                   r.error().os_errno};
    }
    if (report->outcome == EngineOutcome::finished) {
      outcome.active_name = live_switch->name();
    }
  }
  if (auto r = finish_run(io, request, state, outcome, seal); !r) {
    return r.error();
  }
  return outcome;
}

// The run itself: the private mappings, for a new run the probe's refusals and the state,
// then the lock, the journal and the registry entry, and the engine.
// A resume comes with the state locked (its leftovers were removed under the lock); a new
// run locks its state once it is written.
Result<ReencryptOutcome> run_with(const ReencryptRequest &request, ReencryptState state,
                                  const SecretBuffer &old_key, const SecretBuffer &new_key,
                                  PlanFacts *facts, const ReencryptSteps &steps,
                                  std::vector<std::string> warnings, const RunOnline &online,
                                  std::optional<StateLock> lock = std::nullopt) {
  const bool create = facts != nullptr;
  auto auth = RunAuth::derive(old_key, new_key, state.run_id);
  if (!auth) {
    return auth.error();
  }
  // A second run of the same state waits for nothing: it is refused before it makes mappings.
  if (!create && !lock) {
    auto locked = StateLock::acquire(request.state);
    if (!locked) {
      return locked.error();
    }
    lock.emplace(std::move(locked).value());
  }
  auto io = steps.make_io(state, old_key, new_key);
  if (!io) {
    return io.error();
  }
  ReencryptOutcome outcome{state, {}, {}, std::move(warnings), {}, {}};
  if (create) {
    // Online, blkid looks at the users' mapping itself (what the filesystem has written).
    auto found =
        steps.probe(online.live != nullptr ? online.live->info.dm_node() : (*io)->old_node());
    if (!found) {
      return found.error();
    }
    outcome.probe = *found;
    facts->probe = *found;
    if (auto r = check_reencrypt_old_key(*facts, outcome.warnings); !r) {
      return r.error();
    }
    if (auto r = check_reencrypt_write_unit(*facts, outcome.warnings); !r) {
      return r.error();
    }
  }
  // The journal before the state file: a power cut between the two then leaves a journal
  // without a state (nothing written to the device yet: a leftover), never a state whose
  // journal is missing or half made, which --resume could not go on from.
  auto journal =
      open_journal(journal_path(request.state), state.run_id, state.hotzone_bytes, create, *auth);
  if (!journal) {
    return journal.error();
  }
  if (create) {
    // What the device holds where the run starts (online, the users write there until the
    // first hotzone, and the device is not read under them: not recorded), then the MAC over
    // every field.
    state.started_online = online.live != nullptr;
    state.first_unit_mac.assign(kRunMacBytes, 0);
    if (!state.started_online) {
      auto first = first_unit_mac(state, **io, **journal);
      if (!first) {
        static_cast<void>(remove_state(request.state));  // the journal made just now
        return first.error();
      }
      state.first_unit_mac.assign(first->begin(), first->end());
    }
    if (auto r = seal_state(state, *auth); !r) {
      static_cast<void>(remove_state(request.state));
      return r.error();
    }
    outcome.state = state;
    if (auto r = write_state(request.state, state); !r) {
      static_cast<void>(remove_state(request.state));  // the journal made just now
      return r.error();
    }
    auto locked = StateLock::acquire(request.state);
    if (!locked) {
      return locked.error();
    }
    lock.emplace(std::move(locked).value());
  }
  std::optional<OnlineSwitch> live_switch;
  if (online.live != nullptr) {
    live_switch.emplace(*online.kernel, *online.live, state, old_key, new_key, online.target_type);
    live_switch->set_boundary(0);
  }
  return run_registered(request, state, **io, **journal, create, steps,
                        live_switch ? &*live_switch : nullptr, std::move(outcome),
                        RunSeal{new_key, *auth});
}

// Online: the active mapping NAME and the old side the user gave, checked against each other
// (nothing is asked for or written before); the device, when not given, is NAME's.
Result<LiveMapping> start_live(const ReencryptRequest &request, const Environment &env,
                               MappingRequest &old_mapping) {
  if (env.kernel == nullptr) {
    return make_error(Errc::kernel, "online reencrypt needs device-mapper");
  }
  auto live = read_live_mapping(*env.kernel, *request.active_name, env.target_type);
  if (!live) {
    return live.error();
  }
  auto length = check_live_parameters(*live, old_mapping);
  if (!length) {
    return length.error();
  }
  const std::string under = env.devices->resolve(live->lines.front().device);
  std::error_code error;
  if (old_mapping.device.empty()) {
    old_mapping.device = under;
  } else if (std::filesystem::weakly_canonical(old_mapping.device, error) !=
             std::filesystem::weakly_canonical(under, error)) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} is on {}, not on {}: give its device, "
                                  "or leave the device out",
                                  live->name, under, old_mapping.device));
  }
  old_mapping.size = *length;
  return live;
}

Result<ReencryptOutcome> start_run(const ReencryptRequest &request, const Environment &env,
                                   const ReencryptSteps &steps) {
  std::error_code error;
  if (std::filesystem::symlink_status(request.state, error).type() !=
      std::filesystem::file_type::not_found) {
    return make_error(Errc::exists,
                      fmt::format("{} exists: to go on with that run give --resume; to start "
                                  "another, name a new state file",
                                  request.state.string()));
  }
  if (request.hotzone_bytes == 0 || request.hotzone_bytes > kMaxHotzoneBytes) {
    return make_error(Errc::invalid_argument,
                      fmt::format("--hotzone-size {} is not 1 to {} bytes (1 GiB, cryptsetup's "
                                  "bound): give a smaller one",
                                  request.hotzone_bytes, kMaxHotzoneBytes));
  }
  if (request.verifier_iterations < kVerifierMinIterations) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("{} PBKDF2 iterations for the key verifiers is below {}: give {} or more",
                    request.verifier_iterations, kVerifierMinIterations, kVerifierMinIterations));
  }
  MappingRequest old_mapping = request.old_mapping;
  std::optional<LiveMapping> live;
  if (request.active_name) {
    auto found = start_live(request, env, old_mapping);
    if (!found) {
      return found.error();
    }
    live = std::move(found).value();
  }
  const std::string &device = old_mapping.device;
  if (auto r = run_device_checks(device, env); !r) {
    return r.error();
  }
  const RunDevice where = run_device(device, request.sysfs);
  if (auto r = run_tab_check(request, where.identity.canonical, request.new_side); !r) {
    return r.error();
  }
  const auto entry = find_entry(request.registry_dir, where.identity);
  if (!entry) {
    return entry.error();
  }
  if (*entry) {
    return make_error(Errc::busy,
                      fmt::format("{} is already being reencrypted (state {}): "
                                  "finish that run first: {}",
                                  device, (*entry)->state, run_resume_hint((*entry)->state)));
  }
  auto facts = run_facts(request, device, old_mapping, request.new_side, env);
  if (!facts) {
    return facts.error();
  }
  auto data_bytes = run_plan_checks(*facts, live ? &*live : nullptr);
  if (!data_bytes) {
    return data_bytes.error();
  }
  if (auto r = run_tables(old_mapping, request.new_side, env); !r) {
    return r.error();
  }
  std::vector<std::string> warnings;
  if (live) {
    // What the run needs while NAME is suspended, off NAME; then the memory locked.
    auto prepared = prepare_online_run(request, live->name, {live->info.major, live->info.minor},
                                       request.new_side.sector_size, steps.lock_memory);
    if (!prepared) {
      return prepared.error();
    }
    warnings = std::move(prepared).value();
  }
  ReencryptState state;
  state.device = where.identity.canonical;
  state.device_id = where.key;
  state.offset = old_mapping.offset;
  state.skip = old_mapping.skip;
  state.data_bytes = *data_bytes;
  state.old_side = side_of(old_mapping);
  state.new_side = request.new_side;
  const std::uint64_t align = hotzone_alignment(state.old_side, state.new_side, 0);
  state.hotzone_bytes = std::max(align, request.hotzone_bytes / align * align);
  auto identity = run_identity(device, where, request.sysfs);
  if (!identity) {
    return identity.error();
  }
  state.device_identity = *identity;
  if (!registry_key_survives_reboot(where.key)) {
    warnings.push_back(
        fmt::format("{} has no id that survives a reboot: open and attach know the run by the "
                    "device's path and number only, so open it under no other name until the run "
                    "ends (--resume finds it by what it is made of)",
                    device));
  }
  if (*identity && !fingerprint_distinguishes(**identity)) {
    warnings.push_back(
        fmt::format("{} has no serial, loop file or device-mapper uuid: --resume "
                    "knows it by its size, path and number only",
                    device));
  }
  auto old_key = run_key(steps.old_key, state.old_side.key_bytes, "old");
  if (!old_key) {
    return old_key.error();
  }
  if (live) {
    if (auto r = check_live_key(*live, *old_key); !r) {
      return r.error();
    }
  }
  auto new_key = run_new_key(request, state.device, state.new_side, steps);
  if (!new_key) {
    return new_key.error();
  }
  if (state.old_side == state.new_side && *old_key == *new_key) {
    return make_error(Errc::invalid_argument,
                      "nothing would change: give a new key, cipher or sector size");
  }
  auto id = random_run_id();
  if (!id) {
    return id.error();
  }
  state.run_id = *id;
  state.started = steps.now_utc ? steps.now_utc() : std::string{};
  auto old_verifier = make_verifier(*old_key, request.verifier_iterations);
  if (!old_verifier) {
    return old_verifier.error();
  }
  auto new_verifier = make_verifier(*new_key, request.verifier_iterations);
  if (!new_verifier) {
    return new_verifier.error();
  }
  state.old_verifier = *old_verifier;
  state.new_verifier = *new_verifier;
  const RunOnline online{env.kernel, live ? &*live : nullptr, env.target_type};
  return run_with(request, state, *old_key, *new_key, &*facts, steps, std::move(warnings), online);
}

// A resume: the path the run recorded may name another device now, or none (sdb became sdc,
// an LVM volume another dm-N, the run's file attached under another loop number), or another
// device may have taken it (a loop device attached to another file). The device whose
// identity is the run's is used (bind_run_device), and a device that does not match is
// refused before anything is written; a "devt-" key follows the device (the registry entry
// is filed again under it). The state file keeps what it recorded: every resume looks again.
// A state with no identity is one whose device was no block device (the unit tests' stand-in):
// it resumes only on such a path, never on a block device.
Result<void> locate_run_device(ReencryptState &state, const std::filesystem::path &sysfs) {
  if (!state.device_identity) {
    std::error_code error;
    if (std::filesystem::is_block_file(state.device, error)) {
      return make_error(Errc::refused,
                        fmt::format("{}: the state file records no identity of the run's device, "
                                    "and a block device is there now: nothing was written; this "
                                    "state cannot resume on it",
                                    state.device));
    }
    return {};
  }
  const RunDevice at = run_device(state.device, sysfs);
  auto bound = bind_run_device(sysfs, state.device, at.identity.number, *state.device_identity);
  if (!bound) {
    return bound.error();
  }
  state.device = std::move(bound).value();
  if (!registry_key_survives_reboot(state.device_id)) {
    state.device_id = run_device(state.device, sysfs).key;
  }
  return {};
}

// The private mappings a killed run left (reencrypt/leftovers.hpp), removed: the state is
// locked. A mapping of the run that is open refuses the resume.
Result<void> run_remove_leftovers(const ReencryptRequest &request, const ReencryptState &state,
                                  const Environment &env, std::string_view keep = {}) {
  if (env.kernel == nullptr) {
    return {};
  }
  auto removed = remove_run_leftovers(*env.kernel, request.sysfs, state.run_id, keep);
  if (!removed) {
    return removed.error();
  }
  return {};
}

// What every resume checks before anything else, offline or online: the device is still the
// run's, its lbscrypttab line allows the run, and the plan's facts for the state's old side.
struct ResumeChecked {
  MappingRequest old_request;
  PlanFacts facts;
};

Result<ResumeChecked> resume_checked(const ReencryptRequest &request, const ReencryptState &state,
                                     const Environment &env) {
  if (auto r = run_device_checks(state.device, env); !r) {
    return r.error();
  }
  const RunDevice where = run_device(state.device, request.sysfs);
  if (where.key != state.device_id) {
    return make_error(Errc::refused,
                      fmt::format("{} is now another device (id {}, the run's is {}) and no "
                                  "device has the run's id: connect the run's device, or give "
                                  "the state file of this device's run",
                                  state.device, where.key, state.device_id));
  }
  if (auto r = run_tab_check(request, where.identity.canonical, state.new_side); !r) {
    return r.error();
  }
  ResumeChecked checked;
  checked.old_request.device = state.device;
  checked.old_request.offset = state.offset;
  checked.old_request.skip = state.skip;
  checked.old_request.size = state.data_bytes / kRunSectorBytes;
  checked.old_request = side_request(checked.old_request, state.old_side);
  auto facts = run_facts(request, state.device, checked.old_request, state.new_side, env);
  if (!facts) {
    return facts.error();
  }
  checked.facts = std::move(facts).value();
  return checked;
}

// The two keys of a run being resumed, each asked for and checked against its verifier: a
// mistyped key is refused before a byte is written.
struct RunKeys {
  SecretBuffer old_key;
  SecretBuffer new_key;
  RunAuth auth;
};

// `recorded` is the state as read (before the device was looked for): its MAC is checked
// once both keys are proven.
Result<RunKeys> resume_keys(const ReencryptState &state, const ReencryptState &recorded,
                            const ReencryptRequest &request, const ReencryptSteps &steps) {
  auto old_key = run_key(steps.old_key, state.old_side.key_bytes, "old");
  if (!old_key) {
    return old_key.error();
  }
  if (auto r = check_verifier(state.old_verifier, *old_key, "old"); !r) {
    return r.error();
  }
  auto new_key = run_new_key(request, state.device, state.new_side, steps);
  if (!new_key) {
    return new_key.error();
  }
  if (auto r = check_verifier(state.new_verifier, *new_key, "new"); !r) {
    return r.error();
  }
  auto auth = RunAuth::derive(*old_key, *new_key, recorded.run_id);
  if (!auth) {
    return auth.error();
  }
  if (auto r = check_state_seal(recorded, *auth, request.state); !r) {
    return r.error();
  }
  return RunKeys{std::move(*old_key), std::move(*new_key), std::move(auth).value()};
}

// A resume's state file. A stop that came while a finished run removed its state leaves
// STATE.ended (and perhaps the journal) and no STATE: that removal is finished here, under the
// lock of STATE.ended (a run still removing it holds that lock), and the resume ends in one line
// saying so; nothing touches the device.
Result<ReencryptState> read_resume_state(const ReencryptRequest &request) {
  auto state = read_state(request.state);
  if (state || state.error().code != Errc::not_found) {
    return state;
  }
  std::error_code error;
  if (!std::filesystem::exists(ended_state_path(request.state), error)) {
    return state;
  }
  auto lock = StateLock::acquire(ended_state_path(request.state));
  if (!lock) {
    return lock.error();
  }
  auto finished = finish_ended_state(request.state);
  if (!finished) {
    return finished.error();
  }
  return make_error(Errc::not_found,
                    fmt::format("{}: the run had ended, and was stopped while it removed its state "
                                "file; its leftover files are removed now: nothing to resume",
                                printable(request.state.string())),
                    ENOENT);
}

Result<ReencryptOutcome> resume_run(const ReencryptRequest &request, const Environment &env,
                                    const ReencryptSteps &steps) {
  auto state = read_resume_state(request);
  if (!state) {
    return state.error();
  }
  // The MAC is checked over the state as read, before the device was looked for.
  const ReencryptState recorded = *state;
  if (auto r = locate_run_device(*state, request.sysfs); !r) {
    return r.error();
  }
  // A second run of the same state waits for nothing: it is refused before it touches a
  // mapping. Under the lock, what a killed run left goes first: its mappings hold the device.
  auto locked = StateLock::acquire(request.state);
  if (!locked) {
    return locked.error();
  }
  if (auto r = run_remove_leftovers(request, *state, env); !r) {
    return r.error();
  }
  auto checked = resume_checked(request, *state, env);
  if (!checked) {
    return checked.error();
  }
  const MappingRequest &old_request = checked->old_request;
  const PlanFacts &facts = checked->facts;
  if (auto r = run_plan_checks(facts, nullptr); !r) {
    return r.error();
  }
  if (auto r = run_tables(old_request, state->new_side, env); !r) {
    return r.error();
  }
  if (request.update_tab) {
    auto done = run_finish_only(request, *state, recorded, steps);
    if (!done) {
      return done.error();
    }
    if (*done) {
      return std::move(**done);
    }
  }
  auto keys = resume_keys(*state, recorded, request, steps);
  if (!keys) {
    return keys.error();
  }
  return run_with(request, *state, keys->old_key, keys->new_key, nullptr, steps, {}, RunOnline{},
                  std::move(locked).value());
}

// Online: NAME's table may lag the journal by the hotzone a kill -9 came after (its completed
// record written, the switch not yet made), never lead it: a journal behind NAME's table is
// older than the device.
Result<void> check_live_position(JournalStore &journal, std::uint64_t boundary,
                                 const std::string &name) {
  auto slots = journal.read_slots();
  if (!slots) {
    return slots.error();
  }
  std::uint64_t furthest = slots->completed ? slots->completed->position : 0;
  if (slots->journaled) {
    furthest = std::max(furthest, slots->journaled->position + slots->journaled->length);
  }
  if (boundary > furthest) {
    return make_error(Errc::invalid_argument,
                      fmt::format("the journal is older than the device: {}'s table has the new "
                                  "parameters up to byte {}, the journal goes to byte {}: "
                                  "nothing was written; a journal or state disk put back from "
                                  "another time cannot finish this run (it would convert "
                                  "hotzones twice): give the journal the run last wrote",
                                  name, boundary, furthest));
  }
  return {};
}

// Online --resume and --abort. A kill -9 may have left NAME suspended under a mounted
// filesystem, whose users hang: so the keys (which the tables carry) are asked for and checked
// first, then NAME is put right before anything else, and only then come the resume's checks
// and the run.
Result<ReencryptOutcome> resume_online(const ReencryptRequest &request, const Environment &env,
                                       const ReencryptSteps &steps) {
  if (env.kernel == nullptr) {
    return make_error(Errc::kernel, "online reencrypt needs device-mapper");
  }
  auto state = read_resume_state(request);
  if (!state) {
    return state.error();
  }
  const ReencryptState recorded = *state;
  if (auto r = locate_run_device(*state, request.sysfs); !r) {
    return r.error();
  }
  auto live = read_live_mapping(*env.kernel, *request.active_name, env.target_type);
  if (!live) {
    return live.error();
  }
  // The run's hotzone device, when a killed or failed run left NAME routed through it.
  auto hotzone = online_hotzone_device(*env.kernel, state->run_id);
  if (!hotzone) {
    return hotzone.error();
  }
  const std::string hotzone_device = hotzone->value_or(std::string{});
  const std::string under =
      env.devices->resolve(live_device(*live, hotzone_device).value_or(live->lines.front().device));
  std::error_code error;
  if (live_device(*live, hotzone_device) &&
      std::filesystem::weakly_canonical(under, error) !=
          std::filesystem::weakly_canonical(state->device, error)) {
    return make_error(Errc::refused,
                      fmt::format("the active mapping {} is on {}, the run's device is {}: give "
                                  "the name of the volume the run converts",
                                  live->name, under, state->device));
  }
  // What the run needs while NAME is suspended, off NAME, before it is suspended; when a kill
  // -9 left it suspended, once it is put right (a refusal then leaves it live).
  const auto prepare = [&]() {
    return prepare_online_run(request, live->name, {live->info.major, live->info.minor},
                              state->new_side.sector_size, steps.lock_memory);
  };
  Result<std::vector<std::string>> prepared = std::vector<std::string>{};
  if (!live->info.suspended) {
    prepared = prepare();
    if (!prepared) {
      return prepared.error();
    }
  }
  auto keys = resume_keys(*state, recorded, request, steps);
  if (!keys) {
    return keys.error();
  }
  auto layout = live_layout(*live, *state, keys->old_key, keys->new_key, hotzone_device);
  if (!layout) {
    return layout.error();
  }
  auto locked = StateLock::acquire(request.state);
  if (!locked) {
    return locked.error();
  }
  // The hotzone device NAME routes through stays: it holds the hotzone's users until the
  // hotzone is converted.
  if (auto r = run_remove_leftovers(
          request, *state, env,
          layout->routed > 0 ? online_hotzone_name(state->run_id) : std::string{});
      !r) {
    return r.error();
  }
  auto io = steps.make_io(*state, keys->old_key, keys->new_key);
  if (!io) {
    return io.error();
  }
  auto journal = open_journal(journal_path(request.state), state->run_id, state->hotzone_bytes,
                              false, keys->auth);
  if (!journal) {
    return journal.error();
  }
  if (auto r = check_live_position(**journal, layout->converted, live->name); !r) {
    return r.error();
  }
  OnlineSwitch live_switch(*env.kernel, *live, *state, keys->old_key, keys->new_key,
                           env.target_type, layout->routed > 0 ? hotzone_device : std::string{});
  live_switch.set_layout(*layout);
  auto position = settle_online(live_switch, *state, **io, **journal);
  if (!position) {
    static_cast<void>((*io)->close());
    return Error{position.error().code,
                 fmt::format("{}; to finish: try again, or {}", position.error().message,
                             run_abort_hint(request, live->name)),
                 position.error().os_errno};
  }
  ReencryptOutcome outcome{*state, {}, {}, {}, live->name, {}};
  outcome.report.outcome =
      *position == state->data_bytes ? EngineOutcome::finished : EngineOutcome::stopped;
  outcome.report.progress = Progress{*position, *position, state->data_bytes, 0};
  outcome.warnings = prepared.value();
  if (request.abort) {
    if (auto r = (*io)->close(); !r) {
      return r.error();
    }
    outcome.report.outcome = EngineOutcome::stopped;
    return outcome;
  }
  if (live->info.suspended) {
    prepared = prepare();
    if (!prepared) {
      return prepared.error();
    }
    outcome.warnings = std::move(prepared).value();
  }
  // NAME is live again; now the checks of any resume (a refusal keeps the run).
  auto checked = resume_checked(request, *state, env);
  if (!checked) {
    return checked.error();
  }
  const MappingRequest &old_request = checked->old_request;
  const PlanFacts &facts = checked->facts;
  if (auto r = run_plan_checks(facts, &*live, state->run_id); !r) {
    return r.error();
  }
  if (auto r = run_tables(old_request, state->new_side, env); !r) {
    return r.error();
  }
  return run_registered(request, *state, **io, **journal, false, steps, &live_switch,
                        std::move(outcome), RunSeal{keys->new_key, keys->auth});
}

}  // namespace

Result<ReencryptOutcome> reencrypt_offline(const ReencryptRequest &request, const Environment &env,
                                           const ReencryptSteps &steps) {
  if (request.active_name && request.resume) {
    return resume_online(request, env, steps);
  }
  if (request.abort) {
    return make_error(Errc::invalid_argument,
                      "--abort puts an online run's mapping right: give --active-name and "
                      "--resume's state");
  }
  if (request.resume) {
    return resume_run(request, env, steps);
  }
  return start_run(request, env, steps);
}

}  // namespace lbscrypt
