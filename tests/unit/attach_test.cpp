// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "fakes.hpp"
#include "lbscrypt/attach.hpp"

using lbscrypt::AttachRequest;
using lbscrypt::Errc;
using lbscrypt::PassphraseQuestion;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;

namespace {

const std::string kKeyFile = std::string(LBSCRYPT_TEST_DATA) + "/keyfile-64.bin";
// sha256("correct horse") and sha256("wrong"): the passphrase hashed as a typed line.
const std::string kCorrectKey = "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631";
const std::string kWrongKey = "8810ad581e59f2bc3928b261707a71308f7e139eb04820366dc4d5c18d980225";

struct Rig {
  lbscrypt::test::FakeKernel kernel;
  lbscrypt::test::FakeBlockDevices devices;
  lbscrypt::Environment env;
  lbscrypt::AttachServices services;
  std::vector<std::string> answers;  // what the passphrase agent answers, in turn
  std::vector<PassphraseQuestion> questions;
  std::vector<std::vector<std::string>> runs;
  std::vector<int> check_status;  // exit status of each check run, in turn
  std::set<std::string> existing;
  std::optional<unsigned> mode;

  Rig() {
    devices.sizes["/dev/vdb"] = 64ULL * 1024 * 1024;
    env.kernel = &kernel;
    env.devices = &devices;
    services.ask_passphrase = [this](const PassphraseQuestion &q) -> Result<SecretBuffer> {
      questions.push_back(q);
      if (questions.size() > answers.size()) {
        return lbscrypt::make_error(Errc::key, "no passphrase");
      }
      const std::string &answer = answers[questions.size() - 1];
      return SecretBuffer(answer.data(), answer.size());
    };
    services.run = [this](const std::vector<std::string> &argv) -> Result<int> {
      runs.push_back(argv);
      return runs.size() <= check_status.size() ? check_status[runs.size() - 1] : 0;
    };
    services.exists = [this](const std::string &path) { return existing.contains(path); };
    services.key_file_mode = [this](const std::string &) { return mode; };
  }

  Result<lbscrypt::AttachOutcome> attach(const std::string &key, const std::string &options) const {
    return lbscrypt::attach_volume(AttachRequest{"vol", "/dev/vdb", key, options}, env, services);
  }

  [[nodiscard]] std::string params() const {
    return std::string(kernel.mappings.at("vol").line.params.view());
  }
};

}  // namespace

TEST_CASE("attach: a key file volume at sector size 65536", "[attach]") {
  Rig rig;
  rig.mode = 0100600;
  const auto done =
      rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=512,sector-size=65536,discard");
  REQUIRE(done.ok());
  CHECK_FALSE(done->already_active);
  CHECK(done->notes.empty());
  CHECK(rig.params() ==
        "aes-xts-plain64 "
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
        " 0 /dev/vdb 0 2 allow_discards sector_size:65536");
  CHECK(rig.kernel.mappings.at("vol").info.uuid == "CRYPT-PLAIN-vol");
  CHECK(rig.questions.empty());
}

TEST_CASE("attach: a key file open to others draws a warning and still opens", "[attach]") {
  Rig rig;
  rig.mode = 0100644;
  const auto done = rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256");
  REQUIRE(done.ok());
  REQUIRE(done->notes.size() == 1);
  CHECK(done->notes.front() ==
        "warning: key file " + kKeyFile + " is open to group or others (mode 0644): chmod 0400 it");
}

