// Phi-3 (Phi3ForCausalLM): the Llama decoder with q, k and v fused in one matrix and gate and up in
// another, and sliding-window attention on every layer; Phi-3-mini-128k and Phi-3.5 add LongRoPE.
// The tiny models of tests/data/hf-tiny/phi3/ and phi3-longrope/ (tests/gen/make_hf_tiny_phi3.py:
// transformers' logits and greedy tokens, and the GGUFs as llama.cpp's converter writes them, the
// fused tensors kept) through the FP32 reference pass and the compiled program; the fused tensors
// imported as views of their rows; bad shapes and what kiln lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backends/ref/ref_backend.h"
#include "formats/fused_projections.h"
#include "formats/hf_config.h"
#include "model_paths.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::compiled;
using test::greedy;
using test::program_logits;
using test::reference_logits;
using test::reference_model;

std::string folder() { return test::data_path("hf-tiny/phi3"); }
std::string gguf() { return test::data_path("hf-tiny/phi3/model.gguf"); }
std::string longrope() { return test::data_path("hf-tiny/phi3-longrope"); }
std::string longrope_gguf() { return test::data_path("hf-tiny/phi3-longrope/model.gguf"); }
std::string partial() { return test::data_path("hf-tiny/phi3-partial"); }
std::string partial_gguf() { return test::data_path("hf-tiny/phi3-partial/model.gguf"); }
// Each file with the reference of its folder.
const std::vector<std::string> kPaths = {folder(), gguf(), longrope(), longrope_gguf(), partial(), partial_gguf()};
json reference_for(const std::string& path) {
  const std::string dir = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0 ? fs::path(path).parent_path().string() : path;
  return json::parse(test::read_file(dir + "/reference.json"));
}
json reference() { return reference_for(folder()); }

TEST(Phi3, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kPhi3);
    EXPECT_EQ(c.sliding_window, 5);
    EXPECT_TRUE(c.sliding_layers.empty());  // every layer
    EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
    EXPECT_FALSE(c.tie_embeddings);
    EXPECT_EQ(c.n_kv_heads, 2);
    // The fused tensors are gone, their parts views of the same file's bytes, no copy.
    const auto& t = imp->model.tensors;
    EXPECT_EQ(t.count("blk.0.attn_qkv.weight"), 0u);
    EXPECT_EQ(t.count("blk.0.ffn_gate_up.weight"), 0u);
    const TensorSource &q = t.at("blk.1.attn_q.weight"), &k = t.at("blk.1.attn_k.weight"), &v = t.at("blk.1.attn_v.weight");
    EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(k.shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(v.shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(q.bytes.data() + q.bytes.size(), k.bytes.data());
    EXPECT_EQ(k.bytes.data() + k.bytes.size(), v.bytes.data());
    const TensorSource &g = t.at("blk.2.ffn_gate.weight"), &u = t.at("blk.2.ffn_up.weight");
    EXPECT_EQ(g.shape, (std::vector<int64_t>{96, 64}));
    EXPECT_EQ(g.bytes.data() + g.bytes.size(), u.bytes.data());
  }
}

TEST(Phi3, ReferencePassMatchesTransformers) { test::expect_reference_pass_matches("phi3", kPaths, reference_for); }

TEST(Phi3, CompiledProgramMatchesTransformers) {
  test::expect_compiled_matches("phi3", kPaths, reference_for, [](bool fuse) { return test::tiny_model_options(fuse); }, {1, 4, 64});
}

TEST(Phi3, GreedyTokensEqualTransformersOnEveryPath) {
  test::expect_greedy_matches(kPaths, reference_for, test::tiny_model_options());
}

// A quantized compile reads the row views as any other weight.
TEST(Phi3, QuantizedCompileRuns) {
  auto q = compiled(folder(), test::tiny_model_options(true, "w8a16"));
  ASSERT_TRUE(q);
  const json ref = reference();
  const auto tokens = ref["prompts"][2].get<std::vector<int>>();
  const auto got = program_logits(q, tokens, tokens.size());
  ASSERT_EQ(got.size(), tokens.size());
  const auto want = ref["logits"][2][tokens.size() - 1].get<std::vector<float>>();
  EXPECT_LT(test::relative_error(got.back().data(), want.data(), want.size()), 0.05);
}

