// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "lbscrypt/sealed.hpp"
#include "temp_dir.hpp"

using lbscrypt::ChildOutcome;
using lbscrypt::Errc;
using lbscrypt::Result;
using lbscrypt::SecretBuffer;
using lbscrypt::test::TempDir;

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path &path, const std::string &text, bool executable = false) {
  fs::create_directories(path.parent_path());
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  if (executable) {
    fs::permissions(path, fs::perms::owner_all);
  }
}

std::string read_file(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string text_of(const SecretBuffer &secret) { return std::string(secret.view()); }

// A runner that records what it was asked and answers as told.
struct FakeRunner {
  std::vector<std::vector<std::string>> calls;
  std::vector<std::string> inputs;
  int status = 0;
  std::string error_line;
  std::string output;

  lbscrypt::ChildRunner runner() {
    return [this](const std::vector<std::string> &argv, const SecretBuffer *input,
                  SecretBuffer *out) -> Result<ChildOutcome> {
      calls.push_back(argv);
      inputs.push_back(input != nullptr ? text_of(*input) : std::string("<none>"));
      if (out != nullptr) {
        out->append(output);
      }
      return ChildOutcome{status, error_line};
    };
  }
};

}  // namespace

TEST_CASE("sealed: the credential's name is the file's without .cred", "[sealed]") {
  CHECK(lbscrypt::credential_id("/etc/lbscrypt/data.cred").value() == "data");
  CHECK(lbscrypt::credential_id("/etc/lbscrypt/root.vol.cred").value() == "root.vol");
  CHECK(lbscrypt::credential_id("/etc/lbscrypt/data.key").value() == "data.key");
  CHECK(lbscrypt::credential_id("data.cred.cred").value() == "data.cred");
  CHECK(lbscrypt::credential_id("/etc/lbscrypt/home-vol_1.cred").value() == "home-vol_1");
  // ".cred" alone keeps its name: nothing would be left without it
  CHECK(lbscrypt::credential_id("/etc/lbscrypt/.cred").value() == ".cred");
  for (const std::string &bad : std::vector<std::string>{
           "/etc/lbscrypt/", "/etc/lbscrypt/..", "/etc/lbscrypt/a:b.cred", "/etc/lbscrypt/a%b.cred",
           "/etc/lbscrypt/a\\b.cred", "/etc/lbscrypt/a b.cred", "/etc/lbscrypt/\xc3\xa9.cred",
           "/etc/lbscrypt/a'b.cred", "/etc/lbscrypt/" + std::string(256, 'k') + ".cred"}) {
    INFO(bad);
    const auto id = lbscrypt::credential_id(bad);
    REQUIRE_FALSE(id.ok());
    CHECK(id.error().code == Errc::invalid_argument);
    CHECK(id.error().message.find("gives no usable credential name") != std::string::npos);
  }
  CHECK(lbscrypt::credential_id("/x/" + std::string(255, 'k')).ok());
}

TEST_CASE("sealed: PCR lists as systemd-creds 252 takes them", "[sealed]") {
  CHECK(lbscrypt::parse_pcr_list("7").value() == std::vector<unsigned>{7});
  CHECK(lbscrypt::parse_pcr_list("7+0").value() == std::vector<unsigned>{0, 7});
  CHECK(lbscrypt::parse_pcr_list("14,0+7").value() == std::vector<unsigned>{0, 7, 14});
  CHECK(lbscrypt::parse_pcr_list("23").value() == std::vector<unsigned>{23});
  CHECK(lbscrypt::parse_pcr_list("").value().empty());
  CHECK(lbscrypt::parse_pcr_list("none").value().empty());
  CHECK(lbscrypt::format_pcr_list({0, 7, 14}) == "0+7+14");
  CHECK(lbscrypt::format_pcr_list({}).empty());
  for (const std::string bad : {"24", "7+", "+7", "x", "-1", "7 ", "secure-boot-policy", "07x"}) {
    INFO(bad);
    const auto pcrs = lbscrypt::parse_pcr_list(bad);
    REQUIRE_FALSE(pcrs.ok());
    CHECK(pcrs.error().message.find("is not a PCR: give PCR numbers 0 to 23") != std::string::npos);
  }
  const auto twice = lbscrypt::parse_pcr_list("7+7");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message == "--tpm2-pcrs 7+7: PCR 7 is given twice: give it once");
}

