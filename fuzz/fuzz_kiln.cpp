// .kiln container reader on arbitrary bytes: open, then walk the sections and the tensors,
// touching every byte the reader handed out.
//
// Each input is tried twice: as it is (which mostly exercises the checksum checks), and
// "resealed", with every checksum the input's own table describes recomputed, so that the
// mutations reach the section table and tensor table parsers behind the checksums.
#include <cstdint>
#include <cstring>
#include <vector>

#include "artifact/kiln_file.h"

namespace {

uint64_t load64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void reseal(std::vector<uint8_t>& b) {
  if (b.size() < kiln::kKilnHeaderSize) return;
  uint32_t n;
  std::memcpy(&n, b.data() + 216, 4);
  if (n > kiln::kKilnMaxSections) return;
  const size_t table_end = kiln::kKilnHeaderSize + size_t{n} * kiln::kKilnSectionEntrySize;
  if (table_end + 8 > b.size()) return;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t e = kiln::kKilnHeaderSize + size_t{i} * kiln::kKilnSectionEntrySize;
    const uint64_t off = load64(b, e + 8), size = load64(b, e + 16);
    if (off > b.size() || size > b.size() - off) continue;
    const uint64_t sum = kiln::kiln_checksum(std::span<const uint8_t>(b).subspan(off, size));
    std::memcpy(b.data() + e + 24, &sum, 8);
  }
  const uint64_t sum = kiln::kiln_checksum(std::span<const uint8_t>(b).first(table_end));
  std::memcpy(b.data() + table_end, &sum, 8);
}

void walk(std::vector<uint8_t> bytes) {
  auto file = kiln::MappedFile::from_bytes(std::move(bytes), "fuzz.kiln");
  for (bool verify : {false, true}) {  // as a runtime opens it (weights unchecked), and fully
    kiln::KilnOpenOptions options;
    options.verify_checksums = verify;
    auto f = kiln::open_kiln_bytes(file, options);
    if (!f) continue;
    const kiln::KilnFile& k = **f;
    uint64_t sum = 0;
    for (const auto& s : k.sections())
      for (uint8_t b : k.section(static_cast<kiln::KilnSection>(s.kind))) sum += b;
    for (const kiln::KilnTensor& t : k.tensors()) {
      if (k.tensor(t.name) != &t) __builtin_trap();  // names are unique and found
      for (int64_t d : t.dims) sum += static_cast<uint64_t>(d);
      for (uint8_t b : t.bytes) sum += b;
    }
    (void)k.verify();
    volatile uint64_t sink = sum;
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  walk(bytes);
  reseal(bytes);
  walk(std::move(bytes));
  return 0;
}
