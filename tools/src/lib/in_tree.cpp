// SPDX-License-Identifier: GPL-2.0-only
#include "lbscrypt/in_tree.hpp"

#include <lzma.h>
#include <zstd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "lbscrypt/table.hpp"

namespace lbscrypt {

namespace {

// No dm-crypt module comes near this once unpacked (about 100 KiB); a file that claims more
// is not one, and is not unpacked further.
constexpr std::size_t kMaxModuleBytes = std::size_t{64} << 20U;

// All of `in`, or its first kMaxModuleBytes and one chunk more where it is longer (a link to
// /dev/zero is not read for ever); nullopt when a read fails.
std::optional<std::string> read_bounded(std::istream &in) {
  std::string bytes;
  std::array<char, 65536> chunk{};
  while (bytes.size() <= kMaxModuleBytes &&
         in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())).gcount() > 0) {
    bytes.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) {
    return std::nullopt;
  }
  return bytes;
}

Error unreadable(std::string message) { return Error{Errc::invalid_argument, std::move(message)}; }

bool starts_with_bytes(std::string_view bytes, std::string_view magic) {
  return bytes.substr(0, magic.size()) == magic;
}

constexpr std::string_view kElfMagic{
    "\x7f"
    "ELF",
    4};
constexpr std::string_view kXzMagic{
    "\xfd"
    "7zXZ\0",
    6};
constexpr std::string_view kZstdMagic{"\x28\xb5\x2f\xfd", 4};

Result<std::string> unpack_xz(std::string_view packed) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return unreadable("cannot start an xz decoder");
  }
  const std::unique_ptr<lzma_stream, void (*)(lzma_stream *)> guard(&stream, lzma_end);
  std::string out;
  std::array<std::uint8_t, 65536> chunk{};
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): liblzma reads bytes
  stream.next_in = reinterpret_cast<const std::uint8_t *>(packed.data());
  stream.avail_in = packed.size();
  for (;;) {
    stream.next_out = chunk.data();
    stream.avail_out = chunk.size();
    const lzma_ret ret = lzma_code(&stream, LZMA_FINISH);
    out.append(
        std::begin(chunk),
        std::next(std::begin(chunk), static_cast<std::ptrdiff_t>(chunk.size() - stream.avail_out)));
    if (out.size() > kMaxModuleBytes) {
      return unreadable("it unpacks to more than 64 MiB: not a kernel module");
    }
    if (ret == LZMA_STREAM_END) {
      return out;
    }
    if (ret != LZMA_OK) {
      return unreadable(
          fmt::format("its xz data is damaged (liblzma error {})", static_cast<int>(ret)));
    }
  }
}

Result<std::string> unpack_zstd(std::string_view packed) {
  const std::unique_ptr<ZSTD_DStream, std::size_t (*)(ZSTD_DStream *)> stream(ZSTD_createDStream(),
                                                                              ZSTD_freeDStream);
  if (!stream || ZSTD_isError(ZSTD_initDStream(stream.get())) != 0U) {
    return unreadable("cannot start a zstd decoder");
  }
  std::string out;
  std::array<char, 65536> chunk{};
  ZSTD_inBuffer in{packed.data(), packed.size(), 0};
  std::size_t pending = 1;
  while (in.pos < in.size || pending != 0) {
    ZSTD_outBuffer buffer{chunk.data(), chunk.size(), 0};
    const std::size_t before = in.pos;
    pending = ZSTD_decompressStream(stream.get(), &buffer, &in);
    if (ZSTD_isError(pending) != 0U) {
      return unreadable(fmt::format("its zstd data is damaged ({})", ZSTD_getErrorName(pending)));
    }
    out.append(chunk.data(), buffer.pos);
    if (out.size() > kMaxModuleBytes) {
      return unreadable("it unpacks to more than 64 MiB: not a kernel module");
    }
    if (buffer.pos == 0 && in.pos == before) {
      return unreadable("its zstd data ends early");  // no progress: the frame is cut short
    }
  }
  return out;
}

