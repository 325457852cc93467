// SPDX-License-Identifier: GPL-2.0-only
// The matrix's view of the kernel beside device-mapper: its log (/dev/kmsg) and sysfs.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <fstream>

#include "lbscrypt/matrix.hpp"
#include "lbscrypt/numbers.hpp"

namespace lbscrypt {

namespace {

// A /dev/kmsg record is at most about 8 KiB (PRINTK_MESSAGE_MAX plus its prefix fields).
constexpr std::size_t kRecordMax = 8192;

// /dev/kmsg, opened once: every reader has its own position, so reading clears nothing for
// anyone else (unlike `dmesg -c`), and a seek to the end skips what was logged before.
class SystemObserver final : public KernelObserver {
 public:
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg, hicpp-signed-bitwise)
  SystemObserver() : fd_(open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {}
  SystemObserver(const SystemObserver &) = delete;
  SystemObserver &operator=(const SystemObserver &) = delete;
  SystemObserver(SystemObserver &&) = delete;
  SystemObserver &operator=(SystemObserver &&) = delete;
  ~SystemObserver() override {
    if (fd_ >= 0) {
      close(fd_);
    }
  }

  void mark() override {
    if (fd_ >= 0) {
      static_cast<void>(lseek(fd_, 0, SEEK_END));
    }
  }

  std::optional<std::vector<std::string>> messages() override {
    if (fd_ < 0) {
      return std::nullopt;
    }
    std::vector<std::string> out;
    std::array<char, kRecordMax> record{};
    for (;;) {
      const ssize_t got = read(fd_, record.data(), record.size() - 1);
      if (got < 0 && errno == EPIPE) {
        continue;  // records were overwritten before we read them: go on with the next
      }
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got <= 0) {
        break;  // EAGAIN: nothing more logged
      }
      // "<prio>,<seq>,<usec>,<flags>[,...];<message>\n[ KEY=value\n...]"
      const std::string_view text(record.data(), static_cast<std::size_t>(got));
      const auto start = text.find(';');
      if (start == std::string_view::npos) {
        continue;
      }
      const auto end = text.find('\n', start);
      out.emplace_back(
          text.substr(start + 1, end == std::string_view::npos ? end : end - start - 1));
    }
    return out;
  }

  std::optional<std::uint32_t> logical_block_size(const DeviceInfo &device) override {
    std::ifstream file(
        fmt::format("/sys/dev/block/{}:{}/queue/logical_block_size", device.major, device.minor));
    std::string text;
    if (!(file >> text)) {
      return std::nullopt;
    }
    return parse_decimal_u32(text);
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<KernelObserver> make_system_observer() {
  return std::make_unique<SystemObserver>();
}

}  // namespace lbscrypt
