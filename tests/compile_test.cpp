// The compiled path against the FP32 reference: fusion, batching, partitioning, memory plan,
// every scheme, and the .kiln file round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "artifact/config_section.h"
#include "artifact/program_section.h"
#include "artifact/tokenizer_section.h"
#include "backends/ref/ref_backend.h"
#include "backends/registry.h"
#include "compiler/kiln_writer.h"
#include "engine/defaults.h"
#include "graph/weight_params.h"
#include "layout/ggml_blocks.h"
#include <nlohmann/json.hpp>
#include "artifact/kiln_image_reader.h"
#include "reference/reference_session.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

CompileOptions options(const std::string& scheme = "f32", bool fuse = true) {
  CompileOptions o;
  o.require_tokenizer = false;  // the tiny transformers models have none
  auto q = overrides_from_flags(scheme, 32, true, /*auto_fallback=*/true);
  EXPECT_TRUE(q) << q.status().message();
  o.quant = *q;
  o.fuse = fuse;
  return o;
}

std::shared_ptr<const Model> compiled(const std::string& path, const CompileOptions& o,
                                              std::span<const Backend* const> extra = {}) {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  CompileReport r;
  auto img = compile_model(*imp, o, &r);
  EXPECT_TRUE(img) << img.status().message();
  auto m = Model::create(std::move(img).value(), extra);
  EXPECT_TRUE(m) << m.status().message();
  return *m;
}

std::vector<std::vector<float>> reference_logits(const std::string& path, const std::vector<int>& tokens) {
  auto imp = import_model(path);
  auto model = ReferenceModel::create(std::move(imp->model));
  auto s = ReferenceSession::create(*model, 0);
  std::vector<std::vector<float>> out;
  for (int t : tokens) {
    auto l = (*s)->forward(t);
    out.emplace_back(l->begin(), l->end());
  }
  return out;
}

// Logits of every position, fed `chunk` tokens per step.
std::vector<std::vector<float>> program_logits(std::shared_ptr<const Model> m, const std::vector<int>& tokens,
                                               size_t chunk) {
  auto s = Session::create(m, 0);
  EXPECT_TRUE(s);
  std::vector<std::vector<float>> out;
  const size_t v = static_cast<size_t>(m->config().vocab_size);
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    auto l = (*s)->decode_all(std::span<const int>(tokens).subspan(i, n));
    EXPECT_TRUE(l) << l.status().message();
    for (size_t t = 0; t < n; ++t) out.emplace_back(l->begin() + t * v, l->begin() + (t + 1) * v);
  }
  return out;
}

const std::vector<int> kTokens = {1, 403, 407, 261, 378, 429, 271, 280, 300, 416, 259, 73, 89, 115, 17, 450};

struct ModelCase {
  const char* path;
  std::vector<int> tokens;
};

class CompiledF32 : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CompiledF32, MatchesReferenceFusedUnfusedAndBatched) {
  const std::string path = test::data_path(GetParam().path);
  const auto& tokens = GetParam().tokens;
  auto ref = reference_logits(path, tokens);
  for (bool fuse : {false, true})
    for (size_t chunk : {size_t{1}, size_t{5}, tokens.size()}) {
      auto got = program_logits(compiled(path, options("f32", fuse)), tokens, chunk);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_LT(test::relative_error(got[i].data(), ref[i].data(), ref[i].size()), 1e-5)
            << path << " fuse " << fuse << " chunk " << chunk << " position " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, CompiledF32,
                         ::testing::Values(ModelCase{"../../models/stories260K/stories260K.bin", kTokens},
                                           ModelCase{"hf-tiny/qwen2", {5, 17, 200, 3, 99, 42, 7, 250, 1, 11}},
                                           ModelCase{"hf-tiny/mistral", {5, 17, 200, 3, 99, 42, 7, 250, 1, 11, 64, 128}},
                                           ModelCase{"hf-tiny/llama32", {5, 17, 200, 3, 99, 42, 7, 250}},
                                           ModelCase{"hf-tiny/llama3-f16-sharded", {9, 8, 7, 6, 5, 4, 3}}));

TEST(Compile, FusionRewritesEveryLayer) {
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, options(), &r);
  ASSERT_TRUE(img);
  EXPECT_EQ(r.fusion.qkv, 5);
  EXPECT_EQ(r.fusion.gate_up, 5);
  EXPECT_EQ(r.fusion.rope_kv, 5);
  EXPECT_EQ(r.fusion.residual, 10);
  EXPECT_EQ(r.fusion.norm, 10);
  for (const Node& n : img->program.graph.nodes) {
    EXPECT_NE(n.op, OpCode::kRope);
    EXPECT_NE(n.op, OpCode::kAdd);
  }
}