// The little ELF reader: what crypt_version_in_module() needs of a relocatable object.
class Elf {
 public:
  struct Section {
    std::uint32_t name = 0;
    std::uint32_t type = 0;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::uint32_t link = 0;
    std::uint32_t info = 0;
  };
  struct Symbol {
    std::string_view name;
    std::uint16_t shndx = 0;
    std::uint64_t value = 0;
    std::uint64_t size = 0;
  };
  struct Reloc {
    std::uint64_t offset = 0;  // in the section it applies to
    std::uint32_t symbol = 0;
    std::int64_t addend = 0;
  };

  static constexpr std::uint32_t kSymtab = 2;
  static constexpr std::uint32_t kRela = 4;
  static constexpr std::uint32_t kNobits = 8;
  static constexpr std::uint32_t kRel = 9;
  static constexpr std::uint16_t kLoReserve = 0xff00;

  static Result<Elf> parse(std::string_view bytes) {
    Elf elf(bytes);
    if (!starts_with_bytes(bytes, kElfMagic) || bytes.size() < 52) {
      return unreadable("it is not an ELF object");
    }
    const auto cls = static_cast<std::uint8_t>(bytes[4]);
    const auto data = static_cast<std::uint8_t>(bytes[5]);
    if ((cls != 1 && cls != 2) || (data != 1 && data != 2)) {
      return unreadable("its ELF header names no known class or byte order");
    }
    elf.wide_ = cls == 2;
    elf.big_ = data == 2;
    if (elf.u16(16) != 1) {
      return unreadable("it is an ELF file but not a relocatable object (ET_REL), as modules are");
    }
    const std::uint64_t shoff = elf.wide_ ? elf.u64(0x28) : elf.u32(0x20);
    const std::uint16_t shentsize = elf.u16(elf.wide_ ? 0x3a : 0x2e);
    const std::uint16_t shnum = elf.u16(elf.wide_ ? 0x3c : 0x30);
    if (shentsize != (elf.wide_ ? 64U : 40U) || shnum == 0 ||
        !elf.inside(shoff, std::uint64_t{shnum} * shentsize)) {
      return unreadable("its section headers are missing or cut short");
    }
    for (std::uint16_t i = 0; i < shnum; ++i) {
      const std::uint64_t at = shoff + std::uint64_t{i} * shentsize;
      Section s;
      s.name = elf.u32(at);
      s.type = elf.u32(at + 4);
      s.offset = elf.wide_ ? elf.u64(at + 24) : elf.u32(at + 16);
      s.size = elf.wide_ ? elf.u64(at + 32) : elf.u32(at + 20);
      s.link = elf.u32(at + (elf.wide_ ? 40U : 24U));
      s.info = elf.u32(at + (elf.wide_ ? 44U : 28U));
      if (s.type != kNobits && !elf.inside(s.offset, s.size)) {
        return unreadable(fmt::format("its section {} lies beyond the end of the file", i));
      }
      elf.sections_.push_back(s);
    }
    for (std::size_t i = 0; i < elf.sections_.size(); ++i) {
      if (elf.sections_[i].type == kSymtab) {
        elf.symtab_ = i;
      }
    }
    if (elf.symtab_ == 0 || elf.sections_[elf.symtab_].link >= elf.sections_.size()) {
      return unreadable("it has no symbol table");
    }
    return elf;
  }

  [[nodiscard]] bool wide() const { return wide_; }
  [[nodiscard]] std::uint64_t pointer_size() const { return wide_ ? 8 : 4; }
  [[nodiscard]] const std::vector<Section> &sections() const { return sections_; }

  [[nodiscard]] std::size_t symbol_count() const {
    return static_cast<std::size_t>(sections_[symtab_].size / (wide_ ? 24U : 16U));
  }

  [[nodiscard]] Symbol symbol(std::size_t index) const {
    const std::uint64_t at = sections_[symtab_].offset + index * (wide_ ? 24U : 16U);
    Symbol s;
    s.name = string_at(sections_[symtab_].link, u32(at));
    s.shndx = u16(at + (wide_ ? 6U : 14U));
    s.value = wide_ ? u64(at + 8) : u32(at + 4);
    s.size = wide_ ? u64(at + 16) : u32(at + 8);
    return s;
  }

