// GGUF reading and the dequantization of every block type against gguf-py's own dequantize().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/cpu/layouts.h"
#include "engine/defaults.h"
#include "formats/gguf.h"
#include "layout/ggml_blocks.h"
#include "layout/weight_layout.h"
#include "quant/scheme_flag.h"
#include "quant/weight_origin.h"
#include "test_util.h"

namespace kiln {
namespace {

GgufFile open_test_gguf(const std::string& rel) {
  auto f = MappedFile::open(test::data_path(rel));
  EXPECT_TRUE(f) << f.status().message();
  auto g = read_gguf(*f);
  EXPECT_TRUE(g) << g.status().message();
  return std::move(g).value();
}

GgufFile open_blocks() { return open_test_gguf("gguf-quant/blocks.gguf"); }

const TensorSource* find(const GgufFile& g, const std::string& name) {
  for (const auto& t : g.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

class Dequant : public ::testing::TestWithParam<const char*> {};

TEST_P(Dequant, MatchesGgufPy) {
  GgufFile g = open_blocks();
  const std::string name = GetParam();
  const TensorSource* q = find(g, name);
  const TensorSource* ref = find(g, name + ".ref");
  ASSERT_TRUE(q && ref) << name;
  ASSERT_EQ(q->shape, (std::vector<int64_t>{3, 512}));
  ASSERT_EQ(ref->dtype, DType::kF32);
  std::vector<float> out(q->elements());
  ASSERT_TRUE(dequantize(q->dtype, q->bytes, out));
  const auto* r = reinterpret_cast<const float*>(ref->bytes.data());
  for (size_t i = 0; i < out.size(); ++i) {
    // The reference computes in float32 too; allow one rounding of difference (FMA contraction).
    const float tol = 2e-6f * std::max(1.0f, std::fabs(r[i]));
    ASSERT_NEAR(out[i], r[i], tol) << name << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Dequant,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k", "q5_0", "q5_1"));

TEST(Gguf, ReadsMetadata) {
  GgufFile g = open_blocks();
  EXPECT_EQ(g.version, 3u);
  const GgufValue* arch = g.find("general.architecture");
  ASSERT_TRUE(arch && arch->as_string());
  EXPECT_EQ(*arch->as_string(), "test");
}

TEST(Gguf, Stories260KVocabularyAndConfig) {
  auto f = MappedFile::open(test::data_path("stories260K-gguf/stories260K.gguf"));
  ASSERT_TRUE(f);
  auto g = read_gguf(*f);
  ASSERT_TRUE(g) << g.status().message();
  const GgufValue* tokens = g->find("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens && tokens->as_array());
  EXPECT_EQ(tokens->as_array()->strings.size(), 512u);
  auto m = gguf_to_model(*g);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->config.dim, 64);
  EXPECT_EQ(m->config.n_kv_heads, 4);
  EXPECT_EQ(m->config.head_dim, 8);
  EXPECT_EQ(m->config.rope_style, RopeStyle::kAdjacentPairs);
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const GgufArray* x = a.as_array()) {
    const GgufArray* y = b.as_array();
    return x->type == y->type && x->ints == y->ints && x->floats == y->floats && x->strings == y->strings;
  }
  if (const int64_t* i = a.as_int()) return *i == *b.as_int();
  if (const double* f = a.as_float()) return *f == *b.as_float();
  return *a.as_string() == *b.as_string();
}

// The v2 file is the v3 file rewritten by gguf-py 0.4.4 (tests/gen/make_gguf_v2.py): another
// writer, another key order, the same keys, values and tensors.
TEST(Gguf, Version2ReadsLikeVersion3) {
  auto open = [](const char* rel) {
    auto f = MappedFile::open(test::data_path(rel));
    EXPECT_TRUE(f) << rel;
    auto g = read_gguf(*f);
    EXPECT_TRUE(g) << g.status().message();
    return std::move(g).value();
  };
  GgufFile v2 = open("stories260K-gguf/stories260K-v2.gguf");
  GgufFile v3 = open("stories260K-gguf/stories260K.gguf");
  EXPECT_EQ(v2.version, 2u);
  EXPECT_EQ(v3.version, 3u);
  EXPECT_NE(test::read_file(test::data_path("stories260K-gguf/stories260K-v2.gguf")),
            test::read_file(test::data_path("stories260K-gguf/stories260K.gguf")));
  ASSERT_EQ(v2.metadata.size(), v3.metadata.size());
  for (const auto& [key, value] : v3.metadata) {
    const GgufValue* other = v2.find(key);
    ASSERT_TRUE(other) << key;
    EXPECT_EQ(other->type, value.type) << key;
    EXPECT_TRUE(same_value(*other, value)) << key;
  }
  ASSERT_EQ(v2.tensors.size(), v3.tensors.size());
  for (size_t i = 0; i < v3.tensors.size(); ++i) {
    const TensorSource& a = v2.tensors[i];
    const TensorSource& b = v3.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype) << b.name;
    EXPECT_EQ(a.shape, b.shape) << b.name;
    ASSERT_EQ(a.bytes.size(), b.bytes.size()) << b.name;
    EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin())) << b.name;
  }
  auto m = gguf_to_model(v2);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->config.dim, 64);
  EXPECT_EQ(m->config.stop_ids, std::vector<int>{2});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Q4_K as kiln's W4 asymmetric groups of 32 (issue 22 item 3): the same 4-bit values, each
// sub-block's scale d*sc and minimum -dmin*m rounded once to FP16. Against gguf-py's
// dequantization of the same bytes: every element within the two roundings' bound
// (15 * |scale| + |min|) * 2^-11 (random scales here: few products d * sc fit FP16 exactly).
TEST(Gguf, Q4KBecomesW4AsymmetricGroups) {
  GgufFile g = open_blocks();
  const TensorSource* q = find(g, "q4_k");
  const TensorSource* ref = find(g, "q4_k.ref");
  ASSERT_TRUE(q && ref);
  const int64_t rows = 3, cols = 512;
  std::vector<uint8_t> w4(static_cast<size_t>(rows * cols / 32 * 20));
  ASSERT_TRUE(q4_k_to_w4_asym(q->bytes, w4));
  QuantParams p;
  p.scheme = Scheme::kW4A16;
  p.group_size = 32;
  p.symmetric = false;
  std::vector<float> got(static_cast<size_t>(rows * cols));
  ASSERT_TRUE(dequantize_matrix(p, w4, rows, cols, got.data()));
  const auto* want = reinterpret_cast<const float*>(ref->bytes.data());
  size_t exact = 0;
  for (size_t grp = 0; grp < got.size() / 32; ++grp) {
    uint16_t hs, hm;
    std::memcpy(&hs, w4.data() + grp * 20, 2);
    std::memcpy(&hm, w4.data() + grp * 20 + 2, 2);
    const double bound = (15 * std::abs(f16_to_f32(hs)) + std::abs(f16_to_f32(hm))) * std::ldexp(1.0, -11) + 1e-30;
    for (size_t i = grp * 32; i < grp * 32 + 32; ++i) {
      EXPECT_LE(std::abs(got[i] - want[i]), bound) << "element " << i;
      exact += got[i] == want[i];
    }
  }
  std::printf("[ q4_k->w4 ] %zu of %zu elements exact\n", exact, got.size());
  // Whole blocks only, and a destination of the right size.
  EXPECT_FALSE(q4_k_to_w4_asym(q->bytes.subspan(1), w4));
  std::vector<uint8_t> small(w4.size() - 1);
  EXPECT_FALSE(q4_k_to_w4_asym(q->bytes, small));
}

// Q8_0 is w8a16 g32 byte for byte, and Q5_0 becomes it exactly (its scale as it is, its 5-bit
// values less 16 as int8): dequantized, both equal gguf-py's dequantization bit for bit.
TEST(Gguf, Q8AndQ5AreW8Groups) {
  GgufFile g = open_blocks();
  QuantParams p;
  p.scheme = Scheme::kW8A16;
  p.w8_group = 32;
  for (const char* type : {"q8_0", "q5_0"}) {
    SCOPED_TRACE(type);
    const TensorSource* q = find(g, type);
    const TensorSource* ref = find(g, std::string(type) + ".ref");
    ASSERT_TRUE(q && ref);
    const auto n = static_cast<int64_t>(ref->bytes.size() / 4);
    ASSERT_EQ(n % 32, 0);
    std::vector<uint8_t> w8(q->bytes.begin(), q->bytes.end());
    if (q->dtype == DType::kQ5_0) {
      w8.resize(static_cast<size_t>(n / 32 * 34));
      ASSERT_TRUE(blocks_to_w8_g32(q->dtype, q->bytes, w8));
      EXPECT_FALSE(blocks_to_w8_g32(q->dtype, q->bytes.subspan(1), w8));  // whole blocks only
      std::vector<uint8_t> small(w8.size() - 1);
      EXPECT_FALSE(blocks_to_w8_g32(q->dtype, q->bytes, small));
    }
    std::vector<float> got(static_cast<size_t>(n));
    ASSERT_TRUE(dequantize_matrix(p, w8, 1, n, got.data()));
    EXPECT_EQ(std::memcmp(got.data(), ref->bytes.data(), ref->bytes.size()), 0);
  }
}

// Q4_K is w4a16 g256 asymmetric, IQ4_XS w4a16 g256 symmetric, Q5_K w5a16 and Q6_K w6a16, byte for byte: the
// file's blocks read as those schemes dequantize to gguf-py's values bit for bit (kiln keeps them
// so, layout/weight_layout.h).
TEST(Gguf, Q4KIq4XsAndQ6KAreKiln) {
  {
    const GgufFile g = open_test_gguf("gguf-quant/iq4_xs.gguf");  // llama-quantize's blocks
    const TensorSource* q = find(g, "iq4_xs");
    const TensorSource* ref = find(g, "iq4_xs.ref");
    ASSERT_TRUE(q && ref);
    std::vector<float> got(q->elements());
    ASSERT_TRUE(dequantize_matrix({Scheme::kW4A16, 256, true}, q->bytes, q->shape[0], q->shape[1], got.data()));
    EXPECT_EQ(std::memcmp(got.data(), ref->bytes.data(), ref->bytes.size()), 0);
  }
  GgufFile g = open_blocks();
  for (const auto& [type, p] : {std::pair{"q4_k", QuantParams{Scheme::kW4A16, 256, false}},
                                std::pair{"q5_k", canonical({Scheme::kW5A16})},
                                std::pair{"q6_k", canonical({Scheme::kW6A16})},
                                std::pair{"q5_0", QuantParams{Scheme::kW5A16, 0, true, 0, 32}},
                                std::pair{"q5_1", QuantParams{Scheme::kW5A16, 0, false, 0, 32}}}) {
    SCOPED_TRACE(type);
    const TensorSource* q = find(g, type);
    const TensorSource* ref = find(g, std::string(type) + ".ref");
    ASSERT_TRUE(q && ref);
    ASSERT_EQ(q->shape, (std::vector<int64_t>{3, 512}));
    std::vector<float> got(3 * 512);
    ASSERT_TRUE(dequantize_matrix(p, q->bytes, 3, 512, got.data()));
    EXPECT_EQ(std::memcmp(got.data(), ref->bytes.data(), ref->bytes.size()), 0);
    EXPECT_FALSE(dequantize_matrix(p, q->bytes.subspan(1), 3, 512, got.data()));  // a byte short
  }
}

// A GGUF's k-quant tensors keep their own precision (what kiln run and kiln compile use without
// -q): Q4_K as w4a16 g256 asym, Q5_K as w5a16, Q6_K as w6a16, so the compiler reads their bytes
// as they are (compiler/driver.cpp's stored_as); the CPU tiles hold exactly those bytes.
TEST(Gguf, KQuantTensorsKeepTheirBlocks) {
  GgufFile g = open_blocks();
  ImportedModel m;
  m.path = "blocks.gguf";
  for (const char* name : {"q4_k", "q5_k", "q6_k", "q5_0", "q5_1"}) m.tensors[name] = *find(g, name);
  const OverridesFile f = source_precision(m);
  auto params_of = [&](const std::string& name) {
    QuantParams p = f.defaults;
    for (const Rule& r : f.rules)
      if (r.match == name) p = r.params;
    return p;
  };
  EXPECT_EQ(describe(params_of("q4_k")), "w4a16 g256 asym");
  EXPECT_EQ(describe(params_of("q5_k")), "w5a16");
  EXPECT_EQ(describe(params_of("q6_k")), "w6a16");
  EXPECT_EQ(describe(params_of("q5_0")), "w5a16 g32 sym");
  EXPECT_EQ(describe(params_of("q5_1")), "w5a16 g32 asym");
  for (const char* name : {"q4_k", "q5_k", "q6_k", "q5_0", "q5_1"}) {
    SCOPED_TRACE(name);
    const QuantParams p = params_of(name);
    const TensorSource& t = m.tensors.at(name);
    std::vector<uint8_t> packed, back;
    ASSERT_TRUE(cpu::pack_matrix(p, cpu::matmul_layout(p.scheme), t.bytes, 3, 512, packed));
    EXPECT_EQ(packed.size(), t.bytes.size() / 3 * 16);  // one tile of 16 rows, 3 of them the file's
    ASSERT_TRUE(cpu::unpack_matrix(p, cpu::matmul_layout(p.scheme), packed, 3, 512, back));
    EXPECT_TRUE(std::equal(back.begin(), back.end(), t.bytes.begin(), t.bytes.end()));
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The bytes of g's file with 2-D tensor `name`'s GGUF dims (ne0, ne1) changed from `was` to `now`
// (its info: the name as u64 length and bytes, n_dims u32 2, then ne0 and ne1 as u64).
std::vector<uint8_t> with_dims(const GgufFile& g, const std::string& name, uint64_t was0, uint64_t was1, uint64_t now0,
                               uint64_t now1) {
  std::vector<uint8_t> all(g.file->data(), g.file->data() + g.file->size());
  std::vector<uint8_t> key(8 + name.size() + 4 + 16);
  const uint64_t len = name.size();
  const uint32_t dims = 2;
  std::memcpy(key.data(), &len, 8);
  std::memcpy(key.data() + 8, name.data(), name.size());
  std::memcpy(key.data() + 8 + name.size(), &dims, 4);
  std::memcpy(key.data() + 12 + name.size(), &was0, 8);
  std::memcpy(key.data() + 20 + name.size(), &was1, 8);
  auto it = std::search(all.begin(), all.end(), key.begin(), key.end());
  EXPECT_NE(it, all.end()) << name;
  if (it == all.end()) return all;
  uint8_t* ne = all.data() + (it - all.begin()) + 12 + name.size();
  std::memcpy(ne, &now0, 8);
  std::memcpy(ne + 8, &now1, 8);
  return all;
}

// IQ4_NL (GGML type 20) and IQ4_XS (23), issue 22 item 3: blocks written by llama-quantize,
// dequantized as gguf-py does (tests/gen/make_gguf_iq4.py). Each value is one int8 level times
// d (IQ4_XS: times d (s - 32) first), the same f32 products: bit for bit.
struct Iq4Case {
  const char* name;
  DType type;
  int64_t rows, cols;
  const char* short_message;  // dequantize's message for the blocks less one byte
  int64_t ragged_cols;        // a width that is not whole blocks and divides rows * cols
};

class Iq4 : public ::testing::TestWithParam<Iq4Case> {};

TEST_P(Iq4, MatchesGgufPyAndRefusesShortData) {
  const Iq4Case c = GetParam();
  const GgufFile g = open_test_gguf(std::string("gguf-quant/") + c.name + ".gguf");
  const TensorSource* q = find(g, c.name);
  const TensorSource* ref = find(g, std::string(c.name) + ".ref");
  ASSERT_TRUE(q && ref);
  EXPECT_EQ(q->dtype, c.type);
  ASSERT_EQ(q->shape, (std::vector<int64_t>{c.rows, c.cols}));
  ASSERT_EQ(q->bytes.size(), *dtype_bytes(c.type, static_cast<uint64_t>(c.rows * c.cols)));
  std::vector<float> out(q->elements());
  ASSERT_TRUE(dequantize(q->dtype, q->bytes, out));
  EXPECT_EQ(std::memcmp(out.data(), ref->bytes.data(), out.size() * 4), 0);
  // Block data one byte short of what the shape needs, or a tail that is not a whole block.
  auto bad = dequantize(q->dtype, q->bytes.subspan(1), out);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find(c.short_message), std::string::npos) << bad.message();
  const int block = dtype_info(c.type).block_elems;
  std::vector<float> odd(static_cast<size_t>(block + 1));
  EXPECT_FALSE(dequantize(q->dtype, q->bytes.subspan(0, 2 * static_cast<size_t>(dtype_info(c.type).block_bytes)), odd));
}

// A GGUF whose IQ4 data is cut short, or whose rows are no whole number of blocks: named errors
// from the reader, before any block is read.
TEST_P(Iq4, ShortOrRaggedFileIsAnError) {
  const Iq4Case c = GetParam();
  const GgufFile g = open_test_gguf(std::string("gguf-quant/") + c.name + ".gguf");
  const MappedFile& f = *g.file;
  // The reference tensor follows the blocks: cut the file inside the blocks.
  const TensorSource* q = find(g, c.name);
  ASSERT_TRUE(q);
  const size_t cut = static_cast<size_t>(q->bytes.data() - f.data()) + q->bytes.size() - 5;
  std::vector<uint8_t> bytes(f.data(), f.data() + cut);
  auto shortg = read_gguf(MappedFile::from_bytes(bytes, "short.gguf"));
  ASSERT_FALSE(shortg);
  EXPECT_NE(shortg.status().message().find("run past the end of the data"), std::string::npos)
      << shortg.status().message();
  // As many elements in rows that are not whole blocks (of 32; IQ4_XS 256).
  const auto w = static_cast<uint64_t>(c.cols), h = static_cast<uint64_t>(c.rows), rw = static_cast<uint64_t>(c.ragged_cols);
  auto ragged = read_gguf(MappedFile::from_bytes(with_dims(g, c.name, w, h, rw, w * h / rw), "ragged.gguf"));
  ASSERT_FALSE(ragged);
  const std::string want = "rows of " + std::to_string(rw) + " are not whole " + std::string(dtype_name(c.type));
  EXPECT_NE(ragged.status().message().find(want), std::string::npos) << ragged.status().message();
}

INSTANTIATE_TEST_SUITE_P(Types, Iq4,
                         ::testing::Values(Iq4Case{"iq4_nl", DType::kIQ4_NL, 96, 64, "dequantize IQ4_NL: 3455 bytes for 6144 elements", 48},
                                           Iq4Case{"iq4_xs", DType::kIQ4_XS, 3, 2048, "dequantize IQ4_XS: 3263 bytes for 6144 elements", 384}),
                         [](const ::testing::TestParamInfo<Iq4Case>& i) { return std::string(i.param.name); });

// A k-quant whose rows are not a multiple of its 256-element super-block (3 rows of 512 -> 12
// rows of 128: the same bytes, each row half a block) is a named error, not a misread.
TEST(Gguf, KQuantRowsNotMultipleOf256AreAnError) {
  const GgufFile g = open_blocks();
  for (const char* name : {"q4_k", "q5_k", "q6_k"}) {
    auto bad = read_gguf(MappedFile::from_bytes(with_dims(g, name, 512, 3, 128, 12), "ragged.gguf"));
    ASSERT_FALSE(bad) << name;
    const std::string upper = name[1] == '4' ? "Q4_K" : name[1] == '5' ? "Q5_K" : "Q6_K";
    EXPECT_NE(bad.status().message().find("rows of 128 are not whole " + upper + " blocks"), std::string::npos)
        << bad.status().message();
  }
}

// Issue 38 item 7: `kiln inspect x.gguf` said "w4a16 by default" of a file whose Q5_0 tensors
// compile to w8a16. It now says what `kiln compile` with its default flags makes of each stored
// type, and the bytes per kiln scheme before and after, from the compiler's own plan; compiling
// and inspecting the .kiln must give exactly what it predicted, tensor by tensor.
TEST(Gguf, InspectSaysWhatCompileMakesOfEachTypeAndTheKilnAgrees) {
  struct Case {
    const char* file;
    std::vector<std::string> lines;  // exact lines of the text output
  };
  const std::vector<Case> cases = {
      {"hf-tiny/minicpm/model-q5_0.gguf",
       {"  Q5_0 -> w5a16 g32 (kept byte for byte): 14 tensors, 42240 -> 42240 bytes",
        "  Q8_0 -> w8a16 g32 (kept byte for byte): 1 tensor, 20400 -> 20672 bytes",
        "  F32 -> f32 (kept byte for byte): 5 tensors, 1280 -> 1280 bytes",
        "  w5a16         42240 ->        42240 bytes ( 65.8%)",
        "  all           63920 ->        64192 bytes"}},
      {"hf-tiny/minicpm/model-q4_k_m.gguf",  // llama-quantize's Q4_K_M of a model too narrow for Q4_K
       {"  Q5_0 -> w5a16 g32 (kept byte for byte): 12 tensors, 36608 -> 36608 bytes",
        "  w5a16         36608 ->        36608 bytes ( 54.4%)",
        "  w8a16         29104 ->        29376 bytes ( 43.7%)"}},
      {"hf-tiny/minicpm-wide/model-q4_k_m.gguf",
       {"  Q4_K -> w4a16 g256 asym (kept byte for byte): 12 tensors, 571392 -> 571392 bytes",
        "  Q6_K -> w6a16 g256 (kept byte for byte): 3 tensors, 197400 -> 198240 bytes",
        "  F32 -> f32 (kept byte for byte): 5 tensors, 5120 -> 5120 bytes",
        "  w4a16        571392 ->       571392 bytes ( 73.8%)"}},
      {"gguf-quant/stories260K-IQ4_NL.gguf",
       {"  IQ4_NL -> w8a16 g32 (widened: no 4-bit scheme of that block): 31 tensors, 114912 -> 219776 bytes",
        "  F16 -> f16 (kept byte for byte): 5 tensors, 110080 -> 110080 bytes"}},
      {"stories260K-gguf/stories260K.gguf",  // F32: w4a16 by default, the classifier and width 172 at 8 bits
       {"  F32 -> w4a16 g32 sym (rounded from its values): 31 tensors, 817152 -> 116352 bytes",
        "  F32 -> w8a16 (rounded from its values): 6 tensors, 351232 -> 94464 bytes",
        "  note: output.weight: kept at w8a16 as the classifier (--quantize-classifier to store it at w4a16 g32 sym)",
        "  all         1171200 ->       213632 bytes"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string src = test::shell_quote(test::data_path(c.file));
    auto text = test::run_kiln("inspect " + src);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    for (const std::string& line : c.lines) EXPECT_NE(text.out.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text.out;
    EXPECT_EQ(text.out.find("w4a16 by default"), std::string::npos);
    auto predicted = test::run_kiln("inspect --json " + src);
    ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
    const auto plan = nlohmann::json::parse(predicted.out)["compile"];
    const std::string kiln = test::temp_dir() + "/predicted.kiln";
    auto compiled = test::run_kiln("compile " + src + " -o " + test::shell_quote(kiln));
    ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
    auto described = test::run_kiln("inspect --json " + test::shell_quote(kiln));
    ASSERT_EQ(described.exit_code, 0) << described.err;
    const auto k = nlohmann::json::parse(described.out);
    std::map<std::string, std::pair<std::string, uint64_t>> want, got;
    for (const auto& t : plan["tensors"]) want[t["name"]] = {t["scheme"], t["compiled_bytes"].get<uint64_t>()};
    for (const auto& t : k["tensors"]) got[t["name"]] = {t["scheme"], t["bytes"].get<uint64_t>()};
    EXPECT_EQ(want, got);
    uint64_t total = 0;
    for (const auto& [scheme, bytes] : k["sizes"]["by_scheme"].items()) {
      EXPECT_EQ(plan["by_scheme"][scheme]["compiled_bytes"].get<uint64_t>(), bytes.get<uint64_t>()) << scheme;
      total += bytes.get<uint64_t>();
    }
    EXPECT_EQ(plan["by_scheme"].size(), k["sizes"]["by_scheme"].size());
    EXPECT_EQ(plan["compiled_bytes"].get<uint64_t>(), total);
  }
}

// The decision itself, per stored type, as compile_model acts on it.
TEST(Gguf, WeightOriginOfEachStoredType) {
  auto params = [](const char* scheme) { return *parse_scheme_flag(scheme, 32, true); };
  EXPECT_EQ(weight_origin(DType::kQ5_0, params("w8a16 g32")), WeightOrigin::kWidened);
  EXPECT_EQ(weight_origin(DType::kIQ4_NL, params("w8a16 g32")), WeightOrigin::kWidened);
  EXPECT_EQ(weight_origin(DType::kQ5_0, params("w8a16")), WeightOrigin::kRounded);  // one scale per row
  EXPECT_EQ(weight_origin(DType::kQ8_0, params("w8a16 g32")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ4_0, params("q4_0")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ4_1, params("q4_0")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin(DType::kQ4_1, params("q4_1")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ4_K, params("q4_k")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ4_K, params("q4_1")), WeightOrigin::kSubBlocks);
  EXPECT_EQ(weight_origin(DType::kQ4_K, params("iq4_xs")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin(DType::kIQ4_XS, params("iq4_xs")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ5_K, params("q5_k")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ6_K, params("q6_k")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ5_1, params("w8a16")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin(DType::kQ5_0, params("q5_0")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ5_1, params("q5_1")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kQ5_1, params("q5_0")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin(DType::kQ5_0, params("q5_k")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin(DType::kF32, params("f32")), WeightOrigin::kAsStored);
  EXPECT_EQ(weight_origin(DType::kF16, params("f32")), WeightOrigin::kRounded);
  EXPECT_EQ(weight_origin_text(DType::kQ5_0, Scheme::kW8A16, WeightOrigin::kWidened), "widened: its values as int8, exact");
  EXPECT_EQ(weight_origin_text(DType::kIQ4_NL, Scheme::kW8A16, WeightOrigin::kWidened), "widened: no 4-bit scheme of that block");
  EXPECT_EQ(weight_origin_text(DType::kQ4_K, Scheme::kW4A16, WeightOrigin::kAsStored), "kept byte for byte");
  EXPECT_EQ(weight_origin_text(DType::kQ5_1, Scheme::kW8A16, WeightOrigin::kRounded), "dequantized, then rounded once");
  EXPECT_EQ(weight_origin_text(DType::kF32, Scheme::kW4A16, WeightOrigin::kRounded), "rounded from its values");
  EXPECT_EQ(weight_origin_text(DType::kBF16, Scheme::kF32, WeightOrigin::kRounded), "converted, exact");
}

}  // namespace
}  // namespace kiln
