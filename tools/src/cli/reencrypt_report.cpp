// SPDX-License-Identifier: GPL-2.0-only
#include "reencrypt_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>

#include "lbscrypt/reencrypt/core.hpp"
#include "output.hpp"

namespace lbscrypt::cli {

namespace {

constexpr double kReencMebibyte = 1024.0 * 1024.0;

std::string reenc_duration(double seconds) {
  const auto whole = static_cast<std::uint64_t>(std::llround(std::max(seconds, 0.0)));
  if (whole >= 3600) {
    return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
  }
  return fmt::format("{}m{:02}s", whole / 60, whole % 60);
}

void print_summary(std::ostream &out, const ReencryptOutcome &outcome, double seconds, bool as_json,
                   std::uint64_t moved) {
  const ReencryptState &s = outcome.state;
  const bool finished = outcome.report.outcome == EngineOutcome::finished;
  const double rate = seconds > 0 ? static_cast<double>(moved) / seconds : 0;
  if (as_json) {
    nlohmann::json record{{"device", s.device},
                          {"active_name", outcome.active_name.value_or("")},
                          {"finished", finished},
                          {"done_bytes", outcome.report.progress.done_bytes},
                          {"total_bytes", s.data_bytes},
                          {"seconds", seconds},
                          {"bytes_per_second", static_cast<std::uint64_t>(rate)},
                          {"recovered", outcome.report.recovered}};
    if (outcome.tab) {
      record["tab"] = nlohmann::json{{"name", outcome.tab->name},
                                     {"line", outcome.tab->line},
                                     {"rewritten", outcome.tab->rewritten},
                                     {"key_replaced", outcome.tab->key_replaced}};
    }
    write_json(out, record);
    out << '\n';
    return;
  }
  if (!finished) {
    out << fmt::format(
        "stopped at {} of {} bytes of {}{}\n", outcome.report.progress.done_bytes, s.data_bytes,
        s.device,
        outcome.active_name
            ? fmt::format("; {} is resumed with the table of that position", *outcome.active_name)
            : std::string{});
    return;
  }
  out << fmt::format(
      "reencrypted {}: {} bytes in {:.1f} s ({:.1f} MiB/s){}\n", s.device, s.data_bytes, seconds,
      rate / kReencMebibyte,
      outcome.report.recovered ? ", after putting back a hotzone a cut had left" : "");
  if (outcome.active_name) {
    out << fmt::format("{} now has the new parameters, under the same name\n",
                       *outcome.active_name);
  }
  if (outcome.tab) {
    const TabOutcome &tab = *outcome.tab;
    out << fmt::format("lbscrypttab: {} (line {}) {} the new parameters{}\n", tab.name, tab.line,
                       tab.rewritten ? "now has" : "already had",
                       tab.key_file ? fmt::format("; {} holds the new key", tab.key_file->string())
                                    : std::string{});
  }
  out << fmt::format(
      "open it with: lbscrypt open --cipher {} --key-size {} --sector-size {}{}{}{} "
      "{} NAME\n",
      s.new_side.cipher, s.new_side.key_bytes * 8, s.new_side.sector_size,
      s.new_side.iv_large_sectors ? " --iv-large-sectors" : "",
      s.offset != 0 ? fmt::format(" --offset {}", s.offset) : std::string{},
      s.skip != 0 ? fmt::format(" --skip {}", s.skip) : std::string{}, s.device);
}

}  // namespace

ReencryptProgress::ReencryptProgress(std::ostream &out, bool terminal, bool as_json)
    : out_(out), terminal_(terminal), json_(as_json), start_(std::chrono::steady_clock::now()) {}

void ReencryptProgress::operator()(const Progress &p) {
  const double elapsed = seconds();
  const auto moved = static_cast<double>(p.done_bytes - p.start_bytes);
  const double rate = elapsed > 0 ? moved / elapsed : 0;
  const double left = rate > 0 ? static_cast<double>(p.total_bytes - p.done_bytes) / rate : 0;
  if (json_) {
    nlohmann::json record{{"done_bytes", p.done_bytes},
                          {"total_bytes", p.total_bytes},
                          {"bytes_per_second", static_cast<std::uint64_t>(rate)},
                          {"seconds_left", static_cast<std::uint64_t>(left)}};
    write_json(out_, record);
    out_ << '\n' << std::flush;
  } else if (terminal_) {
    const double percent = p.total_bytes == 0 ? 100.0
                                              : 100.0 * static_cast<double>(p.done_bytes) /
                                                    static_cast<double>(p.total_bytes);
    out_ << fmt::format("\rreencrypt: {:.1f} of {:.1f} MiB ({:.1f}%), {:.1f} MiB/s, {} left  ",
                        static_cast<double>(p.done_bytes) / kReencMebibyte,
                        static_cast<double>(p.total_bytes) / kReencMebibyte, percent,
                        rate / kReencMebibyte, reenc_duration(left))
         << std::flush;
    shown_ = true;
  }
}

void ReencryptProgress::end_line() {
  if (shown_) {
    out_ << '\n';
    shown_ = false;
  }
}

double ReencryptProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void print_reencrypt_started(std::ostream &err, const ReencryptArgs &args, const CommonFlags &flags,
                             const ReencryptState &state,
                             const std::optional<std::string> &active_name) {
  if (!flags.quiet && !args.json) {
    print_error(err, fmt::format("reencrypting {}; if it stops, go on with: lbscrypt reencrypt "
                                 "--resume --state {}{} and both keys",
                                 state.device, args.state,
                                 active_name ? fmt::format(" --active-name {} (or, after a "
                                                           "reboot, without it)",
                                                           *active_name)
                                             : std::string{}));
  }
}

void print_reencrypt_outcome(std::ostream &out, std::ostream &err, ReencryptProgress &progress,
                             const Result<ReencryptOutcome> &outcome, const ReencryptArgs &args,
                             const CommonFlags &flags,
                             const std::optional<std::string> &active_name) {
  progress.end_line();
  if (!outcome) {
    print_error(err, outcome.error().message);  // before a signal's raise ends the process
    err.flush();
    return;
  }
  for (const auto &warning : outcome->warnings) {
    if (!flags.quiet) {
      print_error(err, warning);
    }
  }
  const std::uint64_t moved =
      outcome->report.progress.done_bytes - outcome->report.progress.start_bytes;
  print_summary(out, *outcome, progress.seconds(), args.json, moved);
  if (outcome->report.outcome == EngineOutcome::stopped) {
    print_error(err, fmt::format("stopped at a safe point; go on with: lbscrypt reencrypt "
                                 "--resume --state {}{} and both keys",
                                 args.state,
                                 active_name ? fmt::format(" --active-name {}", *active_name)
                                             : std::string{}));
  }
  out.flush();
}

}  // namespace lbscrypt::cli