TEST(Compile, MemoryPlanNeverOverlapsLiveValues) {
  auto imp = import_model(test::shipped_model());
  for (bool fuse : {false, true}) {
    auto img = compile_model(*imp, options("f32", fuse), nullptr);
    ASSERT_TRUE(img);
    const Graph& g = img->program.graph;
    const MemoryPlan& p = img->program.plan;
    // Live range of each value, as the planner must have seen it.
    std::vector<int> first(g.values.size(), -1), last(g.values.size(), -1);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].outputs)
        if (first[static_cast<size_t>(v)] < 0) first[static_cast<size_t>(v)] = static_cast<int>(i);
      for (int v : g.nodes[i].inputs) last[static_cast<size_t>(v)] = static_cast<int>(i);
    }
    first[static_cast<size_t>(g.tokens_input)] = 0;
    last[static_cast<size_t>(g.logits_output)] = static_cast<int>(g.nodes.size());
    for (size_t a = 0; a < g.values.size(); ++a)
      for (size_t b = a + 1; b < g.values.size(); ++b) {
        if (first[a] < 0 || first[b] < 0 || p.sizes[a] == 0 || p.sizes[b] == 0) continue;
        const bool live_together = first[a] <= std::max(last[b], first[b]) && first[b] <= std::max(last[a], first[a]);
        const bool overlap = p.offsets[a] < p.offsets[b] + p.sizes[b] && p.offsets[b] < p.offsets[a] + p.sizes[a];
        EXPECT_FALSE(live_together && overlap) << g.values[a].name << " and " << g.values[b].name;
      }
    EXPECT_LT(p.arena_bytes, p.total_bytes);
    EXPECT_GT(static_cast<double>(p.total_bytes) / static_cast<double>(p.arena_bytes), 2.0);
  }
}

// A deliberately limited second back end: f32 matrix products only.
class MatmulOnlyBackend final : public Backend {
 public:
  std::string_view name() const override { return "matmul-only"; }
  bool supports(const Node& n, const Graph& g) const override {
    if (n.op != OpCode::kMatMul && n.op != OpCode::kMatMulAdd) return false;
    for (int w : n.weights)
      if (g.weights[static_cast<size_t>(w)].scheme != Scheme::kF32) return false;
    return true;
  }
  Result<std::unique_ptr<Kernel>> prepare(const Node& n, const Graph& g, std::span<const BoundWeight> w,
                                          std::span<const int64_t> offsets, int max_tokens) const override {
    ++prepared;
    return ref_.prepare(n, g, w, offsets, max_tokens);
  }
  size_t scratch_bytes(const Graph& g, int max_tokens, int n_ctx) const override {
    return ref_.scratch_bytes(g, max_tokens, n_ctx);
  }
  mutable int prepared = 0;

 private:
  RefBackend ref_;
};

TEST(Compile, PartitionFallsBackToReference) {
  MatmulOnlyBackend limited;
  RefBackend ref;
  const Backend* backends[] = {&limited, &ref};
  CompileOptions o = options("f32");
  o.backends = {&limited, &ref};
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, o, &r);
  ASSERT_TRUE(img);
  // The classifier and 10 fused residual projections go to the limited back end; the rest falls back.
  EXPECT_EQ(r.partition.nodes["matmul-only"], 11);
  EXPECT_EQ(r.partition.nodes["ref"], 22);
  auto m = Model::create(std::move(img).value(), backends);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(limited.prepared, 11);
  auto got = program_logits(*m, kTokens, 4);
  auto want = reference_logits(test::shipped_model(), kTokens);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LT(test::relative_error(got[i].data(), want[i].data(), want[i].size()), 1e-5);
  // Without the limited back end the program cannot be bound, and says why.
  auto again = compile_model(*imp, o, nullptr);
  auto unbound = Model::create(std::move(again).value());
  ASSERT_FALSE(unbound);
  EXPECT_NE(unbound.status().message().find("matmul-only"), std::string::npos);
}