TEST_CASE("attach: already active as the line says: success without a key", "[attach]") {
  Rig rig;
  REQUIRE(rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256,sector-size=4096").ok());
  const int creates = rig.kernel.creates;
  // The key file is not read again (it need not even exist), and no passphrase is asked.
  const auto again =
      rig.attach("/nonexistent/key", "cipher=aes-xts-plain64,size=256,sector-size=4096");
  REQUIRE(again.ok());
  CHECK(again->already_active);
  CHECK(rig.kernel.creates == creates);
  const auto pass =
      rig.attach("none", "cipher=aes-xts-plain64,size=256,hash=sha256,sector-size=4096");
  REQUIRE(pass.ok());
  CHECK(rig.questions.empty());
  // Another table under that name: refused in one line, the mapping left alone.
  const auto other = rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256,sector-size=512");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == Errc::exists);
  CHECK(other.error().message ==
        "Device vol is already active with another table (sector size 4096, not 512): close it "
        "first, or give another name");
  CHECK(rig.kernel.mappings.size() == 1);
}

TEST_CASE("attach: a passphrase from the agent is hashed as a typed line", "[attach]") {
  Rig rig;
  rig.answers = {"correct horse"};
  const auto done =
      rig.attach("none", "cipher=aes-xts-plain64,size=256,hash=sha256,timeout=45,tries=5");
  REQUIRE(done.ok());
  REQUIRE(rig.questions.size() == 1);
  CHECK(rig.questions.front().name == "vol");
  CHECK(rig.questions.front().device == "/dev/vdb");
  CHECK(rig.questions.front().timeout_us == 45000000U);
  // No check=: plain mode would open the volume with another volume's passphrase, silently.
  CHECK_FALSE(rig.questions.front().accept_cached);
  CHECK(rig.questions.front().keep);
  CHECK(rig.params() == "aes-xts-plain64 " + kCorrectKey + " 0 /dev/vdb 0");
  CHECK(rig.runs.empty());  // no check= given
}

TEST_CASE("attach: check= closes a wrong passphrase's mapping and asks again, tries= times",
          "[attach]") {
  Rig rig;
  rig.answers = {"wrong", "correct horse"};
  rig.check_status = {1, 0};
  const auto done = rig.attach("-", "cipher=aes-xts-plain64,size=256,hash=sha256,check,tries=2");
  REQUIRE(done.ok());
  REQUIRE(rig.questions.size() == 2);
  CHECK(rig.questions[0].accept_cached);  // check= tells a wrong kept passphrase
  CHECK_FALSE(rig.questions[1].accept_cached);
  REQUIRE(rig.runs.size() == 2);
  // Debian's blkid check is not installed here: blkid itself probes the mapping.
  CHECK(rig.runs[0] == std::vector<std::string>{"blkid", "-p", "/dev/dm-0"});
  REQUIRE(done->notes.size() == 1);
  CHECK_THAT(done->notes.front(),
             Catch::Contains("a wrong key or passphrase?") && Catch::EndsWith("Asking again."));
  CHECK(rig.params() == "aes-xts-plain64 " + kCorrectKey + " 0 /dev/vdb 0");

  Rig out_of_tries;
  out_of_tries.answers = {"wrong", "wrong"};
  out_of_tries.check_status = {1, 2};
  const auto failed =
      out_of_tries.attach("none", "cipher=aes-xts-plain64,size=256,hash=sha256,check,tries=2");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == Errc::key);
  CHECK(failed.error().message ==
        "vol: check blkid found no known content on /dev/dm-0 (exit status 2): a wrong key or "
        "passphrase? The mapping was closed.");
  CHECK(out_of_tries.kernel.mappings.empty());
  CHECK(out_of_tries.questions.size() == 2);
}

TEST_CASE("attach: a key file with check= fails at once: another try reads the same file",
          "[attach]") {
  Rig rig;
  rig.check_status = {1};
  const auto failed =
      rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256,check=/sbin/mine,checkargs=ext4");
  REQUIRE_FALSE(failed.ok());
  REQUIRE(rig.runs.size() == 1);
  CHECK(rig.runs[0] == std::vector<std::string>{"/sbin/mine", "/dev/dm-0", "ext4"});
  CHECK(rig.kernel.mappings.empty());
}

TEST_CASE("attach: Debian's check programs by name", "[attach]") {
  Rig rig;
  rig.existing = {"/lib/cryptsetup/checks/blkid"};
  auto v = lbscrypt::parse_volume_options("cipher=aes-xts-plain64,size=256,check", false);
  REQUIRE(v.ok());
  CHECK(lbscrypt::check_command(*v, "/dev/dm-3", rig.services) ==
        std::vector<std::string>{"/lib/cryptsetup/checks/blkid", "/dev/dm-3"});
  v = lbscrypt::parse_volume_options("cipher=aes-xts-plain64,size=256,check=ext2", false);
  REQUIRE(v.ok());
  CHECK(lbscrypt::check_command(*v, "/dev/dm-3", rig.services) ==
        std::vector<std::string>{"/lib/cryptsetup/checks/ext2", "/dev/dm-3"});
}