TEST(Phi3, BadShapesAndWhatKilnLacksAreClearErrors) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  // A fused matrix one row short names itself and both shapes.
  ImportedModel m;
  m.path = "phi3";
  m.config = imp->model.config;
  m.config.n_layers = 1;
  TensorSource qkv = imp->model.tensors.at("blk.0.attn_q.weight");
  qkv.name = "model.layers.0.self_attn.qkv_proj.weight";
  qkv.shape = {127, 64};
  qkv.bytes = qkv.bytes.first(127 * 64 * 4);
  m.tensors["blk.0.attn_qkv.weight"] = qkv;
  auto bad = split_fused_projections(m, "attn_qkv.weight", "ffn_gate_up.weight");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("'model.layers.0.self_attn.qkv_proj.weight' has shape [127, 64], expected [128, 64]"),
            std::string::npos)
      << bad.message();
  m.tensors.clear();
  bad = split_fused_projections(m, "attn_qkv.weight", "ffn_gate_up.weight");
  EXPECT_NE(bad.message().find("missing tensor 'blk.0.attn_qkv.weight'"), std::string::npos) << bad.message();

  const std::string base = test::read_file(folder() + "/config.json");
  auto with_rope = [&](const json& rope) {
    json j = json::parse(base);
    j["rope_parameters"] = rope;
    return parse_hf_config(j.dump(), "", "config.json");
  };
  auto above = with_rope({{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 1.5}});
  ASSERT_FALSE(above);
  EXPECT_NE(above.status().message().find("partial_rotary_factor must be in (0, 1]"), std::string::npos) << above.status().message();
  auto three = with_rope({{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.1875}});
  ASSERT_FALSE(three);
  EXPECT_NE(three.status().message().find("turns 3 elements of a head of 16"), std::string::npos) << three.status().message();
  auto short_list = with_rope({{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", {1.0, 2.0}},
                               {"long_factor", {1, 1, 1, 1, 1, 1, 1, 1}}});
  ASSERT_FALSE(short_list);
  EXPECT_NE(short_list.status().message().find("short_factor must be a list of 8 numbers (one per rotated pair of a head)"), std::string::npos)
      << short_list.status().message();
  auto yarn = with_rope({{"rope_type", "yarn"}, {"rope_theta", 10000.0}});
  ASSERT_FALSE(yarn);
  EXPECT_NE(yarn.status().message().find("type 'yarn' is not supported"), std::string::npos) << yarn.status().message();
}

// RoPE over half of each head (Phi-4-mini turns 3/4), from the folder and the GGUF, kept in a .kiln.
TEST(Phi3, PartialRotaryConfig) {
  for (const std::string& path : {partial(), partial_gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    EXPECT_EQ(imp->model.config.rotary_dim, 8);
    EXPECT_EQ(imp->model.config.head_dim, 16);
    EXPECT_TRUE(imp->model.config.tie_embeddings);
  }
  auto imp = import_model(partial());
  ASSERT_TRUE(imp);
  auto img = compile_model(*imp, test::tiny_model_options(), nullptr);
  ASSERT_TRUE(img) << img.status().message();
  EXPECT_EQ(img->program.rope_inv_freq.size(), 4u);
}

// LongRoPE from the folder and the GGUF: the short factors, the attention factor transformers
// derives (sqrt(1 + ln 4 / ln 64)), the original context of 64 positions (a session's default,
// past which the long factors turn), the whole 256 for a session that asks.
TEST(Phi3, LongRopeConfigAndItsContext) {
  for (const std::string& path : {longrope(), longrope_gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const RopeScaling& r = imp->model.config.rope_scaling;
    EXPECT_EQ(r.type, RopeScaling::Type::kLongRope);
    EXPECT_EQ(r.short_factor.size(), 8u);
    EXPECT_FLOAT_EQ(r.short_factor[1], 1.3823f);
    EXPECT_FLOAT_EQ(r.long_factor[2], 5.7174f);
    EXPECT_NEAR(r.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(64.0)), 1e-6);
    EXPECT_EQ(r.original_max_position, 64);
    EXPECT_EQ(imp->model.config.max_seq_len, 256);
    EXPECT_EQ(imp->model.config.short_rope_context(), 64);
    EXPECT_FALSE(r.long_factors_for(64));
    EXPECT_TRUE(r.long_factors_for(65));
  }
  auto m = compiled(longrope(), test::tiny_model_options());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->program().rope_inv_freq_long.size(), 8u);
  auto s = Session::create(m, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->n_ctx(), 64);
  EXPECT_TRUE(Session::create(m, 65));
  EXPECT_TRUE(Session::create(m, 256));
  EXPECT_FALSE(Session::create(m, 257));
  auto rs = ReferenceSession::create(reference_model(longrope()), 0);
  ASSERT_TRUE(rs);
  EXPECT_EQ((*rs)->n_ctx(), 64);
}