// The FP32 reference over the weights a compiled image holds, dequantized: what an A16 program
// must compute exactly (up to float summation order).
std::vector<std::vector<float>> dequantized_reference(const std::string& path, const ProgramImage& img,
                                                      const std::vector<int>& tokens) {
  auto imp = import_model(path);
  std::vector<std::vector<float>> storage;
  const Graph& g = img.program.graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    auto p = weight_params(w);
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1, cols = w.shape.back();
    storage.emplace_back(static_cast<size_t>(rows * cols));
    std::vector<uint8_t> ref;  // the weight may be packed for a fast back end: unpack it first
    EXPECT_TRUE(unpack_weight(w, img.weights[i], ref));
    EXPECT_TRUE(dequantize_matrix(*p, ref, rows, cols, storage.back().data()));
    TensorSource& t = imp->model.tensors[w.name];
    t.dtype = DType::kF32;
    t.bytes = {reinterpret_cast<const uint8_t*>(storage.back().data()), storage.back().size() * 4};
  }
  auto model = ReferenceModel::create(std::move(imp->model));
  EXPECT_TRUE(model) << model.status().message();
  auto s = ReferenceSession::create(*model, 0);
  std::vector<std::vector<float>> out;
  for (int t : tokens) {
    auto l = (*s)->forward(t);
    out.emplace_back(l->begin(), l->end());
  }
  return out;
}

struct SchemeCase {
  const char* scheme;
  double vs_dequantized;  // against the FP32 reference over the dequantized weights
  double vs_fp32;         // against the original model: what the rounding costs (measured)
};

class Schemes : public ::testing::TestWithParam<SchemeCase> {};

TEST_P(Schemes, ComputeWhatTheirWeightsSay) {
  const SchemeCase c = GetParam();
  auto imp = import_model(test::shipped_model());
  CompileOptions o = options(c.scheme);
  auto img = compile_model(*imp, o, nullptr);
  ASSERT_TRUE(img) << img.status().message();
  auto deq = dequantized_reference(test::shipped_model(), *img, kTokens);
  auto fp32 = reference_logits(test::shipped_model(), kTokens);
  auto got = program_logits(*Model::create(std::move(img).value()), kTokens, 8);
  double worst_deq = 0, worst_fp32 = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    worst_deq = std::max(worst_deq, test::relative_error(got[i].data(), deq[i].data(), deq[i].size()));
    worst_fp32 = std::max(worst_fp32, test::relative_error(got[i].data(), fp32[i].data(), fp32[i].size()));
  }
  EXPECT_LT(worst_deq, c.vs_dequantized) << c.scheme;
  EXPECT_LT(worst_fp32, c.vs_fp32) << c.scheme;
  EXPECT_GT(worst_fp32, 0.0) << c.scheme << " changed nothing: was it applied?";
}

// Float schemes and W8A16 must be exact against their own dequantized weights, up to the
// summation order of the fast back end's kernels (measured up to 1.1e-5 relative over five
// layers; a wrong layout or scale gives 1e-2 and more); W4A16 also rounds the activations to 16
// bits per block of 32 (measured 8.3e-5), A8 ones to 8 bits per token (absmax / 127), which
// moves the logits by about a percent here.
INSTANTIATE_TEST_SUITE_P(All, Schemes,
                         ::testing::Values(SchemeCase{"f16", 5e-5, 2e-3}, SchemeCase{"bf16", 5e-5, 3e-2},
                                           SchemeCase{"w8a16", 5e-5, 5e-2}, SchemeCase{"w4a16", 5e-4, 0.6},
                                           SchemeCase{"w8a8", 5e-2, 6e-2}, SchemeCase{"w4a8", 0.1, 0.6}));

TEST(Schemes, W8A16PerplexityWithinOnePercentOfFp32) {
  const std::string text = test::data_path("eval/tinystory.txt");
  auto f32 = test::run_kiln("ppl " + test::shell_quote(test::shipped_model()) + " --file " + text + " --json");
  auto w8 = test::run_kiln("ppl " + test::shell_quote(test::shipped_model()) + " -q w8a16 --file " + text + " --json");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(w8.exit_code, 0) << w8.err;
  const double a = nlohmann::json::parse(f32.out)["ppl"], b = nlohmann::json::parse(w8.out)["ppl"];
  EXPECT_GT(a, 1.0);
  EXPECT_LT(std::fabs(b - a) / a, 0.01) << a << " vs " << b;
}