TEST_CASE("attach: bad input is refused before any key, prompt or device", "[attach]") {
  Rig rig;
  rig.answers = {"correct horse"};
  const auto no_hash = rig.attach("none", "cipher=aes-xts-plain64,size=256");
  REQUIRE_FALSE(no_hash.ok());
  CHECK_THAT(no_hash.error().message, Catch::Contains("no hash="));
  const auto bad_hash = rig.attach("none", "cipher=aes-xts-plain64,size=256,hash=nosuchhash");
  REQUIRE_FALSE(bad_hash.ok());
  const auto too_big = rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256,sector-size=65536");
  rig.kernel.page = 4096;
  const auto page = rig.attach(kKeyFile, "cipher=aes-xts-plain64,size=256,sector-size=65536");
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().code == Errc::refused);
  CHECK(lbscrypt::attach_volume(
            AttachRequest{"a/b", "/dev/vdb", kKeyFile, "cipher=aes-xts-plain64,size=256"}, rig.env,
            rig.services)
            .error()
            .message.starts_with("'a/b' is not a mapping name"));
  CHECK(rig.questions.empty());
  CHECK(rig.kernel.creates == 1);  // only too_big, on the 64K kernel
  CHECK(too_big.ok());
}

TEST_CASE("attach: a kept passphrase is taken only with check= or password-cache=yes", "[attach]") {
  using lbscrypt::PasswordCache;
  lbscrypt::VolumeOptions v;
  CHECK_FALSE(lbscrypt::accepts_cached_passphrase(v));
  v.check = "blkid";
  CHECK(lbscrypt::accepts_cached_passphrase(v));
  v.password_cache = PasswordCache::no;
  CHECK_FALSE(lbscrypt::accepts_cached_passphrase(v));
  v.check.reset();
  v.password_cache = PasswordCache::yes;
  CHECK(lbscrypt::accepts_cached_passphrase(v));

  // Through attach, as the lines say it.
  Rig opted_in;
  opted_in.answers = {"correct horse"};
  REQUIRE(opted_in.attach("none", "cipher=aes-xts-plain64,size=256,hash=sha256,password-cache=yes")
              .ok());
  REQUIRE(opted_in.questions.size() == 1);
  CHECK(opted_in.questions[0].accept_cached);
  CHECK(opted_in.questions[0].keep);
  Rig opted_out;
  opted_out.answers = {"correct horse"};
  REQUIRE(opted_out
              .attach("none", "cipher=aes-xts-plain64,size=256,hash=sha256,check,password-cache=no")
              .ok());
  REQUIRE(opted_out.questions.size() == 1);
  CHECK_FALSE(opted_out.questions[0].accept_cached);
  CHECK_FALSE(opted_out.questions[0].keep);
  const auto read_only = opted_out.attach(
      "none", "cipher=aes-xts-plain64,size=256,hash=sha256,password-cache=read-only");
  REQUIRE_FALSE(read_only.ok());
  CHECK_THAT(read_only.error().message, Catch::Contains("password-cache=read-only: give yes"));
}

TEST_CASE("attach: headless= never asks for a passphrase", "[attach]") {
  Rig rig;
  rig.answers = {"correct horse"};
  auto v = lbscrypt::parse_volume_options("cipher=aes-xts-plain64,size=256,hash=sha256", true);
  REQUIRE(v.ok());
  v->headless = true;
  const auto failed = lbscrypt::attach_volume(AttachRequest{"vol", "/dev/vdb", "none", ""}, *v,
                                              rig.env, rig.services);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == Errc::key);
  CHECK(failed.error().message ==
        "vol: headless= forbids asking for a passphrase and the line names no key file: give a key "
        "file, or drop headless=");
  CHECK(rig.questions.empty());
  CHECK(rig.kernel.creates == 0);
  // A key file needs no prompt: headless= changes nothing for it.
  auto k = lbscrypt::parse_volume_options("cipher=aes-xts-plain64,size=256", false);
  REQUIRE(k.ok());
  k->headless = true;
  CHECK(lbscrypt::attach_volume(AttachRequest{"vol", "/dev/vdb", kKeyFile, ""}, *k, rig.env,
                                rig.services)
            .ok());
  CHECK(rig.questions.empty());
}