// Past the original context: an 80-token prompt (tests/data/hf-tiny/phi3-longrope/reference_long.json,
// transformers' logits of it in one forward pass, every position by the long factors) in a session
// of 128 positions, through the reference pass and the compiled program in steps of 1, 7 and 32
// tokens and in one step of 80, within 1e-4 relative; and the 20 greedy tokens after it on every path.
json long_reference() { return json::parse(test::read_file(longrope() + "/reference_long.json")); }

std::vector<std::vector<float>> session_logits(Session& d, const std::vector<int>& tokens, size_t chunk, int vocab) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    auto l = d.decode_all(std::span<const int>(tokens).subspan(i, n));
    EXPECT_TRUE(l) << l.status().message();
    if (!l) return out;
    for (size_t t = 0; t < n; ++t)
      out.emplace_back(l->begin() + static_cast<ptrdiff_t>(t * static_cast<size_t>(vocab)),
                       l->begin() + static_cast<ptrdiff_t>((t + 1) * static_cast<size_t>(vocab)));
  }
  return out;
}

TEST(Phi3, LongRopePastTheOriginalContextMatchesTransformers) {
  const json ref = long_reference();
  ASSERT_EQ(ref["prompts"][0].size(), 80u);
  const auto prompt = ref["greedy"]["prompt"].get<std::vector<int>>();
  const auto want = ref["greedy"]["tokens"].get<std::vector<int>>();
  ASSERT_EQ(want.size(), 20u);
  constexpr int kCtx = 128;
  RefBackend rb;
  CompileOptions only_ref = test::tiny_model_options();
  only_ref.backends = {&rb};
  const Backend* bind[] = {&rb};
  for (const std::string& path : {longrope(), longrope_gguf()}) {
    SCOPED_TRACE(path);
    auto rm = reference_model(path);
    ASSERT_TRUE(rm);
    const double ref_worst = test::worst_against(ref, [&](const std::vector<int>& t) {
      auto s = ReferenceSession::create(rm, kCtx);
      EXPECT_TRUE(s);
      std::vector<std::vector<float>> out;
      for (size_t i = 0; s && i < t.size(); ++i) {
        auto l = (*s)->forward(t[i]);
        if (!l) break;
        out.emplace_back(l->begin(), l->end());
      }
      return out;
    });
    std::printf("phi3 longrope past 64, reference pass from %s: max relative logit error %.3g\n",
                test::file_name(path).c_str(), ref_worst);
    EXPECT_LT(ref_worst, 1e-4);
    auto rs = ReferenceSession::create(rm, kCtx);
    ASSERT_TRUE(rs);
    EXPECT_EQ(greedy(**rs, prompt, want.size()), want) << "reference pass";
    for (bool fuse : {false, true}) {
      auto m = compiled(path, test::tiny_model_options(fuse));
      ASSERT_TRUE(m);
      for (size_t chunk : {size_t{1}, size_t{7}, size_t{32}}) {  // 32: the most rows a step returns
        const double worst = test::worst_against(ref, [&](const std::vector<int>& t) {
          auto s = Session::create(m, kCtx);
          EXPECT_TRUE(s);
          return s ? session_logits(**s, t, chunk, 300) : std::vector<std::vector<float>>();
        });
        std::printf("phi3 longrope past 64, compiled f32 from %s, fuse %d, %zu tokens a step: max relative logit error %.3g\n",
                    test::file_name(path).c_str(), fuse, chunk, worst);
        EXPECT_LT(worst, 1e-4) << "fuse " << fuse << " chunk " << chunk;
      }
      // The whole prompt in one step, as transformers ran it: its last position's logits.
      auto s = Session::create(m, kCtx);
      ASSERT_TRUE(s);
      const auto tokens = ref["prompts"][0].get<std::vector<int>>();
      auto last = (*s)->decode(tokens);
      ASSERT_TRUE(last) << last.status().message();
      const auto want_last = ref["logits"][0][tokens.size() - 1].get<std::vector<float>>();
      ASSERT_EQ(last->size(), want_last.size());
      const double one_step = test::relative_error(last->data(), want_last.data(), want_last.size());
      std::printf("phi3 longrope past 64, compiled f32 from %s, fuse %d, 80 tokens in one step: last logits' relative error %.3g\n",
                  test::file_name(path).c_str(), fuse, one_step);
      EXPECT_LT(one_step, 1e-4);
    }
    for (const auto& m : {compiled(path, test::tiny_model_options()), compiled(path, only_ref, bind)}) {
      auto p = Session::create(m, kCtx);
      ASSERT_TRUE(p);
      EXPECT_EQ(greedy(**p, prompt, want.size()), want) << "compiled program";
    }
  }
}

