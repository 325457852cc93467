// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "fakes.hpp"
#include "lbscrypt/reencrypt/registry.hpp"
#include "lbscrypt/volume.hpp"
#include "temp_dir.hpp"

using lbscrypt::Errc;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;

namespace {

// /dev/sdb: 4096-byte physical blocks and no atomic writes, so a 65536-byte sector can tear.
struct Rig {
  lbscrypt::test::FakeKernel kernel;
  lbscrypt::test::FakeBlockDevices devices;
  lbscrypt::Environment env;
  lbscrypt::VolumeRequest request;
  lbscrypt::VolumeSteps steps;
  std::vector<std::uint32_t> keys_asked;  // the attempt of each call for the key
  std::vector<std::string> order;         // the steps, as they were taken

  Rig() {
    devices.sizes["/dev/sdb"] = 64ULL * 1024 * 1024;
    lbscrypt::WriteGeometry geometry;
    geometry.physical_block = 4096;
    devices.geometries["/dev/sdb"] = geometry;
    env.kernel = &kernel;
    env.devices = &devices;
    request.name = "vol";
    request.mapping.device = "/dev/sdb";
    request.mapping.sector_size = 65536;
    request.mapping.key_bytes = 32;
    request.key_bytes = 32;
    steps.planned = [this](const lbscrypt::CryptTable & /*table*/) {
      order.emplace_back("planned");
    };
    steps.key = [this](std::uint32_t attempt) -> Result<SecretBuffer> {
      keys_asked.push_back(attempt);
      order.emplace_back("key");
      return SecretBuffer(std::string(32, '\x11').data(), 32);
    };
  }
};

const std::string kTorn =
    "warning: a power failure can tear a 65536-byte sector on /dev/sdb: its physical block is "
    "4096 bytes and it has no atomic writes (dm-crypt-lbs(4), "
    "\"Torn writes\")";

}  // namespace

TEST_CASE("open_volume: the table, then the key, then the mapping with its torn warning",
          "[volume]") {
  Rig rig;
  const auto done = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE(done.ok());
  CHECK_FALSE(done->already_active);
  CHECK(rig.order == std::vector<std::string>{"planned", "key"});
  CHECK(rig.kernel.creates == 1);
  CHECK(done->opened.device.dm_node() == "/dev/dm-0");
  CHECK(done->opened.torn_warning == kTorn);
  CHECK(done->notes.empty());
}

TEST_CASE("open_volume: found active as asked, no key is asked for, the warning is given",
          "[volume]") {
  Rig rig;
  REQUIRE(lbscrypt::open_volume(rig.request, rig.env, rig.steps).ok());
  rig.keys_asked.clear();
  const auto again = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE(again.ok());
  CHECK(again->already_active);
  CHECK(rig.keys_asked.empty());
  CHECK(rig.kernel.creates == 1);
  CHECK(again->opened.torn_warning == kTorn);
  // active with another key size: refused, still without asking
  rig.request.key_bytes = 64;
  const auto other = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == Errc::exists);
  CHECK(rig.keys_asked.empty());
}

TEST_CASE("open_volume: a refused table or a device in use is refused before the key", "[volume]") {
  Rig rig;
  rig.kernel.version = lbscrypt::TargetVersion{1, 28, 0};
  const auto gated = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE_FALSE(gated.ok());
  CHECK(gated.error().code == Errc::refused);
  CHECK(rig.order.empty());  // not even planned
  rig.kernel.version = lbscrypt::TargetVersion{1, 30, 0};
  rig.devices.users["/dev/sdb"] = "device-mapper mapping other (dm-3)";
  const auto busy = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == Errc::busy);
  CHECK(rig.keys_asked.empty());
  rig.request.shared = true;
  CHECK(lbscrypt::open_volume(rig.request, rig.env, rig.steps).ok());
  CHECK(rig.keys_asked == std::vector<std::uint32_t>{1});
}

