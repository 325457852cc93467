// SPDX-License-Identifier: GPL-2.0-only
// Expected keys were computed independently (Python hashlib) from cryptsetup's plain-mode
// rule: key = H(p) || H("A" p) || H("AA" p) ... cut to the key size.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <csignal>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "lbscrypt/keys.hpp"

using lbscrypt::KeyOptions;
using lbscrypt::KeyPlan;
using lbscrypt::SecretBuffer;

namespace {

std::string hex(const SecretBuffer &key) { return std::string(lbscrypt::to_hex(key).view()); }

SecretBuffer text(const char *s) { return {s, std::strlen(s)}; }

KeyPlan hashed(const char *hash, std::size_t bytes) {
  KeyPlan plan;
  plan.hash = hash;
  plan.key_bytes = bytes;
  return plan;
}

// Runs `body` with standard input reading `input` from a temporary file.
template <class F>
void with_stdin(const std::string &input, F body) {
  char path[] = "/tmp/lbscrypt-stdin-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, input.data(), input.size()) == static_cast<ssize_t>(input.size()));
  REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
  const int saved = dup(STDIN_FILENO);
  REQUIRE(dup2(fd, STDIN_FILENO) == STDIN_FILENO);
  body();
  dup2(saved, STDIN_FILENO);
  close(saved);
  close(fd);
  unlink(path);
}

}  // namespace

TEST_CASE("passphrases hash like cryptsetup plain mode", "[keys]") {
  const SecretBuffer pass = text("correct horse");
  struct Row {
    const char *hash;
    std::size_t bytes;
    const char *expected;
  };
  const Row rows[] = {
      {"ripemd160", 32, "424573ebba1ce1abc618a416178f79ad83442dfccd852f665c5536c935adea5c"},
      {"ripemd160", 64,
       "424573ebba1ce1abc618a416178f79ad83442dfccd852f665c5536c935adea5cb956db7720c4606f0e06d4"
       "2a3827b056b40ae89ab6e1b48c2436bf4d4edddb1b"},
      {"sha256", 32, "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631"},
      {"sha256", 64,
       "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631c51aefc7f409f4df0888cd"
       "78c638b969db451fa1e040e06e2a9ed77f2ae083d5"},
      {"sha1", 32, "2f9e53523b62abc141a2b4d6019d23cba835dbd0d9a5deb78a31c8ae1ef31f3f"},
      {"sha512", 32, "56b698defedb5a435b634afe3320bbaf3fdcd920b6c503a446fc7b7a776b298d"},
  };
  for (const auto &row : rows) {
    INFO(row.hash << " " << row.bytes);
    const auto key = lbscrypt::make_plain_key(hashed(row.hash, row.bytes), pass);
    REQUIRE(key.ok());
    CHECK(hex(*key) == row.expected);
  }
}

TEST_CASE("hash:length hashes a prefix and pads with zeros", "[keys]") {
  const auto key = lbscrypt::make_plain_key(hashed("sha256:16", 32), text("pw"));
  REQUIRE(key.ok());
  CHECK(hex(*key) == "30c952fab122c3f9759f02a6d95c375800000000000000000000000000000000");
}

TEST_CASE("an unknown hash is a key error", "[keys]") {
  const auto key = lbscrypt::make_plain_key(hashed("nosuchhash", 32), text("pw"));
  REQUIRE_FALSE(key.ok());
  CHECK(key.error().code == lbscrypt::Errc::key);
  CHECK_THAT(key.error().message, Catch::Contains("nosuchhash"));
}

TEST_CASE("without a hash the material is the key", "[keys]") {
  KeyPlan plan;
  plan.key_bytes = 4;
  const auto key = lbscrypt::make_plain_key(plan, text("abcdefgh"));
  REQUIRE(key.ok());
  CHECK(key->view() == "abcd");
  // A short passphrase (--hash plain) is padded with zeros, as libcryptsetup does; a short
  // key file never gets here (read_key_material refuses it).
  const auto short_key = lbscrypt::make_plain_key(plan, text("abc"));
  REQUIRE(short_key.ok());
  CHECK(hex(*short_key) == "61626300");
}