  // The NUL-terminated string at `offset` in section `index` ("" where there is none).
  [[nodiscard]] std::string_view string_at(std::size_t index, std::uint64_t offset) const {
    if (index == 0 || index >= sections_.size() || sections_[index].type == kNobits ||
        offset >= sections_[index].size) {
      return {};
    }
    const auto &s = sections_[index];
    const std::string_view text = bytes_.substr(s.offset + offset, s.size - offset);
    const auto end = text.find('\0');
    return end == std::string_view::npos ? std::string_view{} : text.substr(0, end);
  }

  // The relocations of REL and RELA sections that apply to section `target`.
  [[nodiscard]] std::vector<Reloc> relocations(std::size_t target) const {
    std::vector<Reloc> out;
    for (const auto &s : sections_) {
      if ((s.type != kRela && s.type != kRel) || s.info != target || s.link != symtab_) {
        continue;
      }
      const bool rela = s.type == kRela;
      const std::uint64_t entry = std::uint64_t{wide_ ? 8U : 4U} * (rela ? 3U : 2U);
      for (std::uint64_t at = s.offset; at + entry <= s.offset + s.size; at += entry) {
        Reloc r;
        r.offset = wide_ ? u64(at) : u32(at);
        const std::uint64_t info = wide_ ? u64(at + 8) : u32(at + 4);
        r.symbol = static_cast<std::uint32_t>(wide_ ? info >> 32U : info >> 8U);
        if (rela) {
          r.addend = static_cast<std::int64_t>(wide_ ? u64(at + 16) : u32(at + 8));
          if (!wide_) {
            r.addend = static_cast<std::int32_t>(static_cast<std::uint32_t>(r.addend));
          }
        } else {
          r.addend = implicit_addend(target, r.offset);
        }
        out.push_back(r);
      }
    }
    return out;
  }

  // The string a pointer relocation points at ("" where it is not a string in the file).
  [[nodiscard]] std::string_view pointee(const Reloc &r) const {
    if (r.symbol == 0 || r.symbol >= symbol_count()) {
      return {};
    }
    const Symbol s = symbol(r.symbol);
    if (s.shndx == 0 || s.shndx >= kLoReserve) {
      return {};
    }
    return string_at(s.shndx, s.value + static_cast<std::uint64_t>(r.addend));
  }

  // Three u32 at `offset` of section `index`, if the file holds them.
  [[nodiscard]] std::optional<TargetVersion> version_at(std::size_t index,
                                                        std::uint64_t offset) const {
    const auto &s = sections_[index];
    if (s.type == kNobits || offset > s.size || s.size - offset < 12) {
      return std::nullopt;
    }
    const std::uint64_t at = s.offset + offset;
    return TargetVersion{u32(at), u32(at + 4), u32(at + 8)};
  }

 private:
  explicit Elf(std::string_view bytes) : bytes_(bytes) {}

  [[nodiscard]] bool inside(std::uint64_t offset, std::uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }

  // An unsigned number of `width` bytes at `offset`, in the file's byte order (0 beyond the
  // end: every caller has checked the range it reads, this is only a last guard).
  [[nodiscard]] std::uint64_t number(std::uint64_t offset, unsigned width) const {
    if (!inside(offset, width)) {
      return 0;
    }
    std::uint64_t value = 0;
    for (unsigned i = 0; i < width; ++i) {
      const unsigned index = big_ ? i : width - 1 - i;
      value = (value << 8U) | static_cast<std::uint8_t>(bytes_[offset + index]);
    }
    return value;
  }
  [[nodiscard]] std::uint16_t u16(std::uint64_t offset) const {
    return static_cast<std::uint16_t>(number(offset, 2));
  }
  [[nodiscard]] std::uint32_t u32(std::uint64_t offset) const {
    return static_cast<std::uint32_t>(number(offset, 4));
  }
  [[nodiscard]] std::uint64_t u64(std::uint64_t offset) const { return number(offset, 8); }

  // REL keeps the addend in the field being relocated.
  [[nodiscard]] std::int64_t implicit_addend(std::size_t target, std::uint64_t offset) const {
    const auto &s = sections_[target];
    if (s.type == kNobits || offset > s.size || s.size - offset < pointer_size()) {
      return 0;
    }
    const std::uint64_t at = s.offset + offset;
    return wide_ ? static_cast<std::int64_t>(u64(at)) : static_cast<std::int32_t>(u32(at));
  }

