// SPDX-License-Identifier: GPL-2.0-only
#include "matrix_cmd.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

#include "lbscrypt/table.hpp"
#include "output.hpp"
#include "stop_signal.hpp"

namespace lbscrypt::cli {

namespace {

using nlohmann::json;

struct System {
  std::string release;
  std::string machine;
};

System uname_system() {
  utsname u{};
  if (uname(&u) != 0) {
    return {"unknown", "unknown"};
  }
  return {static_cast<const char *>(u.release), static_cast<const char *>(u.machine)};
}

// Splits the --sizes lists at commas; a spelling is one table word.
Result<std::vector<std::string>> matrix_sizes(const MatrixArgs &args) {
  std::vector<std::string> sizes;
  if (!args.no_defaults) {
    sizes = default_matrix_sizes();
  }
  for (const auto &list : args.sizes) {
    std::size_t start = 0;
    while (start <= list.size()) {
      const auto comma = std::min(list.find(',', start), list.size());
      const std::string size = list.substr(start, comma - start);
      if (size.empty() || size.find_first_of(" \t\n") != std::string::npos) {
        return make_error(Errc::invalid_argument,
                          fmt::format("--sizes '{}': each spelling is one word, without "
                                      "spaces, separated by commas",
                                      list));
      }
      if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
        sizes.push_back(size);
      }
      start = comma + 1;
    }
  }
  if (sizes.empty()) {
    return make_error(Errc::invalid_argument, "--no-defaults needs --sizes: nothing to try");
  }
  return sizes;
}

json nullable(const std::optional<std::uint32_t> &value) {
  return value ? json(*value) : json(nullptr);
}

std::string number_or_dash(const std::optional<std::uint32_t> &value) {
  return value ? std::to_string(*value) : std::string("-");
}

}  // namespace

CLI::App *add_matrix_command(CLI::App &app, MatrixArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand(
      "matrix", "Load a table per sector_size spelling and report what the kernel did (root)");
  cmd->set_help_flag("--help");
  cmd->add_option("--target", args.targets,
                  "Device-mapper target to try; repeat for several (default: crypt)");
  cmd->add_option("--sizes", args.sizes,
                  "Comma-separated sector_size spellings to try after the matrix's own");
  cmd->add_flag("--no-defaults", args.no_defaults,
                "Try only the spellings given with --sizes, not the matrix's own");
  cmd->add_flag("--json", args.json, "JSON records, one a line");
  add_common_flags(*cmd, flags);
  return cmd;
}

void print_matrix(std::ostream &out, const MatrixReport &report, bool json_output) {
  const System system = uname_system();
  if (json_output) {
    for (const auto &cell : report.cells) {
      const json record{
          {"target", cell.target},
          {"target_version", to_string(cell.version)},
          {"sector_size", cell.sector_size},
          {"outcome", cell.outcome},
          {"recorded", nullable(cell.recorded)},
          {"logical_block_size", nullable(cell.logical_block_size)},
          {"error", cell.error ? json(*cell.error) : json(nullptr)},
          {"predicted_outcome", cell.predicted.outcome},
          {"predicted_recorded", nullable(cell.predicted.recorded)},
          {"agrees", cell.agrees()},
          {"disagreement", cell.agrees() ? json(nullptr) : json(cell.disagreement)},
          {"kernel_release", system.release},
          {"arch", system.machine},
          {"page_size", report.page_size},
          {"backing", report.backing_target},
      };
      write_json(out, record);
      out << '\n';
    }
    return;
  }
  fmt::print(out, "lbscrypt matrix on {} ({}, page size {}), backing device: dm {}\n",
             system.release, system.machine, report.page_size, report.backing_target);
  fmt::print(out, "{:<10} {:<8} {:>11}  {:<8} {:>9} {:>6}  {:<12} {}\n", "target", "version",
             "sector_size", "outcome", "recorded", "lbs", "predicted", "kernel message");
  for (const auto &cell : report.cells) {
    const std::string recorded = number_or_dash(cell.recorded) + (cell.truncated() ? "!" : "");
    const std::string predicted =
        cell.predicted.outcome == "ok" && cell.predicted.recorded &&
                std::to_string(*cell.predicted.recorded) != cell.sector_size
            ? fmt::format("ok {}!", *cell.predicted.recorded)
            : cell.predicted.outcome;
    std::string row = fmt::format(
        "{:<10} {:<8} {:>11}  {:<8} {:>9} {:>6}  {:<12} {}", cell.target, to_string(cell.version),
        cell.sector_size, cell.outcome, recorded, number_or_dash(cell.logical_block_size),
        cell.agrees() ? predicted : predicted + " DIFFERS", cell.error.value_or(""));
    row.erase(row.find_last_not_of(' ') + 1);
    out << row << '\n';
  }
  out << "N! = loaded, but the kernel recorded sector_size N, not the value written; "
         "DIFFERS = not what predict() says\n";
  for (const auto &cell : report.cells) {
    if (!cell.agrees()) {
      fmt::print(out, "DIFFERS {} sector_size:{}: {}\n", cell.target, cell.sector_size,
                 cell.disagreement);
    }
  }
  if (!report.log_readable) {
    out << "(the kernel log could not be read: no kernel messages)\n";
  }
}

int matrix_command(const MatrixArgs &args, const Services &services, std::ostream &out,
                   std::ostream &err) {
  if (!services.is_root) {
    err << "lbscrypt: matrix creates device-mapper devices: run it as root\n";
    return kExitPermission;
  }
  const auto sizes = matrix_sizes(args);
  if (!sizes) {
    print_error(err, sizes.error().message);
    return exit_code(sizes.error().code);
  }
  for (const auto &target : args.targets) {
    if (const auto valid = check_target_name(target); !valid) {
      print_error(err, valid.error().message);
      return exit_code(valid.error().code);
    }
  }
  MatrixOptions options;
  if (!args.targets.empty()) {
    options.targets = args.targets;
  }
  options.sizes = *sizes;
  options.name_prefix = fmt::format("lbscrypt-matrix-{}", getpid());
  options.stop = &StopOnSignal::flag();
  const auto kernel = services.make_kernel();
  const auto observer = services.make_observer();
  Result<MatrixReport> report = make_error(Errc::kernel, "not run");
  {
    const StopOnSignal stop_on_signal;
    report = run_matrix(*kernel, *observer, options);
    if (report) {
      print_matrix(out, *report, args.json);
      out.flush();
    }
  }  // a signal that stopped the run is raised again here, after the cleanup
  if (!report) {
    print_error(err, report.error().message);
    return exit_code(report.error().code);
  }
  if (report->interrupted) {
    err << "lbscrypt: matrix interrupted; its devices are removed\n";
    return kExitInvalid;
  }
  if (const auto differ = report->disagreements(); differ != 0) {
    err << fmt::format("lbscrypt: {} of {} cells differ from what predict() says\n", differ,
                       report->cells.size());
    return kExitInvalid;
  }
  return kExitOk;
}

}  // namespace lbscrypt::cli
