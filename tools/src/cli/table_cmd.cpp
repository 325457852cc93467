// SPDX-License-Identifier: GPL-2.0-only
#include "table_cmd.hpp"

#include <fmt/format.h>

#include <ostream>

#include "output.hpp"

namespace lbscrypt::cli {

CLI::App *add_table_command(CLI::App &app, TableArgs &args, CommonFlags &flags) {
  auto *cmd = app.add_subcommand("table", "Print a crypt table line for dmsetup create");
  cmd->set_help_flag("--help");
  add_mapping_options(*cmd, args.mapping, flags);
  cmd->add_flag("--json", args.json, "JSON output");
  cmd->add_flag("--showkeys", args.show_keys, "Print the key even when stdout is a terminal");
  cmd->add_option("device", args.mapping.mapping.device, "Backing device")->required();
  return cmd;
}

int table_command(const TableArgs &args, const CommonFlags &flags, const Services &services,
                  std::ostream &out, std::ostream &err) {
  announce(err, flags);
  const auto session = make_session(args.mapping.environment, services);
  if (!session) {
    return fail(err, session.error());
  }
  const Environment &env = session->env;
  const std::string &device = args.mapping.mapping.device;
  if (env.devices->is_regular_file(device)) {
    return fail(err, make_error(Errc::device,
                                fmt::format("{} is a regular file; a table needs a block device: "
                                            "attach it with losetup first (lbscrypt open does "
                                            "that itself)",
                                            device)));
  }
  auto table = prepare_table(mapping_request(args.mapping), env);
  if (!table) {
    return fail(err, table.error());
  }
  show_planned(err, flags, *table);
  auto key = ask_key(args.mapping, flags, services, err);
  if (!key) {
    return fail(err, key.error());
  }
  table->key = std::move(key).value();
  auto known = capabilities(env);
  if (!known) {
    KnownCapabilities unknown;  // up to 4096 the table did not need the kernel
    unknown.target_reachable = false;
    unknown.target_loaded = false;
    unknown.caps.page_size = env.assume_page_size    ? *env.assume_page_size
                             : env.kernel != nullptr ? env.kernel->page_size()
                                                     : 0;
    known = unknown;
  }
  // dmsetup's convention: a key does not go to a terminal unless --showkeys asks for it.
  const bool hide = services.stdout_is_terminal && !args.show_keys;
  print_table(out, *table, env.target_type, *known, args.json,
              hide ? KeyDisplay::hide : KeyDisplay::show);
  if (hide && !flags.quiet) {
    err << "lbscrypt: the key is shown as zeros on a terminal; pass --showkeys to print it, "
           "or redirect the output\n";
  }
  return succeed(err, flags);
}

}  // namespace lbscrypt::cli