TEST_CASE("sealed: a PCR never extended draws a warning, read from sysfs", "[sealed]") {
  const TempDir dir;
  const fs::path pcrs = dir.path / "class/tpm/tpm0/pcr-sha256";
  // As the kernel prints them: upper-case hex and a newline.
  write_file(pcrs / "0", "3D458CFE55CC03EA1F443F1562BEEC8DF51C75E14A9FCF9A7234A13F198E7969\n");
  write_file(pcrs / "7", std::string(64, '0') + "\n");
  write_file(pcrs / "8", "not hex\n");
  const auto warnings = lbscrypt::pcr_warnings(dir.path, {0, 7, 8, 11});
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] == "warning: PCR 7 was never extended: a policy on it protects nothing");
  CHECK(warnings[1] == "warning: cannot read PCR 8 from " + (pcrs / "8").string() +
                           " (Linux 5.12 and later have it): not checked for a value the "
                           "firmware put there");
  CHECK(warnings[2].starts_with("warning: cannot read PCR 11 from "));
  CHECK(lbscrypt::pcr_warnings(dir.path, {0}).empty());
  CHECK(lbscrypt::pcr_warnings(dir.path, {}).empty());
}

TEST_CASE("sealed: seal runs systemd-creds encrypt with the secret on a pipe", "[sealed]") {
  FakeRunner fake;
  const SecretBuffer secret("k\0ey", 4);
  const lbscrypt::SealRequest request{"/etc/lbscrypt/data.cred", {0, 7}, std::nullopt};
  REQUIRE(lbscrypt::seal_secret(request, secret, fake.runner()).ok());
  REQUIRE(fake.calls.size() == 1);
  CHECK(fake.calls[0] == std::vector<std::string>{"systemd-creds", "encrypt", "--with-key=tpm2",
                                                  "--tpm2-pcrs=0+7", "--name=data", "-",
                                                  "/etc/lbscrypt/data.cred"});
  CHECK(fake.inputs[0] == std::string("k\0ey", 4));
  // No PCR: the TPM alone, "--tpm2-pcrs=" as systemd-creds reads an empty list.
  const lbscrypt::SealRequest bare{"/etc/lbscrypt/data.cred", {}, std::nullopt};
  REQUIRE(lbscrypt::seal_secret(bare, secret, fake.runner()).ok());
  CHECK(fake.calls[1][3] == "--tpm2-pcrs=");

  fake.status = 1;
  fake.error_line = "Failed to find TPM2 device: No such file or directory";
  const auto refused = lbscrypt::seal_secret(request, secret, fake.runner());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::key);
  CHECK(refused.error().message ==
        "systemd-creds could not seal /etc/lbscrypt/data.cred to the TPM2 (exit status 1): "
        "Failed to find TPM2 device: No such file or directory");
  // A name systemd would not take: nothing is run.
  const auto bad =
      lbscrypt::seal_secret({"/etc/lbscrypt/a:b.cred", {7}, std::nullopt}, secret, fake.runner());
  REQUIRE_FALSE(bad.ok());
  CHECK(fake.calls.size() == 3);
}

// seal --name: a credential sealed under the name of the line's credential it will replace
// (reencrypt --update-tab --new-tpm2-credential renames it over that one at the end).
TEST_CASE("sealed: a credential sealed and unsealed under a name of its own", "[sealed]") {
  FakeRunner fake;
  fake.output = "the new key";
  const SecretBuffer secret("k", 1);
  const lbscrypt::SealRequest request{"/etc/lbscrypt/data.new.cred", {7}, "data"};
  CHECK(lbscrypt::seal_name(request).value() == "data");
  REQUIRE(lbscrypt::seal_secret(request, secret, fake.runner()).ok());
  CHECK(fake.calls.at(0) == std::vector<std::string>{"systemd-creds", "encrypt", "--with-key=tpm2",
                                                     "--tpm2-pcrs=7", "--name=data", "-",
                                                     "/etc/lbscrypt/data.new.cred"});
  // Any file name goes with a name of its own; a name systemd refuses is refused, nothing run.
  const lbscrypt::SealRequest odd_file{"/etc/lbscrypt/a:b", {7}, "data"};
  CHECK(lbscrypt::seal_name(odd_file).value() == "data");
  for (const std::string &bad :
       std::vector<std::string>{"", ".", "..", "a/b", "a:b", "a b", "a%b", "a\\b", "a'b", "a\"b",
                                "\xc3\xa9", std::string(256, 'k')}) {
    INFO(bad);
    const auto named = lbscrypt::seal_name({"/etc/lbscrypt/x.cred", {7}, bad});
    REQUIRE_FALSE(named.ok());
    CHECK(named.error().code == Errc::invalid_argument);
    CHECK(named.error().message.starts_with("--name "));
    CHECK(named.error().message.find("is no credential name systemd takes: name it with "
                                     "printable ASCII letters, digits and -._ only, at most "
                                     "255 bytes") != std::string::npos);
    CHECK_FALSE(lbscrypt::check_credential_name(bad).ok());
    CHECK_FALSE(
        lbscrypt::seal_secret({"/etc/lbscrypt/x.cred", {7}, bad}, secret, fake.runner()).ok());
  }
  CHECK(lbscrypt::check_credential_name(std::string(255, 'k')).ok());
  CHECK(fake.calls.size() == 1);

  // Unsealed under that name, by systemd-creds even where a unit's credentials directory has
  // a file of that name (loaded from the line's own credential: another key).
  const TempDir dir;
  write_file(dir.path / "data", "the old key, loaded by the unit");
  const lbscrypt::SealedKey key{"/etc/lbscrypt/data.new.cred", std::nullopt, "data"};
  const auto unsealed = lbscrypt::sealed_secret(key, dir.path, fake.runner());
  REQUIRE(unsealed.ok());
  CHECK(text_of(*unsealed) == "the new key");
  REQUIRE(fake.calls.size() == 2);
  CHECK(fake.calls[1] == std::vector<std::string>{"systemd-creds", "decrypt", "--name=data",
                                                  "/etc/lbscrypt/data.new.cred", "-"});
  const lbscrypt::SealedKey odd{"/etc/lbscrypt/data.new.cred", std::nullopt, "a:b"};
  CHECK_FALSE(lbscrypt::sealed_secret(odd, std::nullopt, fake.runner()).ok());
  CHECK(fake.calls.size() == 2);
}

