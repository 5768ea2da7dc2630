// GGUF reading and the dequantization of every block type against gguf-py's own dequantize().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "formats/gguf.h"
#include "quant/ggml_blocks.h"
#include "quant/scheme.h"
#include "test_util.h"

namespace kiln {
namespace {

GgufFile open_blocks() {
  auto f = MappedFile::open(test::data_path("gguf-quant/blocks.gguf"));
  EXPECT_TRUE(f) << f.status().message();
  auto g = read_gguf(*f);
  EXPECT_TRUE(g) << g.status().message();
  return std::move(g).value();
}

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
      ASSERT_TRUE(q5_0_to_w8_g32(q->bytes, w8));
      EXPECT_FALSE(q5_0_to_w8_g32(q->bytes.subspan(1), w8));  // whole blocks only
      std::vector<uint8_t> small(w8.size() - 1);
      EXPECT_FALSE(q5_0_to_w8_g32(q->bytes, small));
    }
    std::vector<float> got(static_cast<size_t>(n));
    ASSERT_TRUE(dequantize_matrix(p, w8, 1, n, got.data()));
    EXPECT_EQ(std::memcmp(got.data(), ref->bytes.data(), ref->bytes.size()), 0);
  }
}

}  // namespace
}  // namespace kiln
