// Qwen3 (Qwen3ForCausalLM): per-head RMSNorm of q and k before RoPE, no qkv bias, head_dim other
// than hidden / heads. The tiny model of tests/data/hf-tiny/qwen3/ (tests/gen/make_hf_tiny_qwen3.py:
// transformers' logits and greedy tokens, and a GGUF in llama.cpp's naming) through every path:
// the FP32 reference pass, the compiled program (fused, unfused, on the reference back end, in
// steps of several tokens), from the HF folder and from the GGUF; the head-norm op of every CPU
// kernel table against the reference; bad inputs; the kiln synth presets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "backends/ref/kernels.h"
#include "backends/ref/ref_backend.h"
#include "compiler/kiln_writer.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "formats/hf_config.h"
#include "formats/import.h"
#include "graph/builder.h"
#include "graph/weight_params.h"
#include "model_paths.h"
#include "reference/reference_session.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "test_util.h"
#include "tokenizer/bytelevel_bpe.h"
#include "tools/synth/synth_model.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::compiled;
using test::greedy;
using test::program_logits;
using test::reference_logits;
using test::reference_model;
using nlohmann::json;

const std::string kDir = "hf-tiny/qwen3";

std::string folder() { return test::data_path(kDir); }
std::string gguf() { return test::data_path(kDir + "/model.gguf"); }
json reference() { return json::parse(test::read_file(folder() + "/reference.json")); }

CompileOptions options(bool fuse = true) { return test::tiny_model_options(fuse); }

TEST(Qwen3, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kQwen3);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(c.qkv_bias);
    EXPECT_EQ(c.head_dim, 24);
    EXPECT_NE(c.head_dim, c.dim / c.n_heads);
    EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
    EXPECT_FALSE(c.tie_embeddings);
    EXPECT_EQ(imp->model.tensors.at("blk.1.attn_k_norm.weight").shape, std::vector<int64_t>{24});
  }
}

// Both files hold the same weights and mean the same model: one reference.
TEST(Qwen3, ReferencePassMatchesTransformers) {
  test::expect_reference_pass_matches("qwen3", {folder(), gguf()}, [](const std::string&) { return reference(); });
}

TEST(Qwen3, CompiledProgramMatchesTransformers) {
  test::expect_compiled_matches("qwen3", {folder(), gguf()}, [](const std::string&) { return reference(); },
                                [](bool fuse) { return options(fuse); }, {1, 5, 64});
}

// The program against the reference pass on the same weights, tighter than against transformers:
// the CPU back end, and the reference back end alone (partitioned to it).
TEST(Qwen3, CompiledProgramMatchesReferencePass) {
  const std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7, 250, 1, 11, 64, 128, 299, 0};
  const auto want = reference_logits(reference_model(folder()), tokens);
  RefBackend ref;
  CompileOptions only_ref = options();
  only_ref.backends = {&ref};
  const Backend* bind[] = {&ref};
  for (const auto& m : {compiled(folder(), options()), compiled(gguf(), options()), compiled(folder(), only_ref, bind)}) {
    ASSERT_TRUE(m);
    for (size_t chunk : {size_t{1}, size_t{4}, tokens.size()}) {
      const auto got = program_logits(m, tokens, chunk);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(test::relative_error(got[i].data(), want[i].data(), want[i].size()), 1e-5) << "chunk " << chunk << " position " << i;
    }
  }
}