TEST_CASE("open_volume: a failed check closes the mapping, again() decides another try",
          "[volume]") {
  Rig rig;
  int checks = 0;
  rig.steps.check = [&](const lbscrypt::OpenResult &opened) -> Result<void> {
    ++checks;
    CHECK(rig.kernel.mappings.contains("vol"));
    CHECK(opened.device.dm_node() == "/dev/dm-0");
    if (checks < 3) {
      return lbscrypt::make_error(Errc::key, "vol: no known content.");
    }
    return lbscrypt::Ok{};
  };
  SECTION("no again(): the first failure is the answer") {
    const auto done = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
    REQUIRE_FALSE(done.ok());
    CHECK(done.error().code == Errc::key);
    CHECK(done.error().message == "vol: no known content. The mapping was closed.");
    CHECK(rig.kernel.mappings.empty());
    CHECK(rig.keys_asked == std::vector<std::uint32_t>{1});
  }
  SECTION("again() for two tries: the third opens, each failure a note") {
    rig.steps.again = [](std::uint32_t attempt) { return attempt < 3; };
    const auto done = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
    REQUIRE(done.ok());
    CHECK(rig.keys_asked == std::vector<std::uint32_t>{1, 2, 3});
    CHECK(done->notes == std::vector<std::string>(
                             2, "vol: no known content. The mapping was closed. Asking again."));
    CHECK(rig.kernel.mappings.contains("vol"));
  }
  SECTION("a check failure that is not about the key is never tried again") {
    rig.steps.check = [](const lbscrypt::OpenResult & /*opened*/) -> Result<void> {
      return lbscrypt::make_error(Errc::kernel, "vol: the check could not run.");
    };
    rig.steps.again = [](std::uint32_t /*attempt*/) { return true; };
    const auto done = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
    REQUIRE_FALSE(done.ok());
    CHECK(done.error().code == Errc::kernel);
    CHECK(rig.keys_asked == std::vector<std::uint32_t>{1});
    CHECK(rig.kernel.mappings.empty());
  }
}

TEST_CASE("open_volume: a device being reencrypted is refused before anything, no key asked",
          "[volume][reencrypt]") {
  Rig rig;
  const lbscrypt::test::TempDir dir;
  const auto registry = dir.path / "reencrypt";
  rig.env.reencrypt_registry = registry;
  // a path that is nothing on this machine: the registry matches it by its canonical path
  rig.request.mapping.device = "/nonexistent-lbscrypt/vdz";
  rig.devices.sizes["/nonexistent-lbscrypt/vdz"] = 64ULL * 1024 * 1024;
  REQUIRE(lbscrypt::open_volume(rig.request, rig.env, rig.steps).ok());  // no registry yet
  REQUIRE(lbscrypt::close_mapping("vol", rig.env).ok());
  rig.order.clear();
  rig.keys_asked.clear();
  REQUIRE(lbscrypt::add_entry(
              registry, lbscrypt::RegistryEntry{1, "/nonexistent-lbscrypt/vdz",
                                                "path-/nonexistent-lbscrypt/vdz", "/srv/vdz.state",
                                                "0123456789abcdef0123456789abcdef"})
              .ok());
  const auto refused = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::refused);
  CHECK(refused.error().message ==
        "/nonexistent-lbscrypt/vdz is being reencrypted (state /srv/vdz.state): finish with "
        "'lbscrypt reencrypt --resume --state /srv/vdz.state ...' before opening it");
  CHECK(rig.order.empty());  // neither planned nor asked for a key
  CHECK(rig.kernel.creates == 1);
  // another device opens as before
  rig.request.mapping.device = "/dev/sdb";
  CHECK(lbscrypt::open_volume(rig.request, rig.env, rig.steps).ok());
  CHECK(rig.keys_asked == std::vector<std::uint32_t>{1});
  REQUIRE(lbscrypt::close_mapping("vol", rig.env).ok());
  // a damaged entry: every open is refused, naming it
  { std::ofstream(registry / "wwid-torn.json") << "{"; }
  rig.keys_asked.clear();
  const auto damaged = lbscrypt::open_volume(rig.request, rig.env, rig.steps);
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(damaged.error().message,
             Catch::StartsWith((registry / "wwid-torn.json").string() + ": not JSON"));
  CHECK(rig.keys_asked.empty());
  // no registry consulted at all
  rig.env.reencrypt_registry.reset();
  CHECK(lbscrypt::open_volume(rig.request, rig.env, rig.steps).ok());
}