// ---- the .kiln file ----

std::string compile_to_file(const std::string& scheme, const std::string& name) {
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, options(scheme), &r);
  EXPECT_TRUE(img);
  auto target = resolve_target("native");
  const std::string path = test::temp_dir() + "/" + name;
  EXPECT_TRUE(write_kiln(*img, *target, r, path));
  return path;
}

TEST(KilnContext, SameInputsSameBytes) {
  const std::string a = compile_to_file("w4a16", "det_a.kiln"), b = compile_to_file("w4a16", "det_b.kiln");
  EXPECT_EQ(test::read_file(a), test::read_file(b));
}

// Rounding and packing shared among threads (rows cut among them, weights packed side by side):
// the same bytes as one thread, for every kind of layout.
TEST(KilnContext, ThreadsGiveTheSameImage) {
  auto imp = import_model(test::shipped_model());
  ASSERT_TRUE(imp);
  for (const char* scheme : {"w4a16", "q5_0", "w8a16 g32", "w8a8", "f16"}) {
    std::vector<std::vector<uint8_t>> bytes;
    for (int threads : {1, 2, 3}) {
      CompileOptions o = options(scheme);
      o.threads = threads;
      auto img = compile_model(*imp, o, nullptr);
      ASSERT_TRUE(img) << img.status().message();
      std::vector<uint8_t> all;
      for (const auto& w : img->weights) all.insert(all.end(), w.begin(), w.end());
      bytes.push_back(std::move(all));
    }
    EXPECT_EQ(bytes[0], bytes[1]) << scheme;
    EXPECT_EQ(bytes[0], bytes[2]) << scheme;
  }
}

TEST(KilnContext, RunFromKilnEqualsInMemoryCompile) {
  const std::string path = compile_to_file("w8a16", "w8.kiln");
  auto k = open_kiln_image(path, true);
  ASSERT_TRUE(k) << k.status().message();
  auto from_file = Model::create(std::move(k->image));
  ASSERT_TRUE(from_file);
  auto a = program_logits(*from_file, kTokens, 16);
  auto b = program_logits(compiled(test::shipped_model(), options("w8a16")), kTokens, 16);
  EXPECT_EQ(a, b);
}

