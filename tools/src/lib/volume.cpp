// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/volume.hpp"

#include <utility>

#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/torn.hpp"

namespace lbscrypt {

Result<VolumeOutcome> open_volume(const VolumeRequest &request, const Environment &env,
                                  const VolumeSteps &steps) {
  // First: a volume half converted by `lbscrypt reencrypt` is neither its old parameters nor
  // its new ones, and a filesystem mounted through either is destroyed. Nothing else about
  // the request matters until the run is finished.
  if (env.reencrypt_registry) {
    const auto run = find_entry(*env.reencrypt_registry, request.mapping.device);
    if (!run) {
      return run.error();
    }
    if (*run) {
      return reencrypt_in_progress(request.mapping.device, **run);
    }
  }
  auto table = prepare_table(request.mapping, env);
  if (!table) {
    return table.error();
  }
  if (steps.planned) {
    steps.planned(*table);
  }
  VolumeOutcome outcome;
  // Already open as asked: nothing to do, and no key to ask for (cryptsetup's systemd units
  // succeed likewise when started twice).
  const auto active = active_as(request.name, *table, request.key_bytes, request.read_only, env);
  if (!active) {
    return active.error();
  }
  if (*active) {
    outcome.already_active = true;
    outcome.opened.device = **active;
    outcome.opened.torn_warning = torn_sector_warning(place_of(*table), env);
    outcome.opened.table = std::move(table).value();
    return outcome;
  }
  // Before the key: a device in use is refused without asking for it.
  if (const auto free = check_device_free(request.mapping.device, request.shared, env); !free) {
    return free.error();
  }
  for (std::uint32_t attempt = 1;; ++attempt) {
    auto key = steps.key(attempt);
    if (!key) {
      return key.error();
    }
    CryptTable keyed = *table;
    keyed.key = std::move(key).value();
    auto opened =
        open_mapping(request.name, std::move(keyed), request.read_only, env, request.shared);
    if (!opened) {
      return opened.error();
    }
    const auto checked = steps.check ? steps.check(*opened) : Result<void>(Ok{});
    if (checked) {
      outcome.opened = std::move(opened).value();
      return outcome;
    }
    const auto closed = close_mapping(request.name, env);
    Error error = checked.error();
    error.message += closed ? " The mapping was closed." : " The mapping could not be closed.";
    if (error.code != Errc::key || !steps.again || !steps.again(attempt)) {
      return error;
    }
    outcome.notes.push_back(error.message + " Asking again.");
  }
}

}  // namespace lbscrypt
