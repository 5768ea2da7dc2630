// The .kiln container: round trips, alignment, determinism, atomic writes and every class of
// malformed file (each with an error naming the file, the place and the problem).
#include "artifact/kiln_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh, empty folder for one test.
std::string fresh_dir(const std::string& name) {
  const std::string d = test::temp_dir() + "/kiln_file_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A writer with every kind of section and tensors of awkward sizes, copied and filled.
KilnWriter sample_writer(KilnTarget target = {"cpu", 0b11, "avx2,fma"}) {
  KilnWriter w(std::move(target), "kiln 0.1.0");
  EXPECT_TRUE(w.add_section(KilnSection::kConfig, text("{\"dim\": 8}")));
  EXPECT_TRUE(w.add_section(KilnSection::kTokenizer, pattern(300, 1)));
  EXPECT_TRUE(w.add_section(KilnSection::kProgram, pattern(129, 2)));
  EXPECT_TRUE(w.add_section(KilnSection::kMemoryPlan, pattern(64, 3)));
  EXPECT_TRUE(w.add_section(KilnSection::kQuantRecord, text("w4a16")));
  EXPECT_TRUE(w.add_tensor("tok_embeddings.weight", 7, {16, 8}, pattern(1000, 4)));
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", 9, {8, 8}, 130, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(255 - i);
    return Status::ok();
  }));
  EXPECT_TRUE(w.add_tensor("scalar", 1, {}, pattern(4, 5)));
  EXPECT_TRUE(w.add_tensor("empty", 1, {0, 8}, Bytes{}));
  EXPECT_TRUE(w.add_tensor("output_norm.weight", 0, {8}, pattern(32, 6)));
  return w;
}

Bytes sample_bytes(const std::string& name) {
  const std::string path = test::temp_dir() + "/" + name;
  Status st = sample_writer().write(path);
  EXPECT_TRUE(st) << st.message();
  return read_bytes(path);
}

Result<std::shared_ptr<const KilnFile>> open_mem(Bytes b, KilnOpenOptions o = {}) {
  return open_kiln_bytes(MappedFile::from_bytes(std::move(b), "mem.kiln"), o);
}