TEST(KilnContext, W8A16GreedyEqualsFp32Golden) {
  const std::string path = compile_to_file("w8a16", "golden_w8.kiln");
  const std::string golden = test::read_file(test::data_path("golden/stories260K_greedy200.txt"));
  auto r = test::run_kiln("run " + test::shell_quote(path) + " --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, golden.size()), golden);
}

TEST(KilnContext, VerifyCatchesAFlippedByteInEverySection) {
  const std::string path = compile_to_file("w4a16", "flip.kiln");
  auto f = open_kiln(path, {});
  ASSERT_TRUE(f);
  const std::string bytes = test::read_file(path);
  for (const auto& s : (*f)->sections()) {
    std::string bad = bytes;
    bad[s.offset + s.size / 2] ^= 0x10;
    const std::string p = test::temp_dir() + "/flipped_" + kiln_section_name(s.kind) + ".kiln";
    test::write_file(p, bad);
    auto r = test::run_kiln("inspect --verify " + test::shell_quote(p));
    EXPECT_EQ(r.exit_code, 2) << kiln_section_name(s.kind) << ": " << r.err;
    auto run = test::run_kiln("run --verify " + test::shell_quote(p) + " -n 1");
    EXPECT_EQ(run.exit_code, 2) << kiln_section_name(s.kind);
  }
  auto ok = test::run_kiln("inspect --verify " + test::shell_quote(path));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// The malformed-model classes of the importers, as .kiln files whose checksums are right.
class BadKiln : public ::testing::Test {
 protected:
  void expect_bad(const std::function<void(ProgramImage&, CompileReport&)>& edit, const std::string& problem) {
    auto imp = import_model(test::shipped_model());
    CompileReport r;
    auto img = compile_model(*imp, options("w8a16"), &r);
    ASSERT_TRUE(img);
    edit(*img, r);
    const std::string path = test::temp_dir() + "/bad" + std::to_string(counter_++) + ".kiln";
    KilnWriter w(*resolve_target("native"), "kiln test");
    ASSERT_TRUE(w.add_section(KilnSection::kConfig, bytes(config_text_.empty() ? config_to_json(img->config) : config_text_)));
    ASSERT_TRUE(w.add_section(KilnSection::kTokenizer, encode_tokenizer_section(img->tokenizer)));
    ASSERT_TRUE(w.add_section(KilnSection::kProgram, bytes(program_text_.empty() ? program_to_json(img->program) : program_text_)));
    ASSERT_TRUE(w.add_section(KilnSection::kMemoryPlan, bytes(plan_to_json(img->program.plan))));
    const Graph& g = img->program.graph;
    for (size_t i = 0; i < g.weights.size(); ++i) {
      if (g.weights[i].name == skip_tensor_) continue;
      std::vector<int64_t> dims = g.weights[i].shape;
      if (g.weights[i].name == reshape_tensor_) std::swap(dims[0], dims[1]);
      auto code = static_cast<uint32_t>(g.weights[i].scheme);
      if (g.weights[i].name == recode_tensor_) code = 99;
      ASSERT_TRUE(w.add_tensor(g.weights[i].name, code, dims, {img->weights[i].begin(), img->weights[i].end()}));
    }
    ASSERT_TRUE(w.write(path));
    auto k = open_kiln_image(path, true);
    Status st = k ? Model::create(std::move(k->image)).status() : k.status();
    ASSERT_FALSE(st.is_ok()) << "accepted: " << problem;
    EXPECT_NE(st.message().find(problem), std::string::npos) << st.message();
    auto run = test::run_kiln("run " + test::shell_quote(path) + " -n 1");
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
  static std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
  std::string config_text_, program_text_, skip_tensor_, reshape_tensor_, recode_tensor_;
  int counter_ = 0;
};

TEST_F(BadKiln, MissingTensor) {
  skip_tensor_ = "blk.1.ffn_up.weight";
  expect_bad([](ProgramImage&, CompileReport&) {}, "lacks");
}
TEST_F(BadKiln, WrongShape) {
  reshape_tensor_ = "blk.0.attn_k.weight";
  recode_tensor_ = "";
  expect_bad([](ProgramImage&, CompileReport&) {}, "does not match");
}
TEST_F(BadKiln, UnknownDtype) {
  recode_tensor_ = "blk.0.attn_q.weight";
  expect_bad([](ProgramImage&, CompileReport&) {}, "does not match");
}
TEST_F(BadKiln, UnknownArchitecture) {
  config_text_ = R"({"arch": "gpt2", "dim": 64})";
  expect_bad([](ProgramImage&, CompileReport&) {}, "unknown arch 'gpt2'");
}
TEST_F(BadKiln, ZeroHeads) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    img.config.n_heads = 0;
    config_text_ = config_to_json(img.config);
  }, "n_heads");
}
TEST_F(BadKiln, NegativeVocab) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    img.config.vocab_size = -512;
    config_text_ = config_to_json(img.config);
  }, "vocab_size");
}
TEST_F(BadKiln, ProgramReadsBeforeWrite) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    std::swap(img.program.graph.nodes[1], img.program.graph.nodes[2]);
    program_text_ = program_to_json(img.program);
  }, "before it is written");
}
TEST_F(BadKiln, UnknownWeightScheme) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    program_text_ = program_to_json(img.program);
    const std::string from = "\"scheme\":\"" + std::string(scheme_name(img.program.graph.weights[0].scheme)) + "\"";
    const size_t at = program_text_.find(from);
    ASSERT_NE(at, std::string::npos) << program_text_.substr(0, 400);
    program_text_.replace(at, from.size(), "\"scheme\":\"w5a3\"");
  }, "unknown scheme 'w5a3'");
}
TEST_F(BadKiln, ValueOutsideArena) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    img.program.graph.values[3].width *= 1000;
    program_text_ = program_to_json(img.program);
  }, "does not fit");
}

