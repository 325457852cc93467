// SPDX-License-Identifier: GPL-2.0-only
// Text and JSON renderings of the operations' results.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string_view>

#include "lbscrypt/benchmark.hpp"
#include "lbscrypt/in_tree.hpp"
#include "lbscrypt/operations.hpp"

namespace lbscrypt::cli {

// The table line goes straight from locked memory to the stream (it carries the key).
void print_table(std::ostream &out, const CryptTable &table, std::string_view target_type,
                 const KnownCapabilities &known, bool json, KeyDisplay keys = KeyDisplay::show);
// `check --kernel`: one line (describe()), or JSON with the same facts.
void print_in_tree(std::ostream &out, const InTreeCrypt &in_tree, bool json_output);
void print_check(std::ostream &out, const CheckReport &report, std::string_view target_type,
                 bool json);
// cryptsetup status's lines and field names, then lbscrypt's own (dm device, target).
void print_status(std::ostream &out, const StatusReport &report, std::string_view path,
                  std::string_view target_type, bool json);
void print_opened(std::ostream &out, const OpenResult &opened);
// A table of throughput per unit size and the recommendation; with `json`, a record a line.
void print_benchmark(std::ostream &out, const BenchmarkReport &report, std::string_view target_type,
                     bool json);

// "PROGRAM: MESSAGE" and a newline on `err`, the message's control characters escaped
// (one_line()): every refusal and note is one line, whatever value it quotes.
void print_error(std::ostream &err, std::string_view message,
                 std::string_view program = "lbscrypt");

// Writes `text` as a JSON string literal (quotes included). Text is bytes (paths are):
// well-formed UTF-8 is escaped by nlohmann, and every byte that is not part of it is written
// as \udcXX (XX its value), Python's "surrogateescape": reversible, never an error.
void write_json_string(std::ostream &out, std::string_view text);

// `value` as compact JSON (nlohmann's dump(), key order included), its strings written by
// write_json_string: a string that is not UTF-8 does not throw.
void write_json(std::ostream &out, const nlohmann::json &value);

}  // namespace lbscrypt::cli