TEST_CASE("attach: a udev name with \\xNN goes into the table as the device it links to",
          "[attach]") {
  Rig rig;
  std::vector<std::string> asked;
  rig.services.device_behind = [&](const std::string &path) -> std::optional<std::string> {
    asked.push_back(path);
    if (path == "/dev/disk/by-label/Data\\x281\\x29") {
      return std::string("/dev/vdb");
    }
    return std::nullopt;
  };
  const std::string options = "cipher=aes-xts-plain64,size=256";
  const auto done = lbscrypt::attach_volume(
      AttachRequest{"vol", "LABEL=Data(1)", kKeyFile, options}, rig.env, rig.services);
  REQUIRE(done.ok());
  REQUIRE(asked.size() == 1);
  CHECK(asked.front() == "/dev/disk/by-label/Data\\x281\\x29");
  CHECK_THAT(rig.params(), Catch::Contains(" 0 /dev/vdb 0"));
  // The same path written by hand, already open: accepted as the line describes it.
  const auto again = lbscrypt::attach_volume(
      AttachRequest{"vol", "/dev/disk/by-label/Data\\x281\\x29", kKeyFile, options}, rig.env,
      rig.services);
  REQUIRE(again.ok());
  CHECK(again->already_active);
  // No device by that name yet: one line naming the path udev would make.
  const auto missing = lbscrypt::attach_volume(
      AttachRequest{"other", "LABEL=No Such", kKeyFile, options}, rig.env, rig.services);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::not_found);
  CHECK(missing.error().message ==
        "other: /dev/disk/by-label/No\\x20Such does not exist: no device has that name yet");
}

namespace {

const std::string kCredential = "/etc/lbscrypt/vol.cred";
const std::string kSealed = "cipher=aes-xts-plain64,size=256,tpm2-device=auto";
const std::string kSealedPassphrase =
    "cipher=aes-xts-plain64,size=256,hash=sha256,tpm2-device=auto,x-lbscrypt.sealed=passphrase";

// A TPM2 that unseals `secret` for every credential, or refuses as systemd-creds says.
struct SealedRig : Rig {
  std::vector<lbscrypt::SealedKey> unseals;
  std::optional<std::string> secret;  // nullopt: the TPM refuses

  SealedRig() {
    services.unseal = [this](const lbscrypt::SealedKey &key) -> Result<SecretBuffer> {
      unseals.push_back(key);
      if (!secret) {
        return lbscrypt::make_error(Errc::key,
                                    "the TPM2 did not unseal " + key.credential +
                                        " (credential vol): systemd-creds: Failed to unseal "
                                        "secret using TPM2: State not recoverable");
      }
      const std::string &text = *secret;
      return SecretBuffer(text.data(), text.size());
    };
  }
};

std::string bytes_0_to(std::size_t n) {
  std::string bytes;
  for (std::size_t i = 0; i < n; ++i) {
    bytes += static_cast<char>(i);
  }
  return bytes;
}

}  // namespace

TEST_CASE("attach: a sealed key is unsealed and used as a key file is", "[attach][sealed]") {
  SealedRig rig;
  rig.secret = bytes_0_to(64);  // longer than the key: its first 32 bytes, as a key file
  const auto done = rig.attach(kCredential, kSealed);
  REQUIRE(done.ok());
  REQUIRE(rig.unseals.size() == 1);
  CHECK(rig.unseals[0].credential == kCredential);
  CHECK_FALSE(rig.unseals[0].tpm2_device);  // auto: systemd-creds finds it
  CHECK(rig.params() ==
        "aes-xts-plain64 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 0 "
        "/dev/vdb 0");
  CHECK(rig.questions.empty());
  CHECK(done->notes.empty());  // no key file mode to warn about

  SealedRig named;
  named.secret = bytes_0_to(32);
  REQUIRE(
      named.attach(kCredential, "cipher=aes-xts-plain64,size=256,tpm2-device=/dev/tpmrm0").ok());
  CHECK(named.unseals.at(0).tpm2_device == std::optional<std::string>("/dev/tpmrm0"));
}

TEST_CASE("attach: a TPM that refuses a sealed key fails, asks nothing, maps nothing",
          "[attach][sealed]") {
  SealedRig rig;
  rig.answers = {"correct horse"};
  const auto refused = rig.attach(kCredential, kSealed + ",check");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::key);
  CHECK(refused.error().message ==
        "vol: the TPM2 did not unseal /etc/lbscrypt/vol.cred (credential vol): systemd-creds: "
        "Failed to unseal secret using TPM2: State not recoverable");
  CHECK(rig.questions.empty());
  CHECK(rig.kernel.creates == 0);
  CHECK(rig.kernel.mappings.empty());
  // A key shorter than size=: refused, never padded.
  SealedRig short_key;
  short_key.secret = bytes_0_to(31);
  const auto too_short = short_key.attach(kCredential, kSealed);
  REQUIRE_FALSE(too_short.ok());
  CHECK(too_short.error().message ==
        "credential /etc/lbscrypt/vol.cred holds 31 bytes, and the 256-bit key needs 32: seal "
        "the whole key (or, when it holds a passphrase, say so: x-lbscrypt.sealed=passphrase, "
        "open --sealed-passphrase)");
  CHECK(short_key.kernel.creates == 0);
}