TEST_CASE("the plan follows cryptsetup's rules", "[keys]") {
  KeyOptions o;
  SECTION("terminal: default hash sha256 (cryptsetup 2.7)") {
    const auto plan = lbscrypt::plan_plain_key(o, true);
    REQUIRE(plan.ok());
    CHECK(plan->source == KeyPlan::Source::terminal);
    CHECK(plan->hash == "sha256");
    CHECK(plan->key_bytes == 32U);
  }
  SECTION("stdin without --key-file: one line") {
    const auto plan = lbscrypt::plan_plain_key(o, false);
    REQUIRE(plan.ok());
    CHECK(plan->source == KeyPlan::Source::stdin_line);
  }
  SECTION("a key file is used as is; --hash and --keyfile-size are ignored with warnings") {
    o.key_file = "/k";
    o.hash = "sha256";
    o.keyfile_size = 7;
    const auto plan = lbscrypt::plan_plain_key(o, false);
    REQUIRE(plan.ok());
    CHECK(plan->source == KeyPlan::Source::file);
    CHECK_FALSE(plan->hash.has_value());
    CHECK(plan->read_limit == 32U);
    REQUIRE(plan->warnings.size() == 2);
    CHECK_THAT(plan->warnings[0], Catch::Contains("--hash parameter is being ignored"));
  }
  SECTION("--key-file=- reads all of stdin and hashes it") {
    o.key_file = "-";
    o.keyfile_size = 10;
    const auto plan = lbscrypt::plan_plain_key(o, false);
    REQUIRE(plan.ok());
    CHECK(plan->source == KeyPlan::Source::stdin_all);
    CHECK(plan->hash == "sha256");
    CHECK(plan->read_limit == 10U);
  }
  SECTION("--hash plain uses the passphrase as the key") {
    o.hash = "plain";
    const auto plan = lbscrypt::plan_plain_key(o, true);
    REQUIRE(plan.ok());
    CHECK_FALSE(plan->hash.has_value());
  }
  SECTION("bad key sizes") {
    for (const std::uint32_t bits : {0U, 7U, 9U, 8200U}) {
      o.key_size_bits = bits;
      CHECK_FALSE(lbscrypt::plan_plain_key(o, true).ok());
    }
  }
  SECTION("no offset on a terminal") {
    o.keyfile_offset = 1;
    CHECK_FALSE(lbscrypt::plan_plain_key(o, true).ok());
  }
}

TEST_CASE("key files: offset applies, exactly key-size bytes are read", "[keys]") {
  char path[] = "/tmp/lbscrypt-key-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string content = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  close(fd);
  KeyOptions o;
  o.key_file = path;
  o.key_size_bits = 128;
  o.keyfile_offset = 10;
  const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE(key.ok());
  CHECK(key->key.view() == "abcdefghijklmnop");
  o.keyfile_offset = 40;  // 6 bytes left, 16 needed
  const auto short_key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE_FALSE(short_key.ok());
  CHECK(short_key.error().code == lbscrypt::Errc::key);
  o.key_file = "/nonexistent/lbscrypt-key";
  o.keyfile_offset = 0;
  const auto missing = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("/nonexistent/lbscrypt-key"));
  unlink(path);
}

TEST_CASE("stdin without --key-file stops at the first newline", "[keys]") {
  with_stdin("correct horse\nignored\n", [] {
    KeyOptions o;
    o.hash = "sha256";
    const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
    REQUIRE(key.ok());
    CHECK(hex(key->key) == "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631");
  });
}

TEST_CASE("an empty standard input is refused as cryptsetup's 'Nothing to read on input'",
          "[keys]") {
  with_stdin("", [] {
    KeyOptions o;
    o.hash = "sha256";
    const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
    REQUIRE_FALSE(key.ok());
    CHECK(key.error().message ==
          "nothing to read on standard input: give the passphrase (or the key) there, or name "
          "a key file with --key-file");
  });
  // A lone newline is an empty passphrase, hashed (the test above of empty passphrases).
  with_stdin("\n", [] {
    KeyOptions o;
    o.hash = "sha256";
    CHECK(lbscrypt::derive_plain_key(o, false, nullptr).ok());
  });
}

TEST_CASE("key file - takes all of stdin, newlines included", "[keys]") {
  with_stdin("correct horse\n", [] {
    KeyOptions o;
    o.hash = "plain";
    o.key_file = "-";
    o.key_size_bits = 112;  // 14 bytes: the newline is part of the key
    const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
    REQUIRE(key.ok());
    CHECK(key->key.view() == "correct horse\n");
  });
}

TEST_CASE("a terminal passphrase comes from the reader", "[keys]") {
  KeyOptions o;
  o.hash = "sha256";
  std::size_t asked = 0;
  const lbscrypt::TerminalReader reader = [&](std::size_t max) {
    asked = max;
    return lbscrypt::Result<SecretBuffer>(text("correct horse"));
  };
  const auto key = lbscrypt::derive_plain_key(o, true, reader);
  REQUIRE(key.ok());
  CHECK(asked == lbscrypt::kMaxTerminalPassphrase);
  CHECK(hex(key->key) == "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631");
}