TEST_F(BadKiln, BodyNodeTouchesTailValue) {
  expect_bad([this](ProgramImage& img, CompileReport&) {
    for (Node& n : img.program.graph.nodes) n.tail = n.tail && n.op != OpCode::kMatMul;  // the classifier joins the body
    program_text_ = program_to_json(img.program);
  }, "which a tail node writes");
}
TEST_F(BadKiln, TailNodeNotRowWise) {
  // Attention reads the cache at the step's positions; run on the tail's row 0 it would overrun it.
  expect_bad([this](ProgramImage& img, CompileReport&) {
    for (Node& n : img.program.graph.nodes) n.tail = n.tail || n.op == OpCode::kAttention;
    program_text_ = program_to_json(img.program);
  }, "only a row-wise op may be a tail node");
}
TEST_F(BadKiln, LogitRowsBeyondTheStep) {
  expect_bad([](ProgramImage& img, CompileReport&) { img.program.plan.logit_rows = img.program.plan.max_tokens + 1; },
             "bad logit_rows");
}
TEST_F(BadKiln, TailValueSmallerThanLogitRows) {
  // The tail's values are planned for kLogitRows rows; a plan that claims every row does not fit.
  expect_bad([](ProgramImage& img, CompileReport&) { img.program.plan.logit_rows = img.program.plan.max_tokens; },
             "does not fit");
}

TEST(KilnContext, MissingCpuFeaturesNamed) {
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, options("f16"), &r);
  KilnTarget t;
  t.backend = "cpu";
  t.cpu_features = ~0ull >> 44;  // every bit we name, and more than any one machine has
  t.cpu_feature_names = "";
  for (int b = 0; b < 20; ++b) t.cpu_feature_names += (b ? "," : "") + std::string("f") + std::to_string(b);
  const std::string path = test::temp_dir() + "/features.kiln";
  ASSERT_TRUE(write_kiln(*img, t, r, path));
  auto k = open_kiln_image(path, false);
  ASSERT_FALSE(k);
  EXPECT_NE(k.status().message().find("kiln compile --target native"), std::string::npos) << k.status().message();
}

}  // namespace
}  // namespace kiln

