// SPDX-License-Identifier: GPL-2.0-only
// The reencrypt journal: its size and layout, the two slots through flipped bytes, torn writes
// and another run's records, the data area and its wipe. The file's bytes are read and
// written directly here, beside the JournalStore, as a power cut or another disk would.
//
// Not tested: a full state filesystem (ENOSPC) needs a small filesystem of its own (a loop
// mount or a tmpfs with size=, both root only); the guest tests fill one.
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "file_bytes.hpp"
#include "lbscrypt/reencrypt/core.hpp"
#include "temp_dir.hpp"

using lbscrypt::CompletedRecord;
using lbscrypt::Errc;
using lbscrypt::JournaledRecord;
using lbscrypt::JournalStore;
using lbscrypt::test::file_bytes;
using lbscrypt::test::file_range;
using lbscrypt::test::put_bytes;
using lbscrypt::test::TempDir;

namespace {

constexpr const char *kRunId = "00112233445566778899aabbccddeeff";
constexpr const char *kOtherRunId = "ffeeddccbbaa99887766554433221100";
constexpr std::uint64_t kHotzone = 65536;

using Bytes = std::vector<std::uint8_t>;

// Lower-case hex of bytes [from, to) of `bytes`.
std::string hex_of(const Bytes &bytes, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) {
    const std::uint8_t b = bytes[i];
    constexpr std::string_view kDigits = "0123456789abcdef";
    out += kDigits[b >> 4U];
    out += kDigits[b & 0xfU];
  }
  return out;
}

// The run's key from two 64-byte volume keys of one byte each.
lbscrypt::RunAuth auth_of(const char *run_id = kRunId, std::uint8_t old_byte = 0x11,
                          std::uint8_t new_byte = 0x77) {
  const Bytes old_key(64, old_byte);
  const Bytes new_key(64, new_byte);
  auto auth = lbscrypt::RunAuth::derive({old_key.data(), old_key.size()},
                                        {new_key.data(), new_key.size()}, run_id);
  REQUIRE(auth.ok());
  return std::move(auth).value();
}

std::unique_ptr<JournalStore> make_journal(const std::filesystem::path &path,
                                           const char *run_id = kRunId) {
  auto journal = lbscrypt::open_journal(path, run_id, kHotzone, true, auth_of(run_id));
  REQUIRE(journal.ok());
  return std::move(journal).value();
}

std::unique_ptr<JournalStore> reopen(const std::filesystem::path &path,
                                     const char *run_id = kRunId) {
  auto journal = lbscrypt::open_journal(path, run_id, kHotzone, false, auth_of(run_id));
  REQUIRE(journal.ok());
  return std::move(journal).value();
}

lbscrypt::RunMac mac_filled(std::uint8_t first) {
  lbscrypt::RunMac mac{};
  for (std::size_t i = 0; i < mac.size(); ++i) {
    mac.at(i) = static_cast<std::uint8_t>(first + i);
  }
  return mac;
}

lbscrypt::JournalSlots slots_of(JournalStore &journal) {
  auto slots = journal.read_slots();
  REQUIRE(slots.ok());
  return *slots;
}

// Fields whose every byte differs, so a swapped or misplaced byte shows.
JournaledRecord distinct_journaled() {
  JournaledRecord r;
  r.sequence = 0x0102030405060708ULL;
  r.position = 0x1112131415161718ULL;
  r.length = 0x2122232425262728ULL;
  r.data_mac = mac_filled(0xa0);
  r.next_mac = mac_filled(0xc0);
  r.samples = {mac_filled(0x00), mac_filled(0x40)};
  return r;
}

JournaledRecord journaled(std::uint64_t sequence) {
  JournaledRecord r;
  r.sequence = sequence;
  r.position = sequence * kHotzone;
  r.length = kHotzone;
  r.data_mac.fill(static_cast<std::uint8_t>(sequence));
  r.next_mac.fill(static_cast<std::uint8_t>(sequence + 0x80));
  r.samples = {mac_filled(static_cast<std::uint8_t>(sequence))};
  return r;
}