TEST(Qwen3, FusionKeepsTheHeadNormsBeforeTheFusedRope) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  CompileReport r;
  auto img = compile_model(*imp, options(), &r);
  ASSERT_TRUE(img) << img.status().message();
  EXPECT_EQ(r.fusion.qkv, 2);
  EXPECT_EQ(r.fusion.rope_kv, 2);
  EXPECT_EQ(r.fusion.norm, 4);
  const Graph& g = img->program.graph;
  int head_norms = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpCode::kHeadRmsNorm) continue;
    ++head_norms;
    const WeightDesc& w = g.weights[static_cast<size_t>(n.weights[0])];
    EXPECT_EQ(w.scheme, Scheme::kF32) << w.name;  // norms stay f32, like the others
    EXPECT_EQ(w.shape, std::vector<int64_t>{24});
    EXPECT_EQ(n.head_dim, 24);
    // Its output is what the fused rope + KV store reads.
    bool read_by_rope = false;
    for (size_t j = i + 1; j < g.nodes.size(); ++j)
      if (g.nodes[j].op == OpCode::kRopeKvStore)
        read_by_rope |= std::find(g.nodes[j].inputs.begin(), g.nodes[j].inputs.end(), n.outputs[0]) != g.nodes[j].inputs.end();
    EXPECT_TRUE(read_by_rope);
  }
  EXPECT_EQ(head_norms, 4);
  // A w4a16 compile leaves the head norms f32 too.
  CompileOptions o = options();
  o.quant = *overrides_from_flags("w4a16", 32, true, true);
  auto q = compile_model(*imp, o, nullptr);
  ASSERT_TRUE(q) << q.status().message();
  for (const WeightDesc& w : q->program.graph.weights)
    if (w.name.find("_norm") != std::string::npos) {
      EXPECT_EQ(w.scheme, Scheme::kF32) << w.name;
    }
}

TEST(Qwen3, GreedyTokensEqualTransformersOnEveryPath) {
  const json ref = reference();
  const auto prompt = ref["greedy"]["prompt"].get<std::vector<int>>();
  const auto want = ref["greedy"]["tokens"].get<std::vector<int>>();
  ASSERT_EQ(want.size(), 20u);
  for (const std::string& path : {folder(), gguf()}) {
    auto s = ReferenceSession::create(reference_model(path), 0);
    ASSERT_TRUE(s);
    EXPECT_EQ(greedy(**s, prompt, want.size()), want) << "reference pass, " << path;
    auto p = Session::create(compiled(path, options()), 0);
    ASSERT_TRUE(p);
    EXPECT_EQ(greedy(**p, prompt, want.size()), want) << "compiled program, " << path;
  }
}

