// SPDX-License-Identifier: GPL-2.0-only
// What --resume removes of a killed run (reencrypt/leftovers.hpp): the decision on a listing
// written here, then the same through the fake kernel.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fakes.hpp"
#include "lbscrypt/reencrypt/leftovers.hpp"
#include "temp_dir.hpp"

using lbscrypt::Errc;
using lbscrypt::LeftoverMapping;
using lbscrypt::plan_leftover_removal;
using lbscrypt::remove_run_leftovers;

namespace {

const std::string kRun = "0123456789abcdef0123456789abcdef";
// Another run whose id starts with the same 16 hex digits: its mappings have the same names.
const std::string kTwin = "0123456789abcdeffedcba9876543210";
const std::string kOther = "ffffffffffffffff0000000000000000";

LeftoverMapping mapping(const std::string &name, const std::string &uuid, int open_count = 0,
                        std::vector<std::string> holders = {}) {
  return LeftoverMapping{name, uuid, "dm-7", open_count, std::move(holders)};
}

LeftoverMapping run_side(const std::string &run, const std::string &side, int open_count = 0) {
  return mapping("lbscrypt-reenc-" + run.substr(0, 16) + "-" + side,
                 "LBSCRYPT-REENC-" + run + "-" + side, open_count);
}

}  // namespace

TEST_CASE("reencrypt leftovers: the run's own private mappings are removed, new before old",
          "[reencrypt]") {
  const std::vector<LeftoverMapping> listing{
      run_side(kRun, "old"),
      mapping("vol", "CRYPT-PLAIN-vol"),  // the users' mapping: not the run's
      run_side(kRun, "new"),
      run_side(kOther, "old"),  // another run's: left alone
      mapping("plain-without-uuid", ""),
  };
  auto plan = plan_leftover_removal(kRun, listing);
  REQUIRE(plan);
  CHECK(*plan == std::vector<std::string>{"lbscrypt-reenc-0123456789abcdef-new",
                                          "lbscrypt-reenc-0123456789abcdef-old"});
}

TEST_CASE("reencrypt leftovers: nothing to remove is an empty plan", "[reencrypt]") {
  auto plan = plan_leftover_removal(kRun, {mapping("vol", "CRYPT-PLAIN-vol")});
  REQUIRE(plan);
  CHECK(plan->empty());
}

TEST_CASE("reencrypt leftovers: a mapping of the run that is open is refused, naming its holder",
          "[reencrypt]") {
  SECTION("held by another mapping") {
    auto held = run_side(kRun, "new", 1);
    held.holders = {"device-mapper mapping spy (dm-9)"};
    auto plan = plan_leftover_removal(kRun, {run_side(kRun, "old"), held});
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == Errc::busy);
    CHECK(plan.error().message ==
          "the run's private mapping lbscrypt-reenc-0123456789abcdef-new (dm-7) is open (held by "
          "device-mapper mapping spy (dm-9)): close what has it open, then resume; it is left as "
          "it is");
  }
  SECTION("open by a program") {
    auto plan = plan_leftover_removal(kRun, {run_side(kRun, "old", 2)});
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == Errc::busy);
    CHECK(plan.error().message.find("(open count 2: a program or a mount; fuser -vm /dev/dm-7 "
                                    "names them)") != std::string::npos);
  }
}

TEST_CASE("reencrypt leftovers: a mapping with the run's name and another uuid is not the run's",
          "[reencrypt]") {
  SECTION("a twin run's") {
    auto plan = plan_leftover_removal(kRun, {run_side(kRun, "old"), run_side(kTwin, "new")});
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == Errc::exists);
    CHECK(plan.error().message.starts_with(
        "a device-mapper device named lbscrypt-reenc-0123456789abcdef-new has the run's name but "
        "not its uuid ('LBSCRYPT-REENC-0123456789abcdeffedcba9876543210-new')"));
  }
  SECTION("someone's without a uuid") {
    auto plan = plan_leftover_removal(kRun, {mapping("lbscrypt-reenc-0123456789abcdef-old", "")});
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == Errc::exists);
  }
}

TEST_CASE(
    "reencrypt leftovers: remove_run_leftovers removes the run's mappings from the kernel, and "
    "only those",
    "[reencrypt]") {
  lbscrypt::test::FakeKernel kernel;
  lbscrypt::test::TempDir sysfs;  // no holders anywhere
  const auto make = [&](const LeftoverMapping &m, bool read_only) {
    lbscrypt::CreateRequest request;
    request.name = m.name;
    request.uuid = m.uuid;
    request.length = 8;
    request.params.append("aes-xts-plain64 00 0 7:0 0");
    request.read_only = read_only;
    REQUIRE(kernel.create(request));
  };
  make(run_side(kRun, "old"), true);
  make(run_side(kRun, "new"), false);
  make(mapping("vol", "CRYPT-PLAIN-vol"), false);
  make(run_side(kOther, "new"), false);
  SECTION("closed: removed") {
    auto removed = remove_run_leftovers(kernel, sysfs.path, kRun);
    REQUIRE(removed);
    CHECK(removed->size() == 2);
    CHECK(kernel.mappings.size() == 2);
    CHECK(kernel.mappings.contains("vol"));
    CHECK(kernel.mappings.contains("lbscrypt-reenc-ffffffffffffffff-new"));
  }
  SECTION("one open: nothing removed") {
    kernel.mappings.at("lbscrypt-reenc-0123456789abcdef-old").info.open_count = 1;
    auto removed = remove_run_leftovers(kernel, sysfs.path, kRun);
    REQUIRE_FALSE(removed);
    CHECK(removed.error().code == Errc::busy);
    CHECK(kernel.mappings.size() == 4);
  }
}