TEST_CASE("sealed: the secret comes from the credentials directory, else systemd-creds",
          "[sealed]") {
  const TempDir dir;
  FakeRunner fake;
  fake.output = "from the TPM";
  const lbscrypt::SealedKey key{"/etc/lbscrypt/data.cred", std::nullopt, std::nullopt};
  SECTION("LoadCredentialEncrypted= unsealed it: systemd-creds is not run") {
    write_file(dir.path / "data", "from systemd");
    const auto secret = lbscrypt::sealed_secret(key, dir.path, fake.runner());
    REQUIRE(secret.ok());
    CHECK(text_of(*secret) == "from systemd");
    CHECK(fake.calls.empty());
  }
  SECTION("another credential's directory, or none: systemd-creds decrypt") {
    write_file(dir.path / "other", "not this one");
    for (const auto &directory : {std::optional<fs::path>(dir.path), std::optional<fs::path>()}) {
      const auto secret = lbscrypt::sealed_secret(key, directory, fake.runner());
      REQUIRE(secret.ok());
      CHECK(text_of(*secret) == "from the TPM");
    }
    REQUIRE(fake.calls.size() == 2);
    CHECK(fake.calls[0] == std::vector<std::string>{"systemd-creds", "decrypt", "--name=data",
                                                    "/etc/lbscrypt/data.cred", "-"});
    CHECK(fake.inputs[0] == "<none>");
  }
  SECTION("a TPM2 device named on the line") {
    const lbscrypt::SealedKey named{"/etc/lbscrypt/data.cred", "/dev/tpmrm1", std::nullopt};
    REQUIRE(lbscrypt::sealed_secret(named, std::nullopt, fake.runner()).ok());
    CHECK(fake.calls[0] == std::vector<std::string>{"systemd-creds", "decrypt", "--name=data",
                                                    "--tpm2-device=/dev/tpmrm1",
                                                    "/etc/lbscrypt/data.cred", "-"});
  }
  SECTION("the TPM refuses: one line with systemd-creds' own") {
    fake.status = 1;
    fake.output.clear();
    fake.error_line = "Failed to unseal secret using TPM2: State not recoverable";
    const auto refused = lbscrypt::sealed_secret(key, std::nullopt, fake.runner());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::key);
    CHECK(refused.error().message ==
          "the TPM2 did not unseal /etc/lbscrypt/data.cred (credential data): systemd-creds: "
          "Failed to unseal secret using TPM2: State not recoverable");
  }
  SECTION("systemd-creds is not there") {
    fake.status = 127;
    fake.error_line = "cannot run systemd-creds: no such program in PATH";
    const auto missing = lbscrypt::sealed_secret(key, std::nullopt, fake.runner());
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message.ends_with(
        "systemd-creds: cannot run systemd-creds: no such program in PATH (install systemd 252 "
        "or later; an initramfs needs it in the image)"));
  }
  SECTION("an empty secret is refused") {
    fake.output.clear();
    const auto empty = lbscrypt::sealed_secret(key, std::nullopt, fake.runner());
    REQUIRE_FALSE(empty.ok());
    CHECK(empty.error().message ==
          "credential /etc/lbscrypt/data.cred holds an empty secret: seal it again");
  }
}