uint32_t get_u32(const Bytes& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t get_u64(const Bytes& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void set_u32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void set_u64(Bytes& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

uint32_t section_count(const Bytes& b) { return get_u32(b, 216); }
size_t entry_at(size_t i) { return kKilnHeaderSize + i * kKilnSectionEntrySize; }

size_t entry_of(const Bytes& b, KilnSection kind) {
  for (size_t i = 0; i < section_count(b); ++i)
    if (get_u32(b, entry_at(i)) == static_cast<uint32_t>(kind)) return i;
  ADD_FAILURE() << "no section " << kiln_section_name(kind);
  return 0;
}

// Recomputes the header checksum after a test edited the header or the table.
void reseal_header(Bytes& b) {
  const size_t end = entry_at(section_count(b));
  set_u64(b, end, kiln_checksum(std::span<const uint8_t>(b).first(end)));
}

// Recomputes one section's checksum (and then the header's) after a test edited the section.
void reseal_section(Bytes& b, KilnSection kind) {
  const size_t e = entry_at(entry_of(b, kind));
  const uint64_t off = get_u64(b, e + 8), size = get_u64(b, e + 16);
  set_u64(b, e + 24, kiln_checksum(std::span<const uint8_t>(b).subspan(off, size)));
  reseal_header(b);
}

// Where tensor `index`'s fields lie in the file: name, offset field.
struct EntryPos {
  size_t name = 0;
  size_t offset_field = 0;
};
EntryPos tensor_entry(const Bytes& b, size_t index) {
  size_t p = get_u64(b, entry_at(entry_of(b, KilnSection::kTensorTable)) + 8) + 8;
  for (size_t i = 0;; ++i) {
    EntryPos e;
    const uint32_t name_len = get_u32(b, p);
    e.name = p + 4;
    p += 4 + name_len + 4;  // name length, name, code
    const uint32_t n_dims = get_u32(b, p);
    p += 4 + 8 * n_dims;
    e.offset_field = p;
    p += 16;
    if (i == index) return e;
  }
}

void expect_error(const Result<std::shared_ptr<const KilnFile>>& r, const std::string& problem) {
  ASSERT_FALSE(r) << "accepted; expected: " << problem;
  const std::string& m = r.status().message();
  EXPECT_EQ(m.rfind("mem.kiln: ", 0), 0u) << "does not name the file: " << m;
  EXPECT_NE(m.find(problem), std::string::npos) << "does not say '" << problem << "': " << m;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- round trip and layout ----

TEST(KilnFile, RoundTrip) {
  const std::string path = test::temp_dir() + "/roundtrip.kiln";
  ASSERT_TRUE(sample_writer().write(path));
  auto f = open_kiln(path);
  ASSERT_TRUE(f) << f.status().message();
  const KilnFile& k = **f;
  EXPECT_EQ(k.format_version(), kKilnFormatVersion);
  EXPECT_EQ(k.writer_version(), "kiln 0.1.0");
  EXPECT_EQ(k.target().backend, "cpu");
  EXPECT_EQ(k.target().cpu_features, 0b11u);
  EXPECT_EQ(k.target().cpu_feature_names, "avx2,fma");
  EXPECT_EQ(k.file_size(), fs::file_size(path));

  auto sec = [&](KilnSection s) { return Bytes(k.section(s).begin(), k.section(s).end()); };
  EXPECT_EQ(sec(KilnSection::kConfig), text("{\"dim\": 8}"));
  EXPECT_EQ(sec(KilnSection::kTokenizer), pattern(300, 1));
  EXPECT_EQ(sec(KilnSection::kProgram), pattern(129, 2));
  EXPECT_EQ(sec(KilnSection::kMemoryPlan), pattern(64, 3));
  EXPECT_EQ(sec(KilnSection::kQuantRecord), text("w4a16"));
  EXPECT_EQ(k.sections().size(), 7u);

  ASSERT_EQ(k.tensors().size(), 5u);
  const std::vector<std::string> names = {"tok_embeddings.weight", "blk.0.attn_q.weight", "scalar", "empty",
                                          "output_norm.weight"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(k.tensors()[i].name, names[i]);  // insertion order

  const KilnTensor* e = k.tensor("tok_embeddings.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, 7u);
  EXPECT_EQ(e->dims, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(Bytes(e->bytes.begin(), e->bytes.end()), pattern(1000, 4));

  const KilnTensor* q = k.tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->code, 9u);
  ASSERT_EQ(q->bytes.size(), 130u);
  for (size_t i = 0; i < 130; ++i) ASSERT_EQ(q->bytes[i], static_cast<uint8_t>(255 - i));

  EXPECT_TRUE(k.tensor("scalar")->dims.empty());
  EXPECT_EQ(k.tensor("empty")->bytes.size(), 0u);
  EXPECT_EQ(k.tensor("empty")->dims, (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(k.tensor("nope"), nullptr);
  EXPECT_TRUE(k.verify()) << k.verify().message();
}

TEST(KilnFile, TensorsPointIntoTheMap) {
  const std::string path = test::temp_dir() + "/inmap.kiln";
  ASSERT_TRUE(sample_writer().write(path));
  auto f = open_kiln(path);
  ASSERT_TRUE(f);
  const auto map = (*f)->file()->bytes();
  for (const KilnTensor& t : (*f)->tensors()) {
    EXPECT_GE(t.bytes.data(), map.data());
    EXPECT_LE(t.bytes.data() + t.bytes.size(), map.data() + map.size());
  }
}

TEST(KilnFile, Alignment) {
  const Bytes b = sample_bytes("align.kiln");
  auto f = open_mem(b);
  ASSERT_TRUE(f) << f.status().message();
  for (const KilnSectionInfo& s : (*f)->sections()) {
    EXPECT_EQ(s.offset % 128, 0u) << kiln_section_name(s.kind);
    if (s.kind == static_cast<uint32_t>(KilnSection::kWeights)) {
      EXPECT_EQ(s.offset % 16384, 0u);
    }
  }
  const uint8_t* base = (*f)->file()->data();
  for (const KilnTensor& t : (*f)->tensors()) {
    EXPECT_EQ(t.offset % 128, 0u) << t.name;
    EXPECT_EQ(static_cast<size_t>(t.bytes.data() - base) % 128, 0u) << t.name;
  }
  // The weights come last, so that opening touches only the pages before them.
  const auto& secs = (*f)->sections();
  EXPECT_EQ(secs.back().kind, static_cast<uint32_t>(KilnSection::kWeights));
}

TEST(KilnFile, SameInputsGiveTheSameBytes) {
  const Bytes a = sample_bytes("det_a.kiln");
  const Bytes b = sample_bytes("det_b.kiln");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  // Sections added in another order: the file is the same, they are written in kind order.
  KilnWriter w({"cpu", 0b11, "avx2,fma"}, "kiln 0.1.0");
  ASSERT_TRUE(w.add_section(KilnSection::kQuantRecord, text("w4a16")));
  ASSERT_TRUE(w.add_section(KilnSection::kMemoryPlan, pattern(64, 3)));
  ASSERT_TRUE(w.add_section(KilnSection::kProgram, pattern(129, 2)));
  ASSERT_TRUE(w.add_section(KilnSection::kTokenizer, pattern(300, 1)));
  ASSERT_TRUE(w.add_section(KilnSection::kConfig, text("{\"dim\": 8}")));
  ASSERT_TRUE(w.add_tensor("tok_embeddings.weight", 7, {16, 8}, pattern(1000, 4)));
  Bytes q(130);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(255 - i);
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight", 9, {8, 8}, q));  // copied instead of filled
  ASSERT_TRUE(w.add_tensor("scalar", 1, {}, pattern(4, 5)));
  ASSERT_TRUE(w.add_tensor("empty", 1, {0, 8}, Bytes{}));
  ASSERT_TRUE(w.add_tensor("output_norm.weight", 0, {8}, pattern(32, 6)));
  const std::string path = test::temp_dir() + "/det_c.kiln";
  ASSERT_TRUE(w.write(path));
  EXPECT_EQ(read_bytes(path), a);
}

TEST(KilnFile, EmptyAndUnknownSections) {
  const std::string path = test::temp_dir() + "/bare.kiln";
  KilnWriter w({"cpu", 0, ""}, "");
  ASSERT_TRUE(w.add_section(static_cast<KilnSection>(42), pattern(10, 9)));  // a kind added later
  ASSERT_TRUE(w.add_section(KilnSection::kConfig, Bytes{}));
  ASSERT_TRUE(w.write(path));
  auto f = open_kiln(path, {.verify_checksums = true});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)->section(static_cast<KilnSection>(42)).size(), 10u);
  EXPECT_TRUE((*f)->has_section(KilnSection::kConfig));
  EXPECT_TRUE((*f)->section(KilnSection::kConfig).empty());
  EXPECT_FALSE((*f)->has_section(KilnSection::kWeights));
  EXPECT_TRUE((*f)->section(KilnSection::kProgram).empty());
  EXPECT_TRUE((*f)->tensors().empty());
  EXPECT_EQ((*f)->writer_version(), "");
}

TEST(KilnFile, ProgressGoesFromZeroToOne) {
  std::vector<double> seen;
  ASSERT_TRUE(sample_writer().write(test::temp_dir() + "/progress.kiln", [&](double p) { seen.push_back(p); }));
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
}

TEST(KilnFile, CommittedFuzzSeedOpens) {
  // fuzz/corpus/kiln/seed.kiln must follow the current format version.
  auto f = open_kiln(std::string(KILN_MODELS_DIR) + "/../fuzz/corpus/kiln/seed.kiln", {.verify_checksums = true});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_FALSE((*f)->tensors().empty());
}

// Pages of [p, p + n) in the page cache.
size_t resident_pages(const uint8_t* p, size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t len = reinterpret_cast<uintptr_t>(p) + n - start;
  std::vector<unsigned char> vec((len + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(start), len, vec.data()) != 0) return SIZE_MAX;
  return static_cast<size_t>(std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
}

// Opening is a map and a check: the weights' pages are not read (cold start does no per-weight work).
TEST(KilnFile, OpenDoesNotReadTheWeights) {
  if (test::under_emulator()) GTEST_SKIP() << "page residency is not observable under an emulator";
  const std::string path = test::temp_dir() + "/cold.kiln";
  const uint64_t big = 8u << 20;
  KilnWriter w = sample_writer();
  ASSERT_TRUE(w.add_tensor("big", 0, {static_cast<int64_t>(big)}, big, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); i += 4096) out[i] = static_cast<uint8_t>(i >> 12);
    return Status::ok();
  }));
  ASSERT_TRUE(w.write(path));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);

  // Map it with read-around off, so that the pages found in the cache afterwards are the pages
  // the reader touched (the kernel's read-ahead would otherwise fetch megabytes around each).
  auto mapped = MappedFile::open(path);
  ASSERT_TRUE(mapped);
  ASSERT_EQ(madvise(const_cast<uint8_t*>((*mapped)->data()), (*mapped)->size(), MADV_RANDOM), 0);
  if (resident_pages((*mapped)->data(), (*mapped)->size()) != 0)
    GTEST_SKIP() << "this file system keeps the file cached (tmpfs?): cannot see which pages are read";

  auto f = open_kiln_bytes(*mapped);
  ASSERT_TRUE(f) << f.status().message();
  const auto weights = (*f)->section(KilnSection::kWeights);
  ASSERT_GT(weights.size(), big);
  const size_t before = resident_pages((*mapped)->data(), (*mapped)->size() - weights.size());
  EXPECT_GT(before, 0u);   // the header, the table and the small sections were read
  EXPECT_LE(before, 4u);   // and they fit in a few pages
  EXPECT_EQ(resident_pages(weights.data(), weights.size()), 0u) << "weight pages were read at open";

  ASSERT_TRUE((*f)->verify());  // reads them all
  const size_t pages = (weights.size() + static_cast<size_t>(sysconf(_SC_PAGESIZE)) - 1) /
                       static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_pages(weights.data(), weights.size()), pages);
}

// ---- damage ----

TEST(KilnFile, FlippedByteInEachSectionIsCaught) {
  const Bytes good = sample_bytes("flip.kiln");
  ASSERT_TRUE(open_mem(good, {.verify_checksums = true}));
  for (size_t i = 0; i < section_count(good); ++i) {
    const uint32_t kind = get_u32(good, entry_at(i));
    const uint64_t off = get_u64(good, entry_at(i) + 8), size = get_u64(good, entry_at(i) + 16);
    ASSERT_GT(size, 0u);
    for (uint64_t at : {off, off + size / 2, off + size - 1}) {
      Bytes b = good;
      b[at] ^= 0x10;
      const std::string name = kiln_section_name(kind);
      SCOPED_TRACE(name + " byte " + std::to_string(at));
      expect_error(open_mem(b, {.verify_checksums = true}), "section '" + name + "'");
      if (kind == static_cast<uint32_t>(KilnSection::kWeights)) {
        // Opening does not read the weights; verify() does.
        auto f = open_mem(b);
        ASSERT_TRUE(f) << f.status().message();
        Status st = (*f)->verify();
        ASSERT_FALSE(st);
        EXPECT_NE(st.message().find("section 'weights'"), std::string::npos) << st.message();
        EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.message();
      } else {
        expect_error(open_mem(b), "checksum mismatch");
      }
    }
  }
}

TEST(KilnFile, FlippedByteInHeaderOrPaddingIsCaught) {
  const Bytes good = sample_bytes("flip_header.kiln");
  for (size_t at : {size_t{20}, size_t{100}, entry_at(2) + 9, entry_at(section_count(good)) + 3}) {
    Bytes b = good;
    b[at] ^= 1;
    expect_error(open_mem(b), "header checksum mismatch");
  }
  // Padding between the header and the first section, and before the weights.
  const uint64_t first = get_u64(good, entry_at(0) + 8);
  const uint64_t weights = get_u64(good, entry_at(entry_of(good, KilnSection::kWeights)) + 8);
  for (uint64_t at : {first - 1, weights - 1}) {
    Bytes b = good;
    b[at] = 0x55;
    expect_error(open_mem(b), "offset " + std::to_string(at) + ": padding byte");
  }
}

TEST(KilnFile, Truncated) {
  const Bytes good = sample_bytes("trunc.kiln");
  for (size_t n : {size_t{0}, size_t{5}}) expect_error(open_mem(Bytes(good.begin(), good.begin() + n)), "not a .kiln file");
  expect_error(open_mem(Bytes(good.begin(), good.begin() + 10)), "truncated");
  expect_error(open_mem(Bytes(good.begin(), good.begin() + 100)), "truncated");
  for (size_t n : {size_t{240}, size_t{600}, good.size() / 2, good.size() - 1})
    expect_error(open_mem(Bytes(good.begin(), good.begin() + static_cast<ptrdiff_t>(n))),
                 "truncated: the header says " + std::to_string(good.size()) + " bytes, the file has " +
                     std::to_string(n));
  Bytes longer = good;
  longer.push_back(0);
  expect_error(open_mem(longer), "trailing bytes");
}

TEST(KilnFile, BadMagic) {
  Bytes b = sample_bytes("magic.kiln");
  b[0] = 'G';
  expect_error(open_mem(b), "offset 0: not a .kiln file (bad magic)");
}

TEST(KilnFile, OtherFormatVersion) {
  Bytes b = sample_bytes("version.kiln");
  set_u32(b, 8, 2);
  reseal_header(b);
  auto r = open_mem(b);
  expect_error(r, "format version 2, this kiln reads 1: recompile it with `kiln compile`");
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(KilnFile, SectionPastTheEnd) {
  Bytes b = sample_bytes("pastend.kiln");
  const size_t e = entry_at(entry_of(b, KilnSection::kProgram));
  set_u64(b, e + 8, (b.size() + 128) / 128 * 128);
  reseal_header(b);
  expect_error(open_mem(b), "section 'program'): bytes [");
  expect_error(open_mem(b), "run past the end of the file");

  Bytes c = sample_bytes("pastend2.kiln");
  const size_t w = entry_at(entry_of(c, KilnSection::kWeights));
  set_u64(c, w + 16, ~0ull - 5);  // offset + size overflows
  reseal_header(c);
  expect_error(open_mem(c), "run past the end of the file");
}

TEST(KilnFile, OverlappingSections) {
  Bytes b = sample_bytes("overlap.kiln");
  const size_t tok = entry_at(entry_of(b, KilnSection::kTokenizer));
  const size_t prog = entry_at(entry_of(b, KilnSection::kProgram));
  set_u64(b, prog + 8, get_u64(b, tok + 8) + 128);  // inside the 300-byte tokenizer
  reseal_header(b);
  expect_error(open_mem(b), "overlap");
}

TEST(KilnFile, MisalignedOrMisplacedSections) {
  Bytes b = sample_bytes("misaligned.kiln");
  const size_t w = entry_at(entry_of(b, KilnSection::kWeights));
  set_u64(b, w + 8, get_u64(b, w + 8) - 128);
  reseal_header(b);
  expect_error(open_mem(b), "section 'weights'): offset");
  expect_error(open_mem(b), "is not a multiple of 16384");

  Bytes c = sample_bytes("inheader.kiln");
  set_u64(c, entry_at(0) + 8, 128);
  reseal_header(c);
  expect_error(open_mem(c), "lies inside the header");

  Bytes d = sample_bytes("dupkind.kiln");
  set_u32(d, entry_at(1), get_u32(d, entry_at(0)));
  reseal_header(d);
  expect_error(open_mem(d), "a second section of this kind");

  Bytes e = sample_bytes("toomany.kiln");
  set_u32(e, 216, 1000000);
  expect_error(open_mem(e), "section count 1000000 exceeds 64");
}

TEST(KilnFile, TensorOutsideTheWeights) {
  Bytes b = sample_bytes("tensor_out.kiln");
  const uint64_t wsize = get_u64(b, entry_at(entry_of(b, KilnSection::kWeights)) + 16);
  set_u64(b, tensor_entry(b, 4).offset_field, (wsize + 127) / 128 * 128);
  reseal_section(b, KilnSection::kTensorTable);
  expect_error(open_mem(b), "tensor 'output_norm.weight': bytes [");
  expect_error(open_mem(b), "lie outside the weights section");

  Bytes c = sample_bytes("tensor_size.kiln");
  set_u64(c, tensor_entry(c, 0).offset_field + 8, ~0ull);  // size
  reseal_section(c, KilnSection::kTensorTable);
  expect_error(open_mem(c), "tensor 'tok_embeddings.weight': bytes [0, +18446744073709551615) lie outside");
}

TEST(KilnFile, MisalignedAndOverlappingTensors) {
  Bytes b = sample_bytes("tensor_align.kiln");
  set_u64(b, tensor_entry(b, 1).offset_field, get_u64(b, tensor_entry(b, 1).offset_field) + 1);
  reseal_section(b, KilnSection::kTensorTable);
  expect_error(open_mem(b), "tensor 'blk.0.attn_q.weight': offset 1025 is not a multiple of 128");

  Bytes c = sample_bytes("tensor_overlap.kiln");
  set_u64(c, tensor_entry(c, 1).offset_field, 896);  // inside the 1000 bytes of tensor 0
  reseal_section(c, KilnSection::kTensorTable);
  expect_error(open_mem(c), "tensors 'tok_embeddings.weight' [0, +1000) and 'blk.0.attn_q.weight' [896, +130) overlap");
}

TEST(KilnFile, BadTensorNames) {
  Bytes b = sample_bytes("tensor_utf8.kiln");
  b[tensor_entry(b, 2).name] = 0xff;
  reseal_section(b, KilnSection::kTensorTable);
  expect_error(open_mem(b), "section 'tensor table': offset");
  expect_error(open_mem(b), "tensor 2 name is not valid UTF-8");

  Bytes c = sample_bytes("tensor_noname.kiln");
  set_u32(c, tensor_entry(c, 0).name - 4, 0);
  reseal_section(c, KilnSection::kTensorTable);
  expect_error(open_mem(c), "tensor 0 has an empty name");

  Bytes d = sample_bytes("tensor_longname.kiln");
  set_u32(d, tensor_entry(d, 0).name - 4, 0x7fffffff);
  reseal_section(d, KilnSection::kTensorTable);
  expect_error(open_mem(d), "name length 2147483647 exceeds 4096");
}

TEST(KilnFile, DuplicateTensorName) {
  const std::string path = test::temp_dir() + "/dup.kiln";
  KilnWriter w({"cpu", 0, ""}, "v");
  ASSERT_TRUE(w.add_tensor("aaaa", 0, {1}, Bytes{1}));
  ASSERT_TRUE(w.add_tensor("bbbb", 0, {1}, Bytes{2}));
  ASSERT_TRUE(w.write(path));
  Bytes b = read_bytes(path);
  std::memcpy(b.data() + tensor_entry(b, 1).name, "aaaa", 4);
  reseal_section(b, KilnSection::kTensorTable);
  expect_error(open_mem(b), "tensor 'aaaa' appears twice");
}

TEST(KilnFile, BadTensorDims) {
  Bytes b = sample_bytes("tensor_dims.kiln");
  const size_t e = tensor_entry(b, 0).name + 21 + 4;  // after the name and the code: n_dims
  ASSERT_EQ(get_u32(b, e), 2u);
  set_u64(b, e + 4, static_cast<uint64_t>(-3));
  reseal_section(b, KilnSection::kTensorTable);
  expect_error(open_mem(b), "tensor 'tok_embeddings.weight': dimension 0 is negative (-3)");

  Bytes c = sample_bytes("tensor_dims2.kiln");
  set_u64(c, e + 4, uint64_t{1} << 40);
  set_u64(c, e + 12, uint64_t{1} << 40);
  reseal_section(c, KilnSection::kTensorTable);
  expect_error(open_mem(c), "element count overflows");

  Bytes d = sample_bytes("tensor_dims3.kiln");
  set_u32(d, e, 1000000);
  reseal_section(d, KilnSection::kTensorTable);
  expect_error(open_mem(d), "1000000 dimensions, at most 8");

  Bytes f = sample_bytes("tensor_count.kiln");
  const size_t table_off = get_u64(f, entry_at(entry_of(f, KilnSection::kTensorTable)) + 8);
  set_u32(f, table_off, 0xffffffffu);
  reseal_section(f, KilnSection::kTensorTable);
  expect_error(open_mem(f), "tensor count 4294967295 exceeds the section");
}

// ---- target ----

TEST(KilnFile, MissingCpuFeaturesAreNamed) {
  const std::string path = test::temp_dir() + "/features.kiln";
  // Bits 0, 1 and 3 set: names in ascending bit order.
  ASSERT_TRUE(sample_writer({"cpu", 0b1011, "avx2,fma,avx512vnni"}).write(path));
  auto r = open_kiln(path, {.host_cpu_features = 0b0001});
  ASSERT_FALSE(r);
  const std::string& m = r.status().message();
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("(fma, avx512vnni)"), std::string::npos) << m;
  EXPECT_EQ(m.find("avx2"), std::string::npos) << m;
  EXPECT_NE(m.find("recompile it with `kiln compile --target native`"), std::string::npos) << m;

  EXPECT_TRUE(open_kiln(path, {.host_cpu_features = 0b1111}));
  EXPECT_TRUE(open_kiln(path, {.host_cpu_features = 0, .check_target = false}));
}

TEST(KilnFile, OtherBackEnd) {
  const std::string path = test::temp_dir() + "/npu.kiln";
  ASSERT_TRUE(sample_writer({"htp", 0, ""}).write(path));
  auto r = open_kiln(path, {.host_backends = {"cpu", "ref"}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("compiled for the back end 'htp', this kiln has cpu, ref"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(open_kiln(path, {.host_backends = {"cpu", "htp"}}));
  EXPECT_TRUE(open_kiln(path));
}

TEST(KilnFile, WriterChecksItsInputs) {
  const std::string dir = fresh_dir("writer_inputs");
  auto fails = [&](KilnWriter w, const std::string& problem) {
    Status st = w.write(dir + "/x.kiln");
    ASSERT_FALSE(st);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find(problem), std::string::npos) << st.message();
    EXPECT_TRUE(files_in(dir).empty());
  };
  fails(KilnWriter({"cpu", 0b111, "avx2,fma"}, "v"), "2 names for 3 feature bits");
  fails(KilnWriter({"cpu", 0b11, "avx2,,fma"}, "v"), "empty name");
  fails(KilnWriter({"", 0, ""}, "v"), "target back end is empty");
  fails(KilnWriter({std::string(40, 'x'), 0, ""}, "v"), "at most 31 fit");
  fails(KilnWriter({"cpu", 0, ""}, std::string(32, 'v')), "writer version");

  KilnWriter w({"cpu", 0, ""}, "v");
  EXPECT_TRUE(w.add_tensor("a", 0, {1}, Bytes{1}));
  EXPECT_FALSE(w.add_tensor("a", 0, {1}, Bytes{1}));  // ignored by the caller: write still fails
  fails(std::move(w), "tensor 'a' was added twice");

  KilnWriter w2({"cpu", 0, ""}, "v");
  EXPECT_FALSE(w2.add_section(KilnSection::kWeights, Bytes{1}));
  EXPECT_FALSE(w2.add_tensor("b", 0, {-1}, Bytes{}));
  EXPECT_FALSE(w2.add_tensor("", 0, {}, Bytes{}));
  EXPECT_FALSE(w2.add_tensor("\xff", 0, {}, Bytes{}));
  EXPECT_FALSE(w2.add_tensor("c", 0, std::vector<int64_t>(9, 1), Bytes{}));
  EXPECT_FALSE(w2.add_tensor("d", 0, {1}, 4, KilnFillFn{}));
  fails(std::move(w2), "written from add_tensor calls");

  KilnWriter w3({"cpu", 0, ""}, "v");
  EXPECT_TRUE(w3.add_section(KilnSection::kConfig, Bytes{1}));
  EXPECT_FALSE(w3.add_section(KilnSection::kConfig, Bytes{2}));
  fails(std::move(w3), "added twice");
}

// ---- atomic writes ----

TEST(KilnFile, MissingFolderFailsCleanly) {
  const std::string dir = fresh_dir("nofolder");
  const std::string path = dir + "/not/there/x.kiln";
  Status st = sample_writer().write(path);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.message().rfind(path + ": cannot write: ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();
  EXPECT_TRUE(files_in(dir).empty());
}

TEST(KilnFile, FailedFillLeavesNothing) {
  const std::string dir = fresh_dir("failfill");
  const std::string path = dir + "/x.kiln";
  KilnWriter w = sample_writer();
  ASSERT_TRUE(w.add_tensor("late", 0, {4}, 4096, [](std::span<uint8_t>) { return io_error("disk on fire"); }));
  Status st = w.write(path);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), path + ": cannot write: tensor 'late': disk on fire");
  EXPECT_TRUE(files_in(dir).empty()) << files_in(dir).front();
}

TEST(KilnFile, ExistingFileIsReplacedOnlyOnSuccess) {
  const std::string dir = fresh_dir("replace");
  const std::string path = dir + "/x.kiln";
  const Bytes old_bytes = text("an older file");
  write_bytes(path, old_bytes);

  KilnWriter bad = sample_writer();
  ASSERT_TRUE(bad.add_tensor("late", 0, {1}, 1, [](std::span<uint8_t>) { return io_error("no"); }));
  ASSERT_FALSE(bad.write(path));
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"x.kiln"});

  ASSERT_TRUE(sample_writer().write(path));
  EXPECT_EQ(read_bytes(path), sample_bytes("replace_ref.kiln"));
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"x.kiln"});
}