TEST_CASE("terminal input follows cryptsetup: --key-file=- prompts, -l does not cut", "[keys]") {
  KeyOptions o;
  o.key_file = "-";
  o.keyfile_size = 4;
  o.hash = "sha256";
  const auto plan = lbscrypt::plan_plain_key(o, true);
  REQUIRE(plan.ok());
  CHECK(plan->source == KeyPlan::Source::terminal);
  CHECK(plan->read_limit == 0U);
  int asked = 0;
  const lbscrypt::TerminalReader reader = [&](std::size_t) {
    ++asked;
    return lbscrypt::Result<SecretBuffer>(text("correct horse"));
  };
  const auto key = lbscrypt::derive_plain_key(o, true, reader);
  REQUIRE(key.ok());
  CHECK(asked == 1);
  // sha256("correct horse"), the whole line: -l 4 did not cut it to "corr"
  CHECK(hex(key->key) == "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631");
}

TEST_CASE("a passphrase with a default draws the 2.7 warning, a key file does not", "[keys]") {
  KeyOptions o;
  const auto warned = lbscrypt::plan_plain_key(o, false);
  REQUIRE(warned.ok());
  REQUIRE(warned->warnings.size() == 1);
  CHECK_THAT(warned->warnings[0], Catch::Contains("aes-xts-plain64") &&
                                      Catch::Contains("256 bits") && Catch::Contains("sha256") &&
                                      Catch::Contains("ripemd160"));
  o.cipher_given = true;
  o.key_size_given = true;
  o.hash = "sha256";
  CHECK(lbscrypt::plan_plain_key(o, false)->warnings.empty());
  o.hash.reset();
  CHECK(lbscrypt::plan_plain_key(o, false)->warnings.size() == 1);
  o.quiet = true;
  CHECK(lbscrypt::plan_plain_key(o, false)->warnings.empty());
  KeyOptions file;
  file.key_file = "/k";
  CHECK(lbscrypt::plan_plain_key(file, false)->warnings.empty());
}

TEST_CASE("the default hash is sha256", "[keys]") {
  CHECK(std::string(lbscrypt::kDefaultPlainHash) == "sha256");
  CHECK(std::string(lbscrypt::kDefaultCipher) == "aes-xts-plain64");
  CHECK(lbscrypt::kDefaultKeyBits == 256U);
}

// Known answers computed independently (printf '' | sha256sum; printf A | sha256sum; Python
// hashlib for ripemd160) by cryptsetup's plain rule: H("") || H("A") ... cut to the key size.
TEST_CASE("an empty passphrase is hashed as cryptsetup hashes it", "[keys]") {
  const std::string sha256_empty =
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  const std::string sha256_a = "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd";
  struct Row {
    const char *hash;
    std::size_t bytes;
    std::string expected;
  };
  const Row rows[] = {
      {"sha256", 32, sha256_empty},
      {"sha256", 64, sha256_empty + sha256_a},  // key-size extension: the "A" round
      {"sha256:16", 32, sha256_empty.substr(0, 32) + std::string(32, '0')},
      {"sha512", 32, "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"},
      {"ripemd160", 32, "9c1185a5c5e9fc54612808977ee8f548b2258d31ddadef707ba62c166051b9e3"},
  };
  for (const auto &row : rows) {
    INFO(row.hash << " " << row.bytes);
    const auto key = lbscrypt::make_plain_key(hashed(row.hash, row.bytes), SecretBuffer());
    REQUIRE(key.ok());
    CHECK(hex(*key) == row.expected);
  }
  // echo | lbscrypt ...: the line is empty once its newline is dropped
  with_stdin("\n", [&] {
    KeyOptions o;
    o.hash = "sha256";
    const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
    REQUIRE(key.ok());
    CHECK(hex(key->key) == sha256_empty);
  });
  // and from a terminal
  KeyOptions o;
  o.hash = "sha256";
  const auto key = lbscrypt::derive_plain_key(
      o, true, [](std::size_t) { return lbscrypt::Result<SecretBuffer>(SecretBuffer()); });
  REQUIRE(key.ok());
  CHECK(hex(key->key) == sha256_empty);
}

TEST_CASE("a key file that cannot be read is named with the OS's reason", "[keys]") {
  KeyOptions o;
  o.key_file = "/nonexistent/lbscrypt-key";
  auto key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE_FALSE(key.ok());
  CHECK(key.error().code == lbscrypt::Errc::key);
  CHECK(key.error().message ==
        "cannot read the key file /nonexistent/lbscrypt-key: No such file or directory");
  o.key_file = "/tmp";
  key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE_FALSE(key.ok());
  CHECK(key.error().message == "cannot read the key file /tmp: Is a directory");
  o.key_file = std::string(LBSCRYPT_TEST_DATA) + "/keyfile-64.bin";
  o.keyfile_offset = 64;
  key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE_FALSE(key.ok());
  CHECK_THAT(key.error().message,
             Catch::EndsWith("holds 64 bytes; --keyfile-offset 64 is past its end"));
}