CompletedRecord completed(std::uint64_t sequence) {
  lbscrypt::RunMac next{};
  next.fill(static_cast<std::uint8_t>(sequence + 0x40));
  return {sequence, (sequence + 1) * kHotzone, next, sequence % 2 == 1};
}

}  // namespace

TEST_CASE("reencrypt journal: created full size, zeros, mode 0600, no slot", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "vdb.state.journal";
  const mode_t saved = umask(0277);
  auto journal = make_journal(path);
  umask(saved);
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(static_cast<std::uint64_t>(st.st_size) == 8192 + kHotzone);
  // Written, not sparse: every block allocated (st_blocks counts 512-byte units).
  CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 >= 8192 + kHotzone);
  const Bytes all = file_bytes(path);
  CHECK(std::all_of(all.begin(), all.end(), [](std::uint8_t b) { return b == 0; }));
  const auto slots = slots_of(*journal);
  CHECK_FALSE(slots.journaled.has_value());
  CHECK_FALSE(slots.completed.has_value());
  CHECK(slots.completed_blank);

  // A journal is created once.
  const auto again = lbscrypt::open_journal(path, kRunId, kHotzone, true, auth_of());
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::exists);
}

TEST_CASE("reencrypt journal: a slot's bytes are the documented layout", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "j";
  auto journal = make_journal(path);
  REQUIRE(journal->write_journaled(distinct_journaled()).ok());
  REQUIRE(
      journal
          ->write_completed({0x0102030405060708ULL, 0x1112131415161718ULL, mac_filled(0x30), true})
          .ok());
  const Bytes slot0 = file_range(path, 0, 4096);
  const Bytes slot1 = file_range(path, 4096, 4096);
  CHECK(std::string(slot0.begin(), slot0.begin() + 8) == "LBSRJNL2");
  CHECK(hex_of(slot0, 8, 16) == "0100000000000000");
  CHECK(hex_of(slot1, 8, 16) == "0200000001000000");  // kind 2, flag: users live
  CHECK(hex_of(slot0, 16, 32) == kRunId);
  CHECK(hex_of(slot0, 32, 56) ==
        "0807060504030201"
        "1817161514131211"
        "2827262524232221");
  CHECK(hex_of(slot0, 56, 88) ==
        "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf");
  CHECK(hex_of(slot0, 88, 120) ==
        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf");
  CHECK(hex_of(slot0, 120, 128) == "0200000000000000");
  CHECK(hex_of(slot0, 128, 192) ==
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f");
  CHECK(std::all_of(slot0.begin() + 192, slot0.begin() + 4032, [](auto b) { return b == 0; }));
  CHECK(hex_of(slot1, 56, 88) == std::string(64, '0'));
  CHECK(hex_of(slot1, 88, 120) ==
        "303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f");
  CHECK(std::all_of(slot1.begin() + 120, slot1.begin() + 4032, [](auto b) { return b == 0; }));
  // The MAC of bytes [0, 4032) and the SHA-256 of [0, 4064), computed apart (Python hmac and
  // hashlib, the run key by RFC 5869 from keys 64 x 0x11 and 64 x 0x77) from the layout above.
  CHECK(hex_of(slot0, 4032, 4064) ==
        "907397190f8714eae2acf98c9203526ce732d29519023679876c181355a6cfa7");
  CHECK(hex_of(slot0, 4064, 4096) ==
        "dbe526ea7043d065cfa7c2a07f4cf93cdaccf307eec5bd1a664e387950bb2b59");
  CHECK(hex_of(slot1, 4032, 4064) ==
        "b2cc81d809a1f03728348f72cd5b0ba8196d2dd72a0f40aa14caf79e60a1e992");
  CHECK(hex_of(slot1, 4064, 4096) ==
        "d49a851f692ea05686d5eb8727aff3ead51dd802f156ccb589b7a5940c183c49");
}

TEST_CASE("reencrypt journal: slots round trip, also after reopening", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "j";
  {
    auto journal = make_journal(path);
    REQUIRE(journal->write_journaled(journaled(4)).ok());
    auto slots = slots_of(*journal);
    CHECK(slots.journaled == journaled(4));
    CHECK_FALSE(slots.completed.has_value());
    CHECK(slots.completed_blank);
    REQUIRE(journal->write_completed(completed(4)).ok());
    REQUIRE(journal->write_journaled(journaled(5)).ok());
  }
  auto journal = reopen(path);
  const auto slots = slots_of(*journal);
  CHECK(slots.journaled == journaled(5));
  CHECK(slots.completed == completed(4));
  CHECK_FALSE(slots.completed_blank);
}

TEST_CASE("reencrypt journal: one flipped byte anywhere makes a slot absent", "[reencrypt]") {
  for (const std::size_t at :
       {0U, 7U, 8U, 12U, 16U, 31U, 32U, 47U, 55U, 56U, 87U, 88U, 2048U, 4063U, 4064U, 4095U}) {
    INFO("byte " << at);
    const TempDir dir;
    const auto path = dir.path / "j";
    auto journal = make_journal(path);
    REQUIRE(journal->write_journaled(journaled(1)).ok());
    REQUIRE(journal->write_completed(completed(0)).ok());
    Bytes slot0 = file_range(path, 0, 4096);
    slot0[at] = static_cast<std::uint8_t>(slot0[at] ^ 0x01U);
    put_bytes(path, 0, slot0);
    auto slots = slots_of(*journal);
    CHECK_FALSE(slots.journaled.has_value());
    CHECK(slots.completed == completed(0));

    Bytes slot1 = file_range(path, 4096, 4096);
    slot1[at] = static_cast<std::uint8_t>(slot1[at] ^ 0x80U);
    put_bytes(path, 4096, slot1);
    slots = slots_of(*journal);
    CHECK_FALSE(slots.completed.has_value());
    CHECK_FALSE(slots.completed_blank);
  }
}

TEST_CASE("reencrypt journal: a torn slot is absent, the other survives", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "j";
  auto journal = make_journal(path);
  REQUIRE(journal->write_journaled(journaled(6)).ok());
  REQUIRE(journal->write_completed(completed(6)).ok());
  const Bytes old_slot0 = file_range(path, 0, 4096);
  const Bytes old_slot1 = file_range(path, 4096, 4096);
  REQUIRE(journal->write_journaled(journaled(7)).ok());
  REQUIRE(journal->write_completed(completed(7)).ok());
  const Bytes new_slot0 = file_range(path, 0, 4096);
  const Bytes new_slot1 = file_range(path, 4096, 4096);

  // A tear at each 512-byte sector boundary, both ways round.
  for (std::size_t cut = 512; cut < 4096; cut += 512) {
    INFO("cut at " << cut);
    Bytes new_head(new_slot0.begin(), new_slot0.begin() + static_cast<std::ptrdiff_t>(cut));
    new_head.insert(new_head.end(), old_slot0.begin() + static_cast<std::ptrdiff_t>(cut),
                    old_slot0.end());
    put_bytes(path, 0, new_head);
    put_bytes(path, 4096, new_slot1);
    auto slots = slots_of(*journal);
    CHECK_FALSE(slots.journaled.has_value());
    CHECK(slots.completed == completed(7));

    Bytes old_head(old_slot0.begin(), old_slot0.begin() + static_cast<std::ptrdiff_t>(cut));
    old_head.insert(old_head.end(), new_slot0.begin() + static_cast<std::ptrdiff_t>(cut),
                    new_slot0.end());
    put_bytes(path, 0, old_head);
    slots = slots_of(*journal);
    CHECK_FALSE(slots.journaled.has_value());
    CHECK(slots.completed == completed(7));

    // Slot 1 torn the same way: absent, and not blank; the journaled record survives.
    Bytes torn1(new_slot1.begin(), new_slot1.begin() + static_cast<std::ptrdiff_t>(cut));
    torn1.insert(torn1.end(), old_slot1.begin() + static_cast<std::ptrdiff_t>(cut),
                 old_slot1.end());
    put_bytes(path, 0, new_slot0);
    put_bytes(path, 4096, torn1);
    slots = slots_of(*journal);
    CHECK(slots.journaled == journaled(7));
    CHECK_FALSE(slots.completed.has_value());
    CHECK_FALSE(slots.completed_blank);
  }

  // The first completed write torn over a blank slot 1: not blank, not verifying.
  const auto fresh_path = dir.path / "fresh";
  auto fresh = make_journal(fresh_path);
  REQUIRE(fresh->write_journaled(journaled(0)).ok());
  Bytes half(new_slot1.begin(), new_slot1.begin() + 2048);
  half.resize(4096, 0);
  put_bytes(fresh_path, 4096, half);
  const auto slots = slots_of(*fresh);
  CHECK(slots.journaled == journaled(0));
  CHECK_FALSE(slots.completed.has_value());
  CHECK_FALSE(slots.completed_blank);
}

TEST_CASE("reencrypt journal: another run's slot is absent, another kind's refused",
          "[reencrypt]") {
  const TempDir dir;
  const auto ours = dir.path / "ours";
  const auto theirs = dir.path / "theirs";
  auto journal = make_journal(ours);
  auto other = make_journal(theirs, kOtherRunId);
  REQUIRE(other->write_journaled(journaled(2)).ok());
  REQUIRE(other->write_completed(completed(2)).ok());
  // Their two slots copied into our file: well-formed, checksums right, the run id not ours.
  put_bytes(ours, 0, file_range(theirs, 0, 8192));
  auto slots = slots_of(*journal);
  CHECK_FALSE(slots.journaled.has_value());
  CHECK_FALSE(slots.completed.has_value());
  CHECK_FALSE(slots.completed_blank);
  // Opened as ours, their journal is refused, naming both runs.
  const auto refused = lbscrypt::open_journal(theirs, kRunId, kHotzone, false, auth_of());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK(refused.error().message == theirs.string() + " is the journal of run " + kOtherRunId +
                                       ", not of this state's run " + kRunId +
                                       ": give the state file that goes with it");

  // Our journaled slot copied into slot 1: a verifying block of the wrong kind, refused.
  REQUIRE(journal->write_journaled(journaled(3)).ok());
  put_bytes(ours, 4096, file_range(ours, 0, 4096));
  const auto wrong_kind = journal->read_slots();
  REQUIRE_FALSE(wrong_kind.ok());
  CHECK_THAT(wrong_kind.error().message, Catch::Contains("its completed slot does not verify"));
  // And our completed slot copied into slot 0.
  REQUIRE(journal->write_completed(completed(3)).ok());
  put_bytes(ours, 0, file_range(ours, 4096, 4096));
  const auto wrong_kind0 = journal->read_slots();
  REQUIRE_FALSE(wrong_kind0.ok());
  CHECK_THAT(wrong_kind0.error().message, Catch::Contains("its journaled slot does not verify"));
}

TEST_CASE("reencrypt journal: a forged, edited or foreign slot is refused", "[reencrypt]") {
  const TempDir dir;
  const auto ours = dir.path / "ours";
  auto journal = make_journal(ours);
  REQUIRE(journal->write_journaled(journaled(2)).ok());
  REQUIRE(journal->write_completed(completed(1)).ok());
  const Bytes good = file_range(ours, 0, 8192);
  const auto refused = [&](const std::string &slot_name) {
    const auto slots = journal->read_slots();
    REQUIRE_FALSE(slots.ok());
    CHECK(slots.error().code == Errc::invalid_argument);
    CHECK(slots.error().message ==
          ours.string() + ": its " + slot_name +
              " slot does not verify with both keys of this run (it was forged or edited, or "
              "copied from another run): nothing was written; give the journal this run wrote, "
              "unchanged");
  };

  SECTION("a field edited, the unkeyed checksum made right again") {
    for (const std::size_t at : {32U, 40U, 48U, 56U, 88U, 120U, 128U, 2000U, 4032U}) {
      INFO("byte " << at);
      Bytes slot0(good.begin(), good.begin() + 4096);
      slot0[at] = static_cast<std::uint8_t>(slot0[at] ^ 0x04U);
      lbscrypt::test::reseal_slot_checksum(slot0);
      put_bytes(ours, 0, slot0);
      refused("journaled");
    }
    put_bytes(ours, 0, good);
    Bytes slot1(good.begin() + 4096, good.end());
    slot1[40] = static_cast<std::uint8_t>(slot1[40] + 1);  // the completed position
    lbscrypt::test::reseal_slot_checksum(slot1);
    put_bytes(ours, 4096, slot1);
    refused("completed");
  }
  SECTION("a slot written by another run, its run id rewritten to ours") {
    const auto theirs = dir.path / "theirs";
    auto other = make_journal(theirs, kOtherRunId);
    REQUIRE(other->write_journaled(journaled(2)).ok());
    Bytes slot0 = file_range(theirs, 0, 4096);
    const Bytes id = file_range(ours, 16, 16);
    std::copy(id.begin(), id.end(), slot0.begin() + 16);
    lbscrypt::test::reseal_slot_checksum(slot0);
    put_bytes(ours, 0, slot0);
    refused("journaled");
  }
  SECTION("a slot of this run id made with other keys") {
    const auto forged = dir.path / "forged";
    auto other =
        lbscrypt::open_journal(forged, kRunId, kHotzone, true, auth_of(kRunId, 0x11, 0x78));
    REQUIRE(other.ok());
    REQUIRE((*other)->write_completed(completed(5)).ok());
    put_bytes(ours, 4096, file_range(forged, 4096, 4096));
    refused("completed");
  }
}

TEST_CASE("reencrypt journal: the run key and its MACs are HKDF and HMAC-SHA256", "[reencrypt]") {
  // RFC 5869, test case 1.
  Bytes ikm(22, 0x0b);
  Bytes salt(13);
  Bytes info(10);
  for (std::size_t i = 0; i < salt.size(); ++i) {
    salt[i] = static_cast<std::uint8_t>(i);
  }
  for (std::size_t i = 0; i < info.size(); ++i) {
    info[i] = static_cast<std::uint8_t>(0xf0 + i);
  }
  const auto okm = lbscrypt::hkdf_sha256(ikm, salt, info, 42);
  REQUIRE(okm.ok());
  const Bytes out(okm->data(), okm->data() + okm->size());
  CHECK(hex_of(out, 0, out.size()) ==
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
  // A unit's MAC under the run key of keys 64 x 0x11 and 64 x 0x77 (Python hmac, computed
  // apart): HMAC-SHA256 of "unit plaintext", a zero byte, 4096 as 8 bytes, 4096 zero bytes.
  const auto mac = auth_of().mac("unit plaintext", 4096, Bytes(4096, 0));
  REQUIRE(mac.ok());
  CHECK(hex_of(Bytes(mac->begin(), mac->end()), 0, 32) ==
        "840df88715500830dfe770cbd3bbe54fe4fa38ca63dfcb243990d388c61389e8");
  // Another run id, or either key changed, gives another key.
  const auto other_run = auth_of(kOtherRunId).mac("unit plaintext", 4096, Bytes(4096, 0));
  const auto other_old = auth_of(kRunId, 0x12, 0x77).mac("unit plaintext", 4096, Bytes(4096, 0));
  const auto other_new = auth_of(kRunId, 0x11, 0x78).mac("unit plaintext", 4096, Bytes(4096, 0));
  REQUIRE((other_run.ok() && other_old.ok() && other_new.ok()));
  CHECK(*other_run != *mac);
  CHECK(*other_old != *mac);
  CHECK(*other_new != *mac);
}

TEST_CASE("reencrypt journal: open refuses a wrong size, a missing file, bad input",
          "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "j";
  { auto journal = make_journal(path); }
  for (const std::uint64_t size :
       {8192 + kHotzone - 512, 8192 + kHotzone + 512, std::uint64_t{0}}) {
    INFO(size);
    std::filesystem::resize_file(path, size);
    const auto refused = lbscrypt::open_journal(path, kRunId, kHotzone, false, auth_of());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::invalid_argument);
    CHECK_THAT(refused.error().message,
               Catch::StartsWith(path.string() + " is " + std::to_string(size) +
                                 " bytes, not the 73728 (8192 + the hotzone's 65536)"));
  }
  std::filesystem::resize_file(path, 8192 + kHotzone);
  CHECK(lbscrypt::open_journal(path, kRunId, kHotzone, false, auth_of()).ok());
  // The same file for a run with a larger hotzone.
  CHECK_FALSE(lbscrypt::open_journal(path, kRunId, 2 * kHotzone, false, auth_of()).ok());

  const auto missing =
      lbscrypt::open_journal(dir.path / "none", kRunId, kHotzone, false, auth_of());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::not_found);

  const auto link = dir.path / "link";
  std::filesystem::create_symlink(path, link);
  for (const bool create : {false, true}) {
    const auto refused = lbscrypt::open_journal(link, kRunId, kHotzone, create, auth_of());
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.error().message, Catch::StartsWith(link.string() + " is a symbolic link"));
  }
  const auto fifo = dir.path / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const auto fifo_refused = lbscrypt::open_journal(fifo, kRunId, kHotzone, false, auth_of());
  REQUIRE_FALSE(fifo_refused.ok());
  CHECK_THAT(fifo_refused.error().message, Catch::StartsWith(fifo.string() + " is a FIFO"));

  const auto bad_id =
      lbscrypt::open_journal(dir.path / "x", "0011223344556677", kHotzone, true, auth_of());
  REQUIRE_FALSE(bad_id.ok());
  CHECK(bad_id.error().code == Errc::invalid_argument);
  const auto upper_id = lbscrypt::open_journal(dir.path / "x", "00112233445566778899AABBCCDDEEFF",
                                               kHotzone, true, auth_of());
  REQUIRE_FALSE(upper_id.ok());
  const auto no_hotzone = lbscrypt::open_journal(dir.path / "x", kRunId, 0, true, auth_of());
  REQUIRE_FALSE(no_hotzone.ok());
  CHECK(no_hotzone.error().code == Errc::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(dir.path / "x"));
}

