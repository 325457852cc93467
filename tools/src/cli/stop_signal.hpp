// SPDX-License-Identifier: GPL-2.0-only
// SIGINT, SIGTERM and SIGHUP as a request to stop at the next safe point: a long command
// (matrix, reencrypt) polls stop_requested() between its steps, cleans up, and returns; the
// signal is then raised again so the caller's shell sees the usual 128+N.
#pragma once

#include <atomic>

namespace lbscrypt::cli {

// Installs the handlers for its lifetime. One at a time.
class StopOnSignal {
 public:
  StopOnSignal();
  StopOnSignal(const StopOnSignal &) = delete;
  StopOnSignal &operator=(const StopOnSignal &) = delete;
  StopOnSignal(StopOnSignal &&) = delete;
  StopOnSignal &operator=(StopOnSignal &&) = delete;
  // Restores the previous handlers, then raises the signal that asked for the stop.
  ~StopOnSignal();

  // Set by the handler.
  [[nodiscard]] static const std::atomic<bool> &flag();
  [[nodiscard]] static bool stop_requested();
};

}  // namespace lbscrypt::cli
