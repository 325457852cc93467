// SPDX-License-Identifier: GPL-2.0-only
#include "stop_signal.hpp"

#include <array>
#include <csignal>
#include <cstddef>

namespace lbscrypt::cli {

namespace {

constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};

std::atomic<bool> g_stop{false};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
volatile std::sig_atomic_t g_signo =
    0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
static_assert(std::atomic<bool>::is_always_lock_free);

// The handlers StopOnSignal replaced.
std::array<struct sigaction, kStopSignals.size()>
    g_previous{};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void request_stop(int signo) {
  g_signo = signo;
  g_stop.store(true);
}

}  // namespace

StopOnSignal::StopOnSignal() {
  g_stop.store(false);
  g_signo = 0;
  struct sigaction action {};
  action.sa_handler = request_stop;  // NOLINT(*-union-access)
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) {
    sigaction(kStopSignals.at(i), &action, &g_previous.at(i));
  }
}

StopOnSignal::~StopOnSignal() {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) {
    sigaction(kStopSignals.at(i), &g_previous.at(i), nullptr);
  }
  if (g_signo != 0) {
    static_cast<void>(raise(g_signo));
  }
}

const std::atomic<bool> &StopOnSignal::flag() { return g_stop; }

bool StopOnSignal::stop_requested() { return g_stop.load(); }

}  // namespace lbscrypt::cli