  std::string_view bytes_;
  bool wide_ = true;
  bool big_ = false;
  std::vector<Section> sections_;
  std::size_t symtab_ = 0;
};

// struct target_type { u64 features; const char *name; struct module *module;
// unsigned version[3]; ... }: the fields' offsets from the start of the struct.
constexpr std::uint64_t kNameField = 8;

// The version of the target_type at `base` in section `index`, once its name is "crypt".
Result<TargetVersion> version_of(const Elf &elf, std::size_t index, std::uint64_t base,
                                 const std::vector<Elf::Reloc> &relocs) {
  const std::uint64_t name_at = base + kNameField;
  std::string_view name;
  bool found = false;
  for (const auto &r : relocs) {
    if (r.offset == name_at) {
      name = elf.pointee(r);
      found = true;
    }
  }
  if (!found) {
    return unreadable(
        "crypt_target's name field has no relocation: not the struct target_type this reads");
  }
  if (name != "crypt") {
    return unreadable(fmt::format(
        "crypt_target's name field points at '{}', not \"crypt\": not the struct target_type "
        "this reads",
        name));
  }
  const auto version = elf.version_at(index, name_at + 2 * elf.pointer_size());
  if (!version) {
    return unreadable("crypt_target's version field lies beyond its section");
  }
  return *version;
}

}  // namespace

Result<TargetVersion> crypt_version_in_module(std::string_view bytes) {
  std::string unpacked;
  if (starts_with_bytes(bytes, kXzMagic) || starts_with_bytes(bytes, kZstdMagic)) {
    auto plain = starts_with_bytes(bytes, kXzMagic) ? unpack_xz(bytes) : unpack_zstd(bytes);
    if (!plain) {
      return plain.error();
    }
    unpacked = std::move(plain.value());
    bytes = unpacked;
  }
  const auto elf = Elf::parse(bytes);
  if (!elf) {
    return elf.error();
  }
  for (std::size_t i = 1; i < elf->symbol_count(); ++i) {
    const auto symbol = elf->symbol(i);
    if (symbol.name != "crypt_target") {
      continue;
    }
    if (symbol.shndx == 0 || symbol.shndx >= Elf::kLoReserve ||
        symbol.shndx >= elf->sections().size()) {
      return unreadable("its crypt_target symbol is not defined in a section");
    }
    return version_of(*elf, symbol.shndx, symbol.value, elf->relocations(symbol.shndx));
  }
  // No symbol of that name (a stripped or renamed object): a pointer to "crypt" followed,
  // one pointer later, by one to __this_module, as THIS_MODULE sits after the name.
  std::optional<std::pair<std::size_t, std::uint64_t>> candidate;
  for (std::size_t index = 1; index < elf->sections().size(); ++index) {
    const auto relocs = elf->relocations(index);
    for (const auto &name : relocs) {
      if (elf->pointee(name) != "crypt" || name.offset < kNameField) {
        continue;
      }
      for (const auto &owner : relocs) {
        if (owner.offset == name.offset + elf->pointer_size() && owner.symbol != 0 &&
            owner.symbol < elf->symbol_count() &&
            elf->symbol(owner.symbol).name == "__this_module") {
          if (candidate) {
            return unreadable(
                "it has no crypt_target symbol and more than one structure named \"crypt\"");
          }
          candidate.emplace(index, name.offset - kNameField);
        }
      }
    }
  }
  if (!candidate) {
    return unreadable("it has no crypt_target symbol and no target named \"crypt\"");
  }
  return version_of(*elf, candidate->first, candidate->second, elf->relocations(candidate->first));
}

