// SPDX-License-Identifier: GPL-2.0-only
// What `lbscrypt reencrypt` prints: the progress (a line rewritten in place on a terminal, a
// JSON record a line with --json), the line that says how to go on once the run has started,
// and the outcome (the summary on standard output; warnings, a stop and a refusal on standard
// error).
#pragma once

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>

#include "lbscrypt/reencrypt/run.hpp"
#include "lbscrypt/result.hpp"
#include "options.hpp"
#include "reencrypt_cmd.hpp"

namespace lbscrypt::cli {

// The progress of a run, on `out`: nothing unless it is a terminal or JSON was asked for.
class ReencryptProgress {
 public:
  ReencryptProgress(std::ostream &out, bool terminal, bool as_json);

  void operator()(const Progress &p);
  // Ends the terminal's progress line.
  void end_line();
  // Since the run began (since this was made).
  [[nodiscard]] double seconds() const;

 private:
  std::ostream &out_;
  bool terminal_;
  bool json_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
};

// Once the run has started (unless -q or --json): on `err`, the device and how to go on if it
// stops.
void print_reencrypt_started(std::ostream &err, const ReencryptArgs &args, const CommonFlags &flags,
                             const ReencryptState &state,
                             const std::optional<std::string> &active_name);

// The run's outcome, once it returned: the progress line ended; the warnings (unless -q), the
// summary, and after a stop how to go on; or the refusal. The stream written last is flushed:
// a signal that stopped the run is raised again afterwards.
void print_reencrypt_outcome(std::ostream &out, std::ostream &err, ReencryptProgress &progress,
                             const Result<ReencryptOutcome> &outcome, const ReencryptArgs &args,
                             const CommonFlags &flags,
                             const std::optional<std::string> &active_name);

}  // namespace lbscrypt::cli