// A byte-level tokenizer of exactly the model's 300 tokens: the 256 byte symbols, then the 44
// pairs of a letter in a..k and one in a..d, each with its merge.
std::string tiny_tokenizer() {
  json vocab = json::object();
  json merges = json::array();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = id++;
  for (char x = 'a'; x <= 'k'; ++x)
    for (char y = 'a'; y <= 'd'; ++y) {
      vocab[std::string{x, y}] = id++;
      merges.push_back(std::string{x, ' ', y});
    }
  EXPECT_EQ(id, 300);
  const json j = {{"version", "1.0"},
                  {"added_tokens", json::array()},
                  {"normalizer", nullptr},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
                  {"post_processor", {{"type", "ByteLevel"}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const std::string path = test::temp_dir() + "/qwen3_tiny_tokenizer.json";
  test::write_file(path, j.dump());
  return path;
}

// `kiln run --temp 0` prints the same text from the folder, the GGUF and a compiled .kiln.
TEST(Qwen3, GreedyTextSameFromFolderGgufAndKiln) {
  const std::string tok = test::shell_quote(tiny_tokenizer());
  const std::string kiln = test::temp_dir() + "/qwen3_tiny.kiln";
  auto c = test::run_kiln("compile " + test::shell_quote(folder()) + " -q f32 --tokenizer " + tok + " -o " +
                          test::shell_quote(kiln));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  std::string first;
  for (const std::string& model : {folder(), gguf(), kiln}) {
    const std::string args = "run " + test::shell_quote(model) + (model == kiln ? "" : " --tokenizer " + tok) +
                             " -p 'abc cab' -n 24 --temp 0";
    auto r = test::run_kiln(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    EXPECT_FALSE(r.out.empty());
    if (first.empty()) first = r.out;
    EXPECT_EQ(r.out, first) << model;
  }
}

// ---- the head norm op: every CPU table and both back ends against ref::head_rmsnorm ----

std::vector<float> random_vector(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<const cpu::KernelTable*> tables() {
  const cpu::KernelTable* t[8];
  const int n = cpu::available_kernel_tables(host_cpu_features(), t, 8);
  return {t, t + n};
}

TEST(HeadRmsNorm, EveryTableMatchesTheReference) {
  std::mt19937 rng(11);
  for (const cpu::KernelTable* t : tables()) {
    ASSERT_NE(t->head_rmsnorm, nullptr) << t->name;
    for (int heads : {1, 2, 3, 16})
      for (int hd : {2, 8, 17, 24, 64, 128, 256}) {
        SCOPED_TRACE(std::string(t->name) + " heads " + std::to_string(heads) + " head_dim " + std::to_string(hd));
        const auto n = static_cast<size_t>(heads * hd);
        auto x = random_vector(rng, n, 3.0f), w = random_vector(rng, static_cast<size_t>(hd), 1.0f);
        x[0] *= 100.0f;  // one head far larger than the others: each head has its own scale
        std::vector<float> a(n), b(n);
        ref::head_rmsnorm(a.data(), x.data(), w.data(), heads, hd, 1e-6f);
        t->head_rmsnorm(b.data(), x.data(), w.data(), heads, hd, 1e-6f);
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 2e-6 * std::fabs(a[i]) + 1e-7) << i;
        // Each head is the plain RMSNorm of its own elements, and in place gives the same.
        std::vector<float> one(static_cast<size_t>(hd));
        ref::rmsnorm(one.data(), x.data() + (heads - 1) * hd, w.data(), hd, 1e-6f);
        for (int i = 0; i < hd; ++i) EXPECT_EQ(a[static_cast<size_t>((heads - 1) * hd + i)], one[static_cast<size_t>(i)]);
        std::vector<float> c = x;
        t->head_rmsnorm(c.data(), c.data(), w.data(), heads, hd, 1e-6f);
        EXPECT_EQ(c, b);
      }
  }
}

// One kHeadRmsNorm node prepared by each back end (the CPU one with each table this machine has)
// and run over several tokens, the tail flag off: every row normalised head by head.
TEST(HeadRmsNorm, BackEndsRunTheNode) {
  const int heads = 6, hd = 40, T = 5, W = heads * hd;
  Graph g;
  g.add_value("x", W);
  g.add_value("y", W);
  WeightDesc wd;
  wd.name = "blk.0.attn_q_norm.weight";
  wd.shape = {hd};
  g.add_weight(wd);
  Node n;
  n.op = OpCode::kHeadRmsNorm;
  n.inputs = {0};
  n.outputs = {1};
  n.weights = {0};
  n.layer = 0;
  n.n_heads = heads;
  n.head_dim = hd;
  n.eps = 1e-6f;
  std::mt19937 rng(5);
  const auto x = random_vector(rng, static_cast<size_t>(T * W), 2.0f);
  const auto w = random_vector(rng, static_cast<size_t>(hd), 1.0f);
  std::vector<float> want(static_cast<size_t>(T * W));
  for (int t = 0; t < T; ++t) ref::head_rmsnorm(want.data() + t * W, x.data() + t * W, w.data(), heads, hd, 1e-6f);
  const BoundWeight bw{&g.weights[0], {reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4}};
  const std::vector<int64_t> offsets = {0, int64_t{T} * W * 4};
  RefBackend ref;
  CpuBackend cpu;
  ThreadPool pool(3);
  ModelConstants constants;
  auto run = [&](const Backend& b, uint64_t features) {
    PrepareOptions po;
    po.cpu_features = features;
    auto k = b.prepare(n, g, {&bw, 1}, offsets, T, po);
    EXPECT_TRUE(k) << k.status().message();
    if (!k) return std::vector<float>{};
    std::vector<float> arena(static_cast<size_t>(2 * T * W));
    std::memcpy(arena.data(), x.data(), x.size() * 4);
    std::vector<uint8_t> scratch(b.scratch_bytes(g, T, 16) + 64);
    StepContext ctx;
    ctx.arena = reinterpret_cast<uint8_t*>(arena.data());
    ctx.n_tokens = T;
    ctx.n_ctx = 16;
    ctx.model = &constants;
    ctx.scratch = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    ctx.pool = &pool;
    EXPECT_TRUE((*k)->run(ctx));
    return std::vector<float>(arena.begin() + T * W, arena.end());
  };
  EXPECT_EQ(run(ref, 0), want);
  for (const cpu::KernelTable* t : tables()) {
    ASSERT_TRUE(cpu.supports(n, g));
    const auto got = run(cpu, t->features);
    ASSERT_EQ(got.size(), want.size()) << t->name;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-7) << t->name << " " << i;
  }
  // A norm weight of the wrong size is refused at prepare, by name, not read past its end.
  const BoundWeight short_w{&g.weights[0], {reinterpret_cast<const uint8_t*>(w.data()), (w.size() - 2) * 4}};
  for (const Backend* b : {static_cast<const Backend*>(&ref), static_cast<const Backend*>(&cpu)}) {
    auto k = b->prepare(n, g, {&short_w, 1}, offsets, T, PrepareOptions{host_cpu_features()});
    ASSERT_FALSE(k) << b->name();
    EXPECT_NE(k.status().message().find("blk.0.attn_q_norm.weight"), std::string::npos) << k.status().message();
  }
}

// ---- bad input ----

std::string copy_folder(const std::string& name) {
  const std::string dir = test::temp_dir() + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(folder() + "/" + f, dir + "/" + f);
  return dir;
}

// Rewrites the safetensors header of `dir`, keeping the data bytes.
void edit_header(const std::string& dir, const std::function<void(json&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  std::string b = test::read_file(path);
  uint64_t n;
  std::memcpy(&n, b.data(), 8);
  json h = json::parse(b.substr(8, n));
  edit(h);
  const std::string hs = h.dump();
  const uint64_t m = hs.size();
  test::write_file(path, std::string(reinterpret_cast<const char*>(&m), 8) + hs + b.substr(8 + n));
}

void expect_rejected(const std::string& path, const std::string& problem) {
  auto imp = import_model(path);
  ASSERT_FALSE(imp) << path << " was accepted";
  EXPECT_NE(imp.status().message().find(problem), std::string::npos) << imp.status().message();
  auto r = test::run_kiln("run " + test::shell_quote(path) + " -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << r.err;
}

TEST(Qwen3BadInput, QNormOfTheWrongWidthInTheFolder) {
  const std::string dir = copy_folder("qwen3-qnorm-width");
  edit_header(dir, [](json& h) {
    auto& t = h["model.layers.1.self_attn.q_norm.weight"];
    t["shape"] = {16};  // hidden / heads, the width a reader that ignores head_dim would expect
    t["data_offsets"][1] = t["data_offsets"][0].get<int64_t>() + 64;
  });
  expect_rejected(dir, "tensor 'model.layers.1.self_attn.q_norm.weight' has shape [16], expected [24] from the config");
}

TEST(Qwen3BadInput, MissingKNormInTheFolder) {
  const std::string dir = copy_folder("qwen3-no-knorm");
  edit_header(dir, [](json& h) { h.erase("model.layers.0.self_attn.k_norm.weight"); });
  expect_rejected(dir, "missing tensor 'blk.0.attn_k_norm.weight'");
}

TEST(Qwen3BadInput, SlidingWindowRefused) {
  const std::string dir = copy_folder("qwen3-sliding");
  json j = json::parse(test::read_file(dir + "/config.json"));
  j["use_sliding_window"] = true;
  test::write_file(dir + "/config.json", j.dump());
  expect_rejected(dir, "use_sliding_window true is not supported for qwen3");
}

// The GGUF's tensor info of blk.0.attn_q_norm.weight: its first dimension (after the name, the
// u32 dimension count) set to `width`.
std::string gguf_with_q_norm_width(uint64_t width) {
  std::string b = test::read_file(gguf());
  const std::string name = "blk.0.attn_q_norm.weight";
  const size_t at = b.find(name);
  EXPECT_NE(at, std::string::npos);
  uint32_t dims;
  std::memcpy(&dims, b.data() + at + name.size(), 4);
  EXPECT_EQ(dims, 1u);
  std::memcpy(b.data() + at + name.size() + 4, &width, 8);
  return b;
}

TEST(Qwen3BadInput, QNormOfTheWrongWidthInTheGguf) {
  const std::string path = test::temp_dir() + "/qwen3-qnorm-width.gguf";
  test::write_file(path, gguf_with_q_norm_width(16));
  expect_rejected(path, "tensor 'blk.0.attn_q_norm.weight' has shape [16], expected [24] from the config");
  // A width that runs past the data is caught before anything reads it.
  test::write_file(path, gguf_with_q_norm_width(uint64_t{1} << 30));
  expect_rejected(path, "run past the end of the data");
}

TEST(Qwen3BadInput, GraphWithAHeadNormOfTheWrongShape) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  auto g = build_decoder_graph(imp->model.config);
  ASSERT_TRUE(g) << g.status().message();
  ASSERT_TRUE(verify_graph(*g));
  const int wi = g->find_weight("blk.0.attn_k_norm.weight");
  ASSERT_GE(wi, 0);
  Graph bad = *g;
  bad.weights[static_cast<size_t>(wi)].shape = {16};
  auto st = verify_graph(bad);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("head_rms_norm"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[head_dim]"), std::string::npos) << st.message();
  bad = *g;
  for (Node& n : bad.nodes)
    if (n.op == OpCode::kHeadRmsNorm) n.n_heads += 1;
  st = verify_graph(bad);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("n_heads * head_dim"), std::string::npos) << st.message();
}

// ---- kiln synth ----

TEST(Qwen3Synth, PresetsHaveThePublishedShapes) {
  struct Want {
    const char* preset;
    int dim, hidden, layers, heads, kv, head_dim;
    uint64_t parameters;  // summed from the shapes: embedding, 28 layers with their q/k norms, final norm
  };
  for (const Want& want : {Want{"qwen3-0.6b", 1024, 3072, 28, 16, 8, 128, 596049920ull},
                           Want{"qwen3-1.7b", 2048, 6144, 28, 16, 8, 128, 1720574976ull}}) {
    SCOPED_TRACE(want.preset);
    auto p = find_synth_preset(want.preset);
    ASSERT_TRUE(p) << p.status().message();
    auto c = parse_hf_config(synth_config_json(*p, 0, DType::kBF16, 0), "", "config.json");
    ASSERT_TRUE(c) << c.status().message();
    EXPECT_EQ(c->arch, Arch::kQwen3);
    EXPECT_EQ(c->dim, want.dim);
    EXPECT_EQ(c->hidden_dim, want.hidden);
    EXPECT_EQ(c->n_layers, want.layers);
    EXPECT_EQ(c->n_heads, want.heads);
    EXPECT_EQ(c->n_kv_heads, want.kv);
    EXPECT_EQ(c->head_dim, want.head_dim);
    EXPECT_EQ(c->vocab_size, 151936);
    EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
    EXPECT_TRUE(c->tie_embeddings);
    EXPECT_TRUE(c->qk_norm);
    EXPECT_FALSE(c->qkv_bias);
    uint64_t params = 0;
    for (const SynthTensor& t : synth_tensors(*p, 0)) params += t.elements();
    EXPECT_EQ(params, want.parameters);
  }
}

TEST(Qwen3Synth, TinyFolderImportsCompilesAndMatchesTheReference) {
  const std::string dir = test::temp_dir() + "/synth-tiny-qwen3";
  fs::remove_all(dir);
  SynthOptions o;
  o.preset = "tiny-qwen3";
  o.out_dir = dir;
  o.seed = 4;
  auto r = write_synth_model(o);
  ASSERT_TRUE(r) << r.status().message();
  auto imp = import_model(dir);
  ASSERT_TRUE(imp) << imp.status().message();
  EXPECT_TRUE(imp->model.config.qk_norm);
  EXPECT_EQ(imp->model.config.head_dim, 32);
  const std::vector<int> tokens = {1, 300, 17, 400, 5, 639};
  const auto want = reference_logits(reference_model(dir), tokens);
  const auto got = program_logits(compiled(dir, options()), tokens, 3);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LT(test::relative_error(got[i].data(), want[i].data(), want[i].size()), 1e-5) << "position " << i;
}

}  // namespace
}  // namespace kiln