// The short factors would not do past the original context: the same prompt in a session of 64
// positions cannot hold it, and the long factors change the logits of a short prompt (so the
// choice is the session's, for all its positions, as in llama.cpp).
TEST(Phi3, LongFactorsAreTheSessionsChoice) {
  auto m = compiled(longrope(), test::tiny_model_options());
  ASSERT_TRUE(m);
  const auto tokens = reference_for(longrope())["prompts"][2].get<std::vector<int>>();
  auto short_s = Session::create(m, 64), long_s = Session::create(m, 65);
  ASSERT_TRUE(short_s && long_s);
  const auto a = session_logits(**short_s, tokens, tokens.size(), 300);
  const auto b = session_logits(**long_s, tokens, tokens.size(), 300);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_GT(test::relative_error(b.back().data(), a.back().data(), a.back().size()), 1e-2);
  const auto want = reference_for(longrope())["logits"][2][tokens.size() - 1].get<std::vector<float>>();
  EXPECT_LT(test::relative_error(a.back().data(), want.data(), want.size()), 1e-4);
}

// A batched decode step whose rows belong to a session of 64 positions (short factors) and one of
// 128 (long factors): each row turns by its own session's factors, its logits those it has alone.
TEST(Phi3, BatchedRowsKeepTheirSessionsFactors) {
  auto m = compiled(longrope(), test::tiny_model_options());
  ASSERT_TRUE(m);
  const auto prompt = reference_for(longrope())["prompts"][2].get<std::vector<int>>();
  auto exec = std::make_shared<StepExecutor>(2);
  std::vector<std::unique_ptr<Session>> batched, solo;
  for (int ctx : {64, 128}) {
    batched.push_back(std::move(*Session::create(m, ctx, exec, DType::kF32)));
    solo.push_back(std::move(*Session::create(m, ctx, 1)));
    ASSERT_TRUE(batched.back()->decode(prompt));
    ASSERT_TRUE(solo.back()->decode(prompt));
  }
  for (int round = 0; round < 3; ++round) {
    const int next[2] = {7 + round, 100 + round};
    DecodeRequest r1;
    r1.session = batched[1].get(), r1.token = next[1];
    exec->enqueue(&r1);
    auto l0 = batched[0]->decode(std::span<const int>(&next[0], 1));
    ASSERT_TRUE(l0) << l0.status().message();
    ASSERT_TRUE(r1.done && r1.status) << r1.status.message();
    const std::span<const float> got[2] = {*l0, r1.logits};
    for (size_t i = 0; i < 2; ++i) {
      auto want = solo[i]->decode(std::span<const int>(&next[i], 1));
      ASSERT_TRUE(want);
      EXPECT_LT(test::relative_error(got[i].data(), want->data(), want->size()), 1e-5) << "session " << i << " round " << round;
    }
  }
}

// Through a .kiln file the long factors' frequencies survive; a program that lacks them for a
// model longer than its original context is refused by name (files written before them held
// such a model to the original context, and load as they did).
TEST(Phi3, LongRopeKilnFileKeepsTheLongFactors) {
  auto imp = import_model(longrope_gguf());
  ASSERT_TRUE(imp);
  CompileReport r;
  auto img = compile_model(*imp, test::tiny_model_options(), &r);
  ASSERT_TRUE(img) << img.status().message();
  auto k = test::through_kiln_file(*img, r, "phi3-longrope.kiln");
  ASSERT_TRUE(k) << k.status().message();
  EXPECT_EQ(k->image.program.rope_inv_freq_long, img->program.rope_inv_freq_long);
  EXPECT_EQ(k->image.config.max_seq_len, 256);
  auto from_file = Model::create(std::move(k->image));
  ASSERT_TRUE(from_file) << from_file.status().message();
  const json ref = long_reference();
  const double worst = test::worst_against(ref, [&](const std::vector<int>& t) {
    auto s = Session::create(*from_file, 100);
    EXPECT_TRUE(s);
    return s ? session_logits(**s, t, 16, 300) : std::vector<std::vector<float>>();
  });
  EXPECT_LT(worst, 1e-4);

  ProgramImage lacking = *img;
  lacking.program.rope_inv_freq_long.clear();
  test::expect_error(Model::create(std::move(lacking)), "no long-factor frequencies (rope_inv_freq_long) for contexts past 64");
  ProgramImage older = *img;  // as a file from before: the context held to the original
  older.program.rope_inv_freq_long.clear();
  older.config.max_seq_len = 64;
  auto old_model = Model::create(std::move(older));
  ASSERT_TRUE(old_model) << old_model.status().message();
  EXPECT_FALSE(Session::create(*old_model, 65));
  EXPECT_TRUE(Session::create(*old_model, 64));
}

}  // namespace
}  // namespace kiln