// Cold start: opening a .kiln and binding its program to the back ends reads no weight page.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln {
namespace {

size_t resident(const uint8_t* p, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  std::vector<unsigned char> v((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, v.data()) != 0) return SIZE_MAX;
  size_t count = 0;
  for (unsigned char c : v) count += c & 1;
  return count;
}

TEST(ColdStart, OpenAndBindReadNoWeights) {
  if (test::under_emulator()) GTEST_SKIP() << "page residency is not observable under an emulator";
  const std::string path = compile_to_file("w8a16", "cold.kiln");
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  auto mapped = MappedFile::open(path);
  ASSERT_TRUE(mapped);
  // Read-around off, so that resident pages are the pages kiln touched.
  ASSERT_EQ(madvise(const_cast<uint8_t*>((*mapped)->data()), (*mapped)->size(), MADV_RANDOM), 0);
  if (resident((*mapped)->data(), (*mapped)->size()) != 0) GTEST_SKIP() << "the file system keeps the file cached";
  auto file = open_kiln_bytes(*mapped, {});
  ASSERT_TRUE(file) << file.status().message();
  auto k = open_kiln_image(*file);
  ASSERT_TRUE(k) << k.status().message();
  auto model = Model::create(std::move(k->image));
  ASSERT_TRUE(model) << model.status().message();
  const auto weights = (*file)->section(KilnSection::kWeights);
  EXPECT_EQ(resident(weights.data(), weights.size()), 0u) << "weight pages were read at open";
  // The first token reads them.
  auto s = Session::create(*model, 16);
  const int bos = 1;
  ASSERT_TRUE((*s)->decode(std::span<const int>(&bos, 1)));
  EXPECT_GT(resident(weights.data(), weights.size()), 0u);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A model compiled for the reference back end (the reference layout: the bytes as stored, no
// repacking) in `quant`, or at the source's own precision.
Result<ProgramImage> compile_for_ref(const Import& imp, std::optional<OverridesFile> quant = std::nullopt) {
  RefBackend ref;
  CompileOptions o;
  o.quant = quant ? *quant : source_precision(imp.model);
  o.guard_classifier = false;
  o.backends = {&ref};
  return compile_model(imp, o, nullptr);
}

// A quantized GGUF as it is (issue 22 item 3): Q4_0 and Q4_1 blocks are kiln's W4A16 g32
// symmetric and asymmetric groups byte for byte, so a compile that keeps the file's own
// precision (source_precision(), the default for run and for compile of a quantized GGUF)
// stores each such tensor's bytes unchanged, F16 stays F16, and Q8_0 becomes W8A16.
TEST(Compile, QuantizedGgufKeepsItsBlocks) {
  for (const char* type : {"Q4_0", "Q4_1"}) {
    SCOPED_TRACE(type);
    const std::string path = test::data_path(std::string("gguf-quant/stories260K-") + type + ".gguf");
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    EXPECT_TRUE(has_quantized_weights(imp->model));
    auto img = compile_for_ref(*imp);
    ASSERT_TRUE(img) << img.status().message();
    const Graph& g = img->program.graph;
    int same = 0;
    for (size_t i = 0; i < g.weights.size(); ++i) {
      const WeightDesc& w = g.weights[i];
      auto src = imp->model.tensors.find(w.name);
      if (src == imp->model.tensors.end()) continue;  // a fused weight
      const TensorSource& t = src->second;
      if (t.dtype == DType::kQ4_0 || t.dtype == DType::kQ4_1) {
        EXPECT_EQ(w.scheme, Scheme::kW4A16) << w.name;
        ASSERT_EQ(img->weights[i].size(), t.bytes.size()) << w.name;
        EXPECT_TRUE(std::equal(t.bytes.begin(), t.bytes.end(), img->weights[i].begin())) << w.name;
        ++same;
      } else if (t.dtype == DType::kF16) {
        EXPECT_EQ(w.scheme, Scheme::kF16) << w.name;
      } else if (t.dtype == DType::kQ8_0) {
        EXPECT_EQ(w.scheme, Scheme::kW8A16) << w.name;
      }
    }
    EXPECT_GT(same, 0);
  }
}

// kiln run on a quantized GGUF keeps its quantization (no FP32 detour) and its greedy text is the
// compiled file's; an F32 GGUF still runs at f32 (its own precision).
TEST(Compile, RunKeepsAQuantizedGgufsPrecision) {
  const std::string q4 = test::data_path("gguf-quant/stories260K-Q4_0.gguf");
  const std::string kiln = test::temp_dir() + "/st-q4_0.kiln";
  auto c = test::run_kiln("compile " + test::shell_quote(q4) + " -o " + test::shell_quote(kiln));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("w4a16"), std::string::npos) << c.err;
  const std::string gen = " -n 40 --temp 0 -p 'Once upon a time'";
  auto from_gguf = test::run_kiln("run " + test::shell_quote(q4) + gen + " --no-cache");  // compiled in memory
  auto from_cache = test::run_kiln("run " + test::shell_quote(q4) + gen);                // through the compile cache
  auto from_kiln = test::run_kiln("run " + test::shell_quote(kiln) + gen);
  ASSERT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
  ASSERT_EQ(from_cache.exit_code, 0) << from_cache.err;
  EXPECT_EQ(from_gguf.out, from_kiln.out);
  EXPECT_EQ(from_cache.out, from_kiln.out);
  EXPECT_NE(from_gguf.err.find("compiled in memory (w4a16, its own precision)"), std::string::npos) << from_gguf.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// An IQ4_NL GGUF (llama-quantize's, tests/gen/make_stories_quantized.sh): kept at the file's own
// precision its IQ4_NL tensors become W8A16 g32, each block's levels as int8 under its own scale,
// so they dequantize to exactly the blocks' values; compiled at f32 every weight is those values
// too, and that program's logits are the reference pass's over the same file.
TEST(Compile, Iq4NlGgufKeepsItsPrecisionOrDequantizesExactly) {
  const std::string path = test::data_path("gguf-quant/stories260K-IQ4_NL.gguf");
  auto imp = import_model(path);
  ASSERT_TRUE(imp) << imp.status().message();
  EXPECT_TRUE(has_quantized_weights(imp->model));
  auto img = compile_for_ref(*imp);
  ASSERT_TRUE(img) << img.status().message();
  int iq4 = 0;
  for (const WeightDesc& w : img->program.graph.weights) {
    auto src = imp->model.tensors.find(w.name);
    if (src == imp->model.tensors.end() || src->second.dtype != DType::kIQ4_NL) continue;
    EXPECT_EQ(w.scheme, Scheme::kW8A16) << w.name;
    auto p = weight_params(w);
    ASSERT_TRUE(p) << w.name;
    EXPECT_EQ(p->w8_group, 32) << w.name;
    const size_t i = static_cast<size_t>(&w - img->program.graph.weights.data());
    std::vector<float> want(src->second.elements()), got(want.size());
    ASSERT_TRUE(dequantize(DType::kIQ4_NL, src->second.bytes, want));
    ASSERT_TRUE(dequantize_matrix(*p, img->weights[i], w.shape.size() == 2 ? w.shape[0] : 1, w.shape.back(), got.data()));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << w.name;
    ++iq4;
  }
  EXPECT_EQ(iq4, 5 * 6 + 1);  // q, k, v, o, gate, up of 5 layers, and the embedding
  OverridesFile f32;
  f32.defaults.scheme = Scheme::kF32;
  auto exact = compile_for_ref(*imp, f32);
  ASSERT_TRUE(exact) << exact.status().message();
  const Graph& g = exact->program.graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    auto src = imp->model.tensors.find(g.weights[i].name);
    if (src == imp->model.tensors.end() || src->second.dtype != DType::kIQ4_NL) continue;
    std::vector<float> want(src->second.elements());
    ASSERT_TRUE(dequantize(DType::kIQ4_NL, src->second.bytes, want));
    ASSERT_EQ(exact->weights[i].size(), want.size() * 4) << g.weights[i].name;
    EXPECT_EQ(std::memcmp(exact->weights[i].data(), want.data(), want.size() * 4), 0) << g.weights[i].name;
  }
  auto model = Model::create(std::move(*exact));
  ASSERT_TRUE(model) << model.status().message();
  auto s = Session::create(*model, 32);
  ASSERT_TRUE(s) << s.status().message();
  auto rimp = import_model(path);
  ASSERT_TRUE(rimp);
  auto rmodel = ReferenceModel::create(std::move(rimp->model));
  ASSERT_TRUE(rmodel) << rmodel.status().message();
  auto rs = ReferenceSession::create(*rmodel, 0);
  ASSERT_TRUE(rs);
  for (int t : {1, 403, 407, 261, 378, 429, 271, 280}) {
    auto want = (*rs)->forward(t);
    ASSERT_TRUE(want);
    auto got = (*s)->decode(std::span<const int>(&t, 1));
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_LT(test::relative_error(got->data(), want->data(), want->size()), 1e-6) << "token " << t;
  }
}

// Issue 38 item 17: `kiln inspect x.kiln` says whether the file stores a chat template (kiln chat
// and the server's chat completions need one), in its text and in --json.
TEST(Compile, InspectSaysWhetherAChatTemplateIsStored) {
  const std::string tpl = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:";
  const fs::path dir = fs::path(test::temp_dir()) / "templated";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(test::data_path("stories260K-hf")))
    fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
  auto cfg = nlohmann::json::parse(test::read_file((dir / "tokenizer_config.json").string()));
  cfg["chat_template"] = tpl;
  test::write_file((dir / "tokenizer_config.json").string(), cfg.dump(2));
  const std::string with = test::temp_dir() + "/with-template.kiln", without = test::temp_dir() + "/without-template.kiln";
  ASSERT_EQ(test::run_kiln("compile " + test::shell_quote(dir.string()) + " -q f32 -o " + test::shell_quote(with)).exit_code, 0);
  ASSERT_EQ(test::run_kiln("compile " + test::shell_quote(test::shipped_model()) + " -o " + test::shell_quote(without)).exit_code, 0);
  auto a = test::run_kiln("inspect " + test::shell_quote(with));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("\nchat template: stored (" + std::to_string(tpl.size()) +
                       " bytes; kiln chat and kiln serve's chat completions use it)\n"),
            std::string::npos)
      << a.out;
  auto b = test::run_kiln("inspect " + test::shell_quote(without));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("\nchat template: none stored (kiln chat needs --chat-template FILE; kiln serve answers completions only)\n"),
            std::string::npos)
      << b.out;
  const auto ja = nlohmann::json::parse(test::run_kiln("inspect --json " + test::shell_quote(with)).out);
  EXPECT_EQ(ja["chat_template"]["stored"], true);
  EXPECT_EQ(ja["chat_template"]["bytes"], tpl.size());
  const auto jb = nlohmann::json::parse(test::run_kiln("inspect --json " + test::shell_quote(without)).out);
  EXPECT_EQ(jb["chat_template"]["stored"], false);
}

}  // namespace
}  // namespace kiln