TEST_CASE("reencrypt journal: the data area holds the hotzone, and is wiped", "[reencrypt]") {
  const TempDir dir;
  const auto path = dir.path / "j";
  auto journal = make_journal(path);
  Bytes data(kHotzone);
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<std::uint8_t>((i * 7 + 3) & 0xffU);
  }
  REQUIRE(journal->write_journaled(journaled(9)).ok());
  REQUIRE(journal->write_completed(completed(8)).ok());
  REQUIRE(journal->write_data(data).ok());
  CHECK(file_range(path, 8192, kHotzone) == data);  // at 8192, as written
  Bytes back(kHotzone);
  REQUIRE(journal->read_data(back).ok());
  CHECK(back == data);
  // A shorter hotzone (the last one) reads back its own length.
  const Bytes tail(data.begin(), data.begin() + 4096);
  Bytes tail_back(4096);
  REQUIRE(journal->read_data(tail_back).ok());
  CHECK(tail_back == tail);
  // More than the data area holds.
  Bytes too_big(kHotzone + 512);
  const auto write_refused = journal->write_data(too_big);
  REQUIRE_FALSE(write_refused.ok());
  CHECK(write_refused.error().code == Errc::invalid_argument);
  const auto read_refused = journal->read_data(too_big);
  REQUIRE_FALSE(read_refused.ok());
  CHECK(read_refused.error().code == Errc::invalid_argument);

  const Bytes slots_before = file_range(path, 0, 8192);
  REQUIRE(journal->wipe_data().ok());
  const Bytes area = file_range(path, 8192, kHotzone);
  CHECK(std::all_of(area.begin(), area.end(), [](std::uint8_t b) { return b == 0; }));
  CHECK(file_bytes(path).size() == 8192 + kHotzone);
  CHECK(file_range(path, 0, 8192) == slots_before);  // the slots untouched
  const auto slots = slots_of(*journal);
  CHECK(slots.journaled == journaled(9));
  CHECK(slots.completed == completed(8));
}
