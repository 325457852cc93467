// SPDX-License-Identifier: GPL-2.0-only
#include "benchmark_cmd.hpp"

#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_benchmark_command(CLI::App &app, BenchmarkArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("benchmark", "The kernel's cipher per unit size (AF_ALG)");
  cmd->set_help_flag("--help");
  BenchmarkRequest &r = args.request;
  cmd->add_option("--cipher,-c", r.cipher, "Cipher specification (default aes-xts-plain64)");
  add_number(*cmd, "--key-size,-s", r.key_bits, "Key size in bits (default 256)");
  add_text(*cmd, "--driver", r.driver,
           "Kernel driver to use instead of the cipher's algorithm (e.g. lbs-engine-xts-aes)");
  auto *time =
      cmd->add_option("--time", r.seconds, "Seconds per unit size and direction (default 0.2)")
          ->check(CLI::Range(0.01, 60.0));
  auto *bytes =
      add_number(*cmd, "--bytes", r.bytes, "Bytes per unit size and direction, instead of a time");
  time->excludes(bytes);
  cmd->add_flag("--json", args.json, "JSON records, one a line");
  add_environment_options(*cmd, args.environment);
  add_common_flags(*cmd, flags);
  return cmd;
}

int benchmark_command(const BenchmarkArgs &args, const CommonFlags &flags, const Services &services,
                      std::ostream &out, std::ostream &err) {
  announce(err, flags);
  const auto session = make_session(args.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const auto crypto = services.make_crypto ? services.make_crypto() : nullptr;
  if (!crypto) {
    return fail(err, make_error(Errc::kernel, "no crypto API to measure"));
  }
  const auto report = run_benchmark(args.request, session->env, *crypto);
  if (!report) {
    return fail(err, report.error());
  }
  print_benchmark(out, *report, session->env.target_type, args.json);
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