TEST_CASE("sealed: run_child feeds standard input and catches the output and first error line",
          "[sealed]") {
  const TempDir dir;
  const fs::path script = dir.path / "fake-creds";
  // Writes what it read to a file, then answers on both streams.
  write_file(script,
             "#!/bin/sh\n"
             "cat > \"$(dirname \"$0\")/got\"\n"
             "printf 'answer\\0with a NUL'\n"
             "printf '\\n  \\nERROR:tcti:src/tcti-device.c:452:Init() Failed to open \\n' >&2\n"
             "printf 'first line\\r\\nsecond line\\n' >&2\n"
             "exit \"$1\"\n",
             true);
  std::string input_text("secret\0bytes\n", 13);
  const SecretBuffer input(input_text.data(), input_text.size());
  SecretBuffer output;
  const auto done = lbscrypt::run_child({script.string(), "3"}, &input, &output);
  REQUIRE(done.ok());
  CHECK(done->status == 3);
  CHECK(done->error_line == "first line");
  CHECK(read_file(dir.path / "got") == input_text);
  CHECK(text_of(output) == std::string("answer\0with a NUL", 17));
}

TEST_CASE("sealed: run_child survives a child that reads nothing, and a missing program",
          "[sealed]") {
  const TempDir dir;
  const fs::path script = dir.path / "deaf";
  write_file(script, "#!/bin/sh\necho refused >&2\nexit 1\n", true);
  // More than a pipe holds: the parent's writes meet a closed pipe (EPIPE, no SIGPIPE death).
  const std::string big(std::size_t{1024} * 1024, 'x');
  const SecretBuffer input(big.data(), big.size());
  const auto done = lbscrypt::run_child({script.string()}, &input, nullptr);
  REQUIRE(done.ok());
  CHECK(done->status == 1);
  CHECK(done->error_line == "refused");
  // Only the TPM2 library's log: its first line.
  write_file(script, "#!/bin/sh\necho 'WARNING:esys:x.c:1:f() odd' >&2\nexit 1\n", true);
  CHECK(lbscrypt::run_child({script.string()}, nullptr, nullptr)->error_line ==
        "WARNING:esys:x.c:1:f() odd");

  const auto missing =
      lbscrypt::run_child({(dir.path / "no-such-program").string()}, nullptr, nullptr);
  REQUIRE(missing.ok());
  CHECK(missing->status == 127);
  CHECK(missing->error_line ==
        "cannot run " + (dir.path / "no-such-program").string() + ": no such program in PATH");
}

TEST_CASE("sealed: an output larger than a secret is refused", "[sealed]") {
  const TempDir dir;
  const fs::path script = dir.path / "chatty";
  write_file(script, "#!/bin/sh\nhead -c 9000 /dev/zero\n", true);
  SecretBuffer output;
  const auto done = lbscrypt::run_child({script.string()}, nullptr, &output);
  REQUIRE_FALSE(done.ok());
  CHECK(done.error().message.ends_with("gave more than 8192 bytes: not a key"));
}

TEST_CASE("sealed: random keys and key files to seal", "[sealed]") {
  const auto key = lbscrypt::random_secret(64);
  REQUIRE(key.ok());
  CHECK(key->size() == 64);
  const auto other = lbscrypt::random_secret(64);
  REQUIRE(other.ok());
  CHECK_FALSE(*key == *other);
  for (const std::size_t bad : {std::size_t{0}, std::size_t{15}, std::size_t{1025}}) {
    const auto refused = lbscrypt::random_secret(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("give the key's size in bytes, 16 to 1024") !=
          std::string::npos);
  }
  const TempDir dir;
  write_file(dir.path / "key", std::string("\x01\x02\x00\x03", 4));
  const auto file = lbscrypt::read_secret_file((dir.path / "key").string());
  REQUIRE(file.ok());
  CHECK(text_of(*file) == std::string("\x01\x02\x00\x03", 4));
  write_file(dir.path / "empty", "");
  CHECK(lbscrypt::read_secret_file((dir.path / "empty").string()).error().message ==
        "key file " + (dir.path / "empty").string() + " is empty: nothing to seal");
  write_file(dir.path / "big", std::string(8193, 'k'));
  CHECK(lbscrypt::read_secret_file((dir.path / "big").string())
            .error()
            .message.find("holds more than 8192 bytes") != std::string::npos);
  CHECK_FALSE(lbscrypt::read_secret_file(dir.path.string()).ok());
  CHECK_FALSE(lbscrypt::read_secret_file((dir.path / "absent").string()).ok());
}