TEST_CASE("an unknown hash is refused before the passphrase is asked for", "[keys]") {
  KeyOptions o;
  o.hash = "nosuchhash";
  int asked = 0;
  const lbscrypt::TerminalReader reader = [&](std::size_t) {
    ++asked;
    return lbscrypt::Result<SecretBuffer>(text("pw"));
  };
  const auto key = lbscrypt::derive_plain_key(o, true, reader);
  REQUIRE_FALSE(key.ok());
  CHECK(asked == 0);
  CHECK(key.error().code == lbscrypt::Errc::invalid_argument);
  CHECK_THAT(key.error().message, Catch::StartsWith("--hash 'nosuchhash' is not a hash"));
  KeyPlan plan = hashed("sha256", 32);
  CHECK(lbscrypt::check_plain_hash(plan).ok());
  plan.hash = "sha256:33";  // longer than the hash
  CHECK_FALSE(lbscrypt::check_plain_hash(plan).ok());
  plan.hash.reset();  // a key file: no hash to check
  CHECK(lbscrypt::check_plain_hash(plan).ok());
}

namespace {

// Runs `body` in a child process that is killed after `seconds`: code that would hang or spin
// (the old FIFO and /dev/zero cases) fails the test instead of stalling the run. The exit
// status: 0 when `body` returned true, 1 when false, 128 + the signal when killed.
template <class F>
int in_child(F body, unsigned seconds) {
  (void)std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(seconds);
    _exit(body() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A FIFO in a fresh directory, removed with it.
struct Fifo {
  std::string dir;
  std::string path;
  Fifo() {
    char tmpl[] = "/tmp/lbscrypt-fifo-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    path = dir + "/key";
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  }
  ~Fifo() {
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
  Fifo(const Fifo &) = delete;
  Fifo &operator=(const Fifo &) = delete;
  Fifo(Fifo &&) = delete;
  Fifo &operator=(Fifo &&) = delete;
};

// A writer that opens the FIFO, writes `data` at once and exits, as `printf KEY > fifo &`.
pid_t fifo_writer(const std::string &path, const std::string &data) {
  const pid_t pid = fork();
  if (pid == 0) {
    (void)signal(SIGPIPE, SIG_IGN);
    const int fd = open(path.c_str(), O_WRONLY);  // NOLINT(cppcoreguidelines-pro-type-vararg)
    const bool written =
        fd >= 0 && write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    _exit(written ? 0 : 1);
  }
  return pid;
}

}  // namespace

TEST_CASE("a FIFO key file is opened once: a writer that writes and exits is read", "[keys]") {
  const Fifo fifo;
  const std::string key(32, 'k');
  for (int run = 0; run < 5; ++run) {
    const pid_t writer = fifo_writer(fifo.path, key);
    const int status = in_child(
        [&] {
          KeyOptions o;
          o.key_file = fifo.path;
          const auto derived = lbscrypt::derive_plain_key(o, false, nullptr);
          if (!derived) {
            (void)std::fputs((derived.error().message + "\n").c_str(), stderr);
          }
          return derived.ok() && derived->key.view() == key;
        },
        10);
    kill(writer, SIGKILL);
    waitpid(writer, nullptr, 0);
    INFO("run " << run);
    CHECK(status == 0);
  }
}

TEST_CASE("a FIFO key file that ends early names what it gave and what the key needs", "[keys]") {
  const Fifo fifo;
  const pid_t writer = fifo_writer(fifo.path, "0123456789");
  const int status = in_child(
      [&] {
        KeyOptions o;
        o.key_file = fifo.path;
        const auto derived = lbscrypt::derive_plain_key(o, false, nullptr);
        return !derived.ok() &&
               derived.error().message ==
                   "key file " + fifo.path +
                       " gave 10 bytes after --keyfile-offset 0, the key needs 32 (--key-size "
                       "256): give a longer key";
      },
      10);
  waitpid(writer, nullptr, 0);
  CHECK(status == 0);
}

TEST_CASE("a huge --keyfile-offset on a character device fails at once", "[keys]") {
  // /dev/zero cannot be sought: the offset would be read, 2^64-1 bytes of it.
  const int status = in_child(
      [] {
        KeyOptions o;
        o.key_file = "/dev/zero";
        o.keyfile_offset = 18446744073709551615ULL;
        const auto derived = lbscrypt::derive_plain_key(o, false, nullptr);
        return !derived.ok() && derived.error().message.starts_with(
                                    "--keyfile-offset 18446744073709551615 is too large for "
                                    "/dev/zero: a FIFO or character device is skipped by "
                                    "reading, at most 8388608 bytes");
      },
      10);
  CHECK(status == 0);
  // Within the bound, the bytes are read and dropped.
  KeyOptions o;
  o.key_file = "/dev/zero";
  o.keyfile_offset = 4096 * 3 + 5;
  const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
  REQUIRE(key.ok());
  CHECK(key->key == SecretBuffer(32));
  // And the same bound for standard input that is not a file.
  const int from_stdin = in_child(
      [] {
        const int zero = open("/dev/zero", O_RDONLY);  // NOLINT(cppcoreguidelines-pro-type-vararg)
        if (zero < 0 || dup2(zero, STDIN_FILENO) != STDIN_FILENO) {
          return false;
        }
        KeyOptions stdin_options;
        stdin_options.key_file = "-";
        stdin_options.hash = "plain";
        stdin_options.keyfile_offset = 18446744073709551615ULL;
        const auto derived = lbscrypt::derive_plain_key(stdin_options, false, nullptr);
        return !derived.ok() &&
               derived.error().message.starts_with(
                   "--keyfile-offset 18446744073709551615 is too large for standard input");
      },
      10);
  CHECK(from_stdin == 0);
}

TEST_CASE("a short key file gets the tool's own message, not libcryptsetup's errno", "[keys]") {
  char path[] = "/tmp/lbscrypt-key-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "0123456789abcdef", 16) == 16);
  close(fd);
  KeyOptions o;
  o.key_file = path;
  const auto key = lbscrypt::derive_plain_key(o, false, nullptr);
  unlink(path);
  REQUIRE_FALSE(key.ok());
  CHECK(key.error().code == lbscrypt::Errc::key);
  CHECK(key.error().message == std::string("key file ") + path +
                                   " holds 16 bytes after --keyfile-offset 0, the key needs 32 "
                                   "(--key-size 256): give a longer key file, a smaller offset or "
                                   "a smaller key size");
}

TEST_CASE("a closed standard input is refused by name, never read", "[keys]") {
  // main() holds fd 0 of a closed standard input with /dev/null opened write-only.
  const int status = in_child(
      [] {
        const int null = open("/dev/null", O_WRONLY);  // NOLINT(cppcoreguidelines-pro-type-vararg)
        if (null < 0 || dup2(null, STDIN_FILENO) != STDIN_FILENO) {
          return false;
        }
        bool all = true;
        for (const bool key_file_dash : {false, true}) {
          KeyOptions o;
          o.hash = "sha256";
          if (key_file_dash) {
            o.key_file = "-";
          }
          const auto derived = lbscrypt::derive_plain_key(o, false, nullptr);
          all = all && !derived.ok() &&
                derived.error().message ==
                    "standard input is closed: give the passphrase (or the key) there, or name "
                    "a key file with --key-file";
        }
        return all;
      },
      10);
  CHECK(status == 0);
}

TEST_CASE("a hash spec with a zero length, whitespace or no name is refused", "[keys]") {
  for (const char *bad : {"sha256:0", "plain:0", "sha256: 8", "sha256:", ":8", "sha 256",
                          "sha256:8x", "sha256:+8", "sha256:33", "sha256\t"}) {
    INFO(bad);
    KeyOptions o;
    o.hash = bad;
    const auto plan = lbscrypt::plan_plain_key(o, true);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code == lbscrypt::Errc::invalid_argument);
    CHECK_THAT(plan.error().message, Catch::StartsWith("--hash '"));
    CHECK(lbscrypt::check_hash_spec(bad, 32, "hash=").error().message.starts_with("hash="));
  }
  for (const char *good : {"sha256", "sha256:8", "sha256:32", "plain", "plain:16", "ripemd160"}) {
    INFO(good);
    KeyOptions o;
    o.hash = good;
    CHECK(lbscrypt::plan_plain_key(o, true).ok());
  }
  CHECK_THAT(lbscrypt::check_hash_spec("sha256:0", 32).error().message,
             Catch::StartsWith("--hash 'sha256:0' takes no byte of the passphrase: the key would "
                               "be all zeros"));
  CHECK_THAT(lbscrypt::check_hash_spec("sha256: 8", 32, "hash=").error().message,
             Catch::StartsWith("hash=sha256: 8 contains whitespace"));
}