TEST(KilnFile, PathThatIsAFolderFailsAndLeavesNoTemp) {
  const std::string dir = fresh_dir("isdir");
  fs::create_directories(dir + "/x.kiln/inner");
  Status st = sample_writer().write(dir + "/x.kiln");
  ASSERT_FALSE(st);
  // Refused before anything is written (a rename would not replace a folder anyway; it would
  // replace a device or a FIFO, which are refused alike: TempFile.RefusesEverythingButARegularFile).
  EXPECT_NE(st.message().find("x.kiln is a directory, not a regular file"), std::string::npos) << st.message();
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"x.kiln"});
  EXPECT_TRUE(fs::is_directory(dir + "/x.kiln/inner"));
}

// A writer killed at different moments leaves no file at the path (its temp file may remain).
TEST(KilnFile, KilledWriteLeavesNoFile) {
  for (int kill_at : {0, 1, 4, -1}) {  // in the fill of tensor k; -1: in the first progress call
    SCOPED_TRACE("kill at " + std::to_string(kill_at));
    const std::string dir = fresh_dir("killed" + std::to_string(kill_at + 1));
    const std::string path = dir + "/x.kiln";
    const std::string old_path = dir + "/old.kiln";
    ASSERT_TRUE(sample_writer().write(old_path));
    fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      KilnWriter w({"cpu", 0, ""}, "v");
      for (int i = 0; i < 5; ++i)
        (void)w.add_tensor("t" + std::to_string(i), 0, {1}, 100000, [i, kill_at](std::span<uint8_t> out) {
          std::memset(out.data(), i, out.size());
          if (i == kill_at) ::kill(::getpid(), SIGKILL);
          return Status::ok();
        });
      (void)w.write(path, [kill_at](double) {
        if (kill_at < 0) ::kill(::getpid(), SIGKILL);
      });
      // Also the replace case: an existing file stays as it was.
      _exit(3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    EXPECT_FALSE(fs::exists(path));
    for (const std::string& f : files_in(dir))
      EXPECT_TRUE(f == "old.kiln" || f.rfind("x.kiln.tmp.", 0) == 0) << f;
  }
}

TEST(KilnFile, KilledReplaceKeepsTheOldFile) {
  const std::string dir = fresh_dir("killed_replace");
  const std::string path = dir + "/x.kiln";
  ASSERT_TRUE(sample_writer().write(path));
  const Bytes before = read_bytes(path);
  fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    KilnWriter w({"cpu", 0, ""}, "v");
    (void)w.add_tensor("t", 0, {1}, 100000, [](std::span<uint8_t>) {
      ::kill(::getpid(), SIGKILL);
      return Status::ok();
    });
    (void)w.write(path);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_TRUE(open_kiln(path, {.verify_checksums = true}));
}

}  // namespace
}  // namespace kiln