TEST_CASE("attach: a sealed passphrase is hashed, and asked for when the TPM refuses",
          "[attach][sealed]") {
  SealedRig rig;
  rig.secret = "correct horse";
  REQUIRE(rig.attach(kCredential, kSealedPassphrase).ok());
  CHECK(rig.params() == "aes-xts-plain64 " + kCorrectKey + " 0 /dev/vdb 0");
  CHECK(rig.questions.empty());

  SealedRig refused;
  refused.answers = {"correct horse"};
  const auto asked = refused.attach(kCredential, kSealedPassphrase);
  REQUIRE(asked.ok());
  REQUIRE(refused.questions.size() == 1);
  CHECK_FALSE(refused.questions[0].accept_cached);  // never another volume's kept answer
  REQUIRE(asked->notes.size() == 1);
  CHECK(asked->notes[0] ==
        "vol: the TPM2 did not unseal /etc/lbscrypt/vol.cred (credential vol): systemd-creds: "
        "Failed to unseal secret using TPM2: State not recoverable; asking for the passphrase "
        "instead");
  CHECK(refused.params() == "aes-xts-plain64 " + kCorrectKey + " 0 /dev/vdb 0");

  SealedRig headless;
  headless.answers = {"correct horse"};
  const auto failed = headless.attach(kCredential, kSealedPassphrase + ",headless=true");
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.error().message,
             Catch::EndsWith("State not recoverable (headless=: no passphrase is asked for)"));
  CHECK(headless.questions.empty());
  CHECK(headless.kernel.creates == 0);
}

TEST_CASE("attach: a sealed passphrase that fails check= is asked for again, a key is not",
          "[attach][sealed]") {
  SealedRig rig;
  rig.secret = "wrong";
  rig.answers = {"correct horse"};
  rig.check_status = {1, 0};
  const auto done = rig.attach(kCredential, kSealedPassphrase + ",check");
  REQUIRE(done.ok());
  CHECK(rig.unseals.size() == 1);
  CHECK(rig.questions.size() == 1);
  CHECK(rig.params() == "aes-xts-plain64 " + kCorrectKey + " 0 /dev/vdb 0");

  SealedRig key;
  key.secret = bytes_0_to(32);
  key.answers = {"correct horse"};
  key.check_status = {1};
  REQUIRE_FALSE(key.attach(kCredential, kSealed + ",check").ok());
  CHECK(key.questions.empty());
  CHECK(key.kernel.mappings.empty());
}

TEST_CASE("attach: a sealed volume already open is left alone without unsealing",
          "[attach][sealed]") {
  SealedRig rig;
  rig.secret = bytes_0_to(32);
  REQUIRE(rig.attach(kCredential, kSealed).ok());
  rig.secret.reset();  // a PCR changed since: the open volume is not touched
  const auto again = rig.attach(kCredential, kSealed);
  REQUIRE(again.ok());
  CHECK(again->already_active);
  CHECK(rig.unseals.size() == 1);
}

TEST_CASE("attach: a sealed key's field must name a credential file", "[attach][sealed]") {
  SealedRig rig;
  rig.secret = bytes_0_to(32);
  const auto device = rig.attach("/dev/sdb", kSealed);
  REQUIRE_FALSE(device.ok());
  CHECK(device.error().message ==
        "vol: tpm2-device= unseals the credential file the key field names, and '/dev/sdb' is "
        "a device: give the file lbscrypt seal wrote (/etc/lbscrypt/vol.cred)");
  const auto odd = rig.attach("/etc/lbscrypt/v%l.cred", kSealed);
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(odd.error().message, Catch::StartsWith("vol: credential file '/etc/lbscrypt/v%l.cred' "
                                                    "gives no usable credential name"));
  const auto none = rig.attach("none", kSealed + ",hash=sha256");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::StartsWith("tpm2-device= unseals the credential"));
  CHECK(rig.unseals.empty());
  CHECK(rig.kernel.creates == 0);
}