Result<InTreeCrypt> in_tree_crypt(const std::filesystem::path &modules_root,
                                  std::string_view release) {
  // uname -r's words: printable ASCII, no blank; a name of one directory under the root.
  const bool printable_word =
      std::all_of(release.begin(), release.end(), [](char c) { return c > ' ' && c < '\x7f'; });
  if (release.empty() || release == "." || release == ".." || !printable_word ||
      release.find('/') != std::string_view::npos) {
    return make_error(Errc::invalid_argument,
                      fmt::format("'{}' is not a kernel release: give one as uname -r prints it "
                                  "(a directory name under {})",
                                  printable(release), printable(modules_root.string())));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(modules_root / release, ec)) {
    return make_error(
        Errc::invalid_argument,
        fmt::format("no kernel {} under {}: give a release that is installed, as "
                    "ls {} lists them",
                    release, printable(modules_root.string()), printable(modules_root.string())));
  }
  InTreeCrypt found;
  found.release = std::string(release);
  const auto kernel = modules_root / found.release;
  const auto md = kernel / "kernel" / "drivers" / "md";
  for (const char *suffix : {"", ".xz", ".zst"}) {
    auto file = md / (std::string("dm-crypt.ko") + suffix);
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      continue;
    }
    found.file = std::move(file);
    const auto bytes = read_bounded(in);
    if (!bytes) {
      found.state = InTreeState::unreadable;
      found.why = "it cannot be read";
      return found;
    }
    if (bytes->size() > kMaxModuleBytes) {
      found.state = InTreeState::unreadable;
      found.why = fmt::format("it is larger than {} MiB, which no dm-crypt module is",
                              kMaxModuleBytes >> 20U);
      return found;
    }
    const auto version = crypt_version_in_module(*bytes);
    if (version) {
      found.state = InTreeState::module;
      found.version = *version;
    } else {
      found.state = InTreeState::unreadable;
      found.why = version.error().message;
    }
    return found;
  }
  std::ifstream builtin_file(kernel / "modules.builtin", std::ios::binary);
  const auto builtin_text = read_bounded(builtin_file);
  std::istringstream builtin(
      builtin_text && builtin_text->size() <= kMaxModuleBytes ? *builtin_text : std::string());
  for (std::string line; std::getline(builtin, line);) {
    if (line == "kernel/drivers/md/dm-crypt.ko") {
      found.state = InTreeState::built_in;
      found.file = kernel / "modules.builtin";
      return found;
    }
  }
  found.state = InTreeState::missing;
  found.file = md;
  return found;
}

bool enough_to_hand_over(const InTreeCrypt &in_tree) {
  return in_tree.state == InTreeState::module && in_tree.version &&
         *in_tree.version >= kLargeSectorVersion;
}

std::string describe(const InTreeCrypt &in_tree) {
  const std::string need = to_string(kLargeSectorVersion);
  const std::string file = printable(in_tree.file.string());  // a --modules-dir as given
  const std::string ours =
      fmt::format("dm_crypt_lbs serves crypt there (sector sizes above 4096 need v{})", need);
  switch (in_tree.state) {
    case InTreeState::module:
      if (enough_to_hand_over(in_tree)) {
        return fmt::format(
            "kernel {}: its own dm_crypt is crypt v{} ({}): enough to hand over, it serves "
            "crypt there and dm_crypt_lbs is not needed",
            in_tree.release, to_string(*in_tree.version), file);
      }
      return fmt::format("kernel {}: its own dm_crypt is crypt v{} ({}), below v{}: {}",
                         in_tree.release, to_string(*in_tree.version), file, need, ours);
    case InTreeState::built_in:
      return fmt::format(
          "kernel {}: its dm_crypt is built in ({}), its version cannot be read from a file: {}",
          in_tree.release, file, ours);
    case InTreeState::missing:
      return fmt::format("kernel {}: no dm-crypt.ko, .ko.xz or .ko.zst in {}: {}", in_tree.release,
                         file, ours);
    case InTreeState::unreadable:
      return fmt::format("kernel {}: the version of {} cannot be read ({}): {}", in_tree.release,
                         file, in_tree.why, ours);
  }
  return {};
}

const char *to_string(InTreeState state) {
  switch (state) {
    case InTreeState::module:
      return "module";
    case InTreeState::built_in:
      return "built_in";
    case InTreeState::missing:
      return "missing";
    case InTreeState::unreadable:
      return "unreadable";
  }
  return "unknown";
}

}  // namespace lbscrypt
