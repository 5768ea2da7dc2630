// kiln synth: published shapes, a tokenizer of the exact vocabulary size, deterministic weights,
// folders that import, compile and run, shards, and nothing half-written under the output name.
#include "tools/synth/synth_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "compiler/driver.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "reference/reference_session.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = test::temp_dir() + "/synth-" + name;
  fs::remove_all(d);
  return d;
}

SynthReport synth(const std::string& preset, const std::string& dir, int layers = 0, uint64_t seed = 0,
                  DType dtype = DType::kF16) {
  SynthOptions o;
  o.preset = preset;
  o.out_dir = dir;
  o.layers = layers;
  o.seed = seed;
  o.dtype = dtype;
  auto r = write_synth_model(o);
  EXPECT_TRUE(r) << r.status().message();
  return r ? *r : SynthReport{};
}

struct Published {
  const char* preset;
  int dim, hidden, layers, heads, kv, vocab;
  float theta;
  bool tied, bias;
  uint64_t parameters;  // as the model cards count them
  int head_dim = 0;     // 0: dim / heads
};

constexpr Published kPublished[] = {
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 10000.0f, false, false, 1100048384ull},
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 128256, 500000.0f, true, false, 1235814400ull},
    {"qwen2.5-0.5b", 896, 4864, 24, 14, 2, 151936, 1e6f, true, true, 494032768ull},
    {"qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 151936, 1e6f, true, true, 1543714304ull},
    {"llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 10000.0f, false, false, 6738415616ull},
    {"smollm2-135m", 576, 1536, 30, 9, 3, 49152, 100000.0f, true, false, 134515008ull},
    {"smollm2-360m", 960, 2560, 32, 15, 5, 49152, 100000.0f, true, false, 361821120ull},
    {"smollm2-1.7b", 2048, 8192, 24, 32, 32, 49152, 130000.0f, true, false, 1711376384ull},
    {"phi-3-mini-4k", 3072, 8192, 32, 32, 32, 32064, 10000.0f, false, false, 3821079552ull},
    {"phi-4-mini", 3072, 8192, 32, 24, 8, 200064, 10000.0f, true, false, 3836021760ull},
    {"gemma-3-1b", 1152, 6912, 26, 4, 1, 262144, 1e6f, true, false, 999885952ull, 256},
};

TEST(Synth, PresetConfigsHaveThePublishedShapes) {
  for (const Published& want : kPublished) {
    SCOPED_TRACE(want.preset);
    auto p = find_synth_preset(want.preset);
    ASSERT_TRUE(p) << p.status().message();
    auto c = parse_hf_config(synth_config_json(*p, 0, DType::kF16, 7), "", std::string(want.preset) + "/config.json");
    ASSERT_TRUE(c) << c.status().message();
    EXPECT_EQ(c->dim, want.dim);
    EXPECT_EQ(c->hidden_dim, want.hidden);
    EXPECT_EQ(c->n_layers, want.layers);
    EXPECT_EQ(c->n_heads, want.heads);
    EXPECT_EQ(c->n_kv_heads, want.kv);
    EXPECT_EQ(c->head_dim, want.head_dim > 0 ? want.head_dim : want.dim / want.heads);
    EXPECT_EQ(c->vocab_size, want.vocab);
    EXPECT_FLOAT_EQ(c->rope_theta, want.theta);
    EXPECT_EQ(c->tie_embeddings, want.tied);
    EXPECT_EQ(c->qkv_bias, want.bias);
    uint64_t params = 0;
    for (const SynthTensor& t : synth_tensors(*p, 0)) params += t.elements();
    EXPECT_EQ(params, want.parameters);
    auto fewer = parse_hf_config(synth_config_json(*p, 3, DType::kBF16, 7), "", "config.json");
    ASSERT_TRUE(fewer);
    EXPECT_EQ(fewer->n_layers, 3);
  }
  auto l3 = parse_hf_config(synth_config_json(*find_synth_preset("llama-3.2-1b"), 0, DType::kF16, 0), "", "c");
  ASSERT_TRUE(l3);
  EXPECT_EQ(l3->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(l3->rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(l3->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(l3->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(l3->rope_scaling.original_max_position, 8192);
  // Phi-4-mini turns 96 of each head's 128; Phi-3 all 96.
  auto p4 = parse_hf_config(synth_config_json(*find_synth_preset("phi-4-mini"), 0, DType::kF16, 0), "", "c");
  ASSERT_TRUE(p4) << p4.status().message();
  EXPECT_EQ(p4->rope_dim(), 96);
  auto p3 = parse_hf_config(synth_config_json(*find_synth_preset("phi-3-mini-4k"), 0, DType::kF16, 0), "", "c");
  ASSERT_TRUE(p3) << p3.status().message();
  EXPECT_EQ(p3->rope_dim(), 96);
  EXPECT_EQ(p3->sliding_window, 0);
  // Gemma 3 1B: five layers of six through a 512 window with base 10000, every sixth global.
  auto g = parse_hf_config(synth_config_json(*find_synth_preset("gemma-3-1b"), 0, DType::kF16, 0), "", "c");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_FLOAT_EQ(g->query_pre_attn_scalar, 256.0f);
  EXPECT_FLOAT_EQ(g->rope_theta_local, 10000.0f);
  for (int l = 0; l < 26; ++l) EXPECT_EQ(g->layer_window(l), (l + 1) % 6 == 0 ? 0 : 512) << "layer " << l;
  auto tl = parse_hf_config(synth_config_json(*find_synth_preset("TinyLlama-1.1B"), 0, DType::kF16, 0), "", "c");
  ASSERT_TRUE(tl);
  EXPECT_EQ(tl->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FALSE(find_synth_preset("gpt-5"));
}

TEST(Synth, TokenizerHasExactlyTheVocabularySize) {
  for (int v : {512, 640, 32000, 128256, 151936}) {
    SCOPED_TRACE(v);
    auto json = synth_tokenizer_json(v);
    ASSERT_TRUE(json) << json.status().message();
    auto tok = tokenizer_from_json(*json, "synth/tokenizer.json");
    ASSERT_TRUE(tok) << tok.status().message();
    EXPECT_EQ((*tok)->vocab_size(), v);
    EXPECT_EQ((*tok)->bos_id(), 1);
    EXPECT_EQ((*tok)->eos_id(), 2);
    const std::string text = "Once upon a time, 42 cats sat: \xC3\xA9t\xC3\xA9 \xE2\x82\xAC!";
    auto ids = (*tok)->encode(text, true);
    ASSERT_TRUE(ids);
    EXPECT_EQ(ids->front(), 1);
    EXPECT_EQ((*tok)->decode(*ids), text);
    for (int id : *ids) EXPECT_LT(id, v);
    if (v >= 32000) {
      EXPECT_LT(ids->size(), text.size() * 7 / 8) << "merged pieces are used";
    }
  }
  EXPECT_FALSE(synth_tokenizer_json(100));
  EXPECT_EQ(*synth_tokenizer_json(1000), *synth_tokenizer_json(1000));
}

TEST(Synth, ValuesHaveTheStatedDistribution) {
  auto p = *find_synth_preset("tiny-llama");
  const auto tensors = synth_tensors(p, 1);
  std::vector<float> v(1u << 16);
  for (const SynthTensor& t : tensors) {
    if (t.kind == SynthTensor::Kind::kBias) continue;
    std::vector<float> w(std::min<uint64_t>(t.elements(), v.size()));
    synth_values(t, 3, 0, w);
    double mean = 0, sq = 0;
    for (float x : w) mean += x;
    mean /= static_cast<double>(w.size());
    for (float x : w) sq += (x - mean) * (x - mean);
    const double sd = std::sqrt(sq / static_cast<double>(w.size()));
    SCOPED_TRACE(t.name);
    EXPECT_NEAR(mean, t.kind == SynthTensor::Kind::kNorm ? 1.0 : 0.0, 0.01);
    EXPECT_NEAR(sd, 0.02, t.elements() < 1000 ? 0.005 : 0.001);
  }
  // The values of a range do not depend on where a read starts.
  const SynthTensor& t = tensors.front();
  std::vector<float> all(5000), part(1000);
  synth_values(t, 9, 0, all);
  synth_values(t, 9, 2500, part);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 2500));
}

std::vector<float> run_tokens(const std::string& dir, const std::string& scheme, const std::vector<int>& tokens) {
  auto imp = import_model(dir);
  EXPECT_TRUE(imp) << imp.status().message();
  if (!imp) return {};
  CompileOptions o;
  auto q = overrides_from_flags(scheme, 32, true, true);
  EXPECT_TRUE(q);
  o.quant = *q;
  auto img = compile_model(*imp, o, nullptr);
  EXPECT_TRUE(img) << img.status().message();
  if (!img) return {};
  auto m = Model::create(std::move(img).value());
  EXPECT_TRUE(m) << m.status().message();
  auto s = Session::create(*m, 32);
  EXPECT_TRUE(s) << s.status().message();
  std::vector<float> last;
  for (int t : tokens) {
    auto l = (*s)->decode(std::span<const int>(&t, 1));
    EXPECT_TRUE(l) << l.status().message();
    if (!l) return {};
    last.assign(l->begin(), l->end());
  }
  return last;
}

TEST(Synth, OneLayerFolderImportsCompilesAndRuns) {
  for (const char* preset : {"tiny-llama", "tiny-qwen2", "tiny-phi3", "tiny-gemma3"}) {
    SCOPED_TRACE(preset);
    const std::string dir = fresh_dir(std::string(preset) + "-1");
    const SynthReport r = synth(preset, dir, 1, 5, std::string(preset) == "tiny-qwen2" ? DType::kBF16 : DType::kF16);
    EXPECT_EQ(r.preset.num_layers, 1);
    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"})
      EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
    auto imp = import_model(dir);
    ASSERT_TRUE(imp) << imp.status().message();
    EXPECT_EQ(imp->model.config.n_layers, 1);
    EXPECT_EQ(imp->model.config.vocab_size, r.preset.vocab_size);

    const std::vector<int> tokens = {1, 300, 17, 400, 5};
    const std::vector<float> f32 = run_tokens(dir, "f32", tokens);
    const std::vector<float> w4 = run_tokens(dir, "w4a16", tokens);
    ASSERT_EQ(f32.size(), static_cast<size_t>(r.preset.vocab_size));
    ASSERT_EQ(w4.size(), f32.size());
    for (float x : w4) ASSERT_TRUE(std::isfinite(x));
    // The compiled f32 program agrees with the reference forward pass on the same folder.
    auto model = ReferenceModel::create(std::move(imp->model));
    ASSERT_TRUE(model);
    auto ref = ReferenceSession::create(*model, 32);
    ASSERT_TRUE(ref);
    std::vector<float> want;
    for (int t : tokens) {
      auto l = (*ref)->forward(t);
      ASSERT_TRUE(l);
      want.assign(l->begin(), l->end());
    }
    EXPECT_LT(test::relative_error(f32.data(), want.data(), want.size()), 1e-4);
  }
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherWeights) {
  const std::string a = fresh_dir("seed-a"), b = fresh_dir("seed-b"), c = fresh_dir("seed-c"), d = fresh_dir("seed-d");
  synth("tiny-llama", a, 0, 42);
  synth("tiny-llama", b, 0, 42);
  synth("tiny-llama", c, 0, 43);
  synth("tiny-llama", d, 1, 42);
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
    EXPECT_EQ(test::read_file(a + "/" + f), test::read_file(b + "/" + f)) << f;
  EXPECT_NE(test::read_file(a + "/model.safetensors"), test::read_file(c + "/model.safetensors"));
  // A copy with fewer layers has the same first layers.
  auto fa = MappedFile::open(a + "/model.safetensors");
  auto fd = MappedFile::open(d + "/model.safetensors");
  ASSERT_TRUE(fa && fd);
  auto sa = read_safetensors(*fa), sd = read_safetensors(*fd);
  ASSERT_TRUE(sa && sd);
  int compared = 0;
  for (const TensorSource& td : sd->tensors)
    for (const TensorSource& ta : sa->tensors)
      if (ta.name == td.name) {
        EXPECT_TRUE(std::equal(ta.bytes.begin(), ta.bytes.end(), td.bytes.begin(), td.bytes.end())) << ta.name;
        ++compared;
      }
  EXPECT_EQ(compared, static_cast<int>(sd->tensors.size()));
}

TEST(Synth, ShardsWithAnIndexImportAsOneModel) {
  const std::string one = fresh_dir("one"), many = fresh_dir("many");
  synth("tiny-llama", one, 0, 1);
  SynthOptions o;
  o.preset = "tiny-llama";
  o.out_dir = many;
  o.seed = 1;
  o.shard_bytes = 40000;
  auto r = write_synth_model(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(fs::exists(many + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(many + "/model.safetensors"));
  int shards = 0;
  for (const auto& f : r->files) shards += f.find(".safetensors") != std::string::npos && f.find("index") == std::string::npos;
  EXPECT_GT(shards, 2);
  EXPECT_TRUE(fs::exists(many + "/model-00001-of-" + std::string(5 - std::to_string(shards).size(), '0') +
                         std::to_string(shards) + ".safetensors"));
  const std::vector<int> tokens = {1, 50, 60};
  EXPECT_EQ(run_tokens(one, "f32", tokens), run_tokens(many, "f32", tokens));
}

TEST(Synth, ExistingFolderKeptUnlessForcedAndNoTemporariesLeft) {
  const std::string parent = fresh_dir("parent");
  fs::create_directories(parent);
  const std::string dir = parent + "/model";
  synth("tiny-llama", dir, 1, 1);
  SynthOptions o;
  o.preset = "tiny-llama";
  o.out_dir = dir;
  o.seed = 2;
  auto again = write_synth_model(o);
  ASSERT_FALSE(again);
  EXPECT_NE(again.status().message().find("--force"), std::string::npos);
  o.force = true;
  auto forced = write_synth_model(o);
  ASSERT_TRUE(forced) << forced.status().message();
  EXPECT_EQ(forced->preset.num_layers, 2);
  o.preset = "no-such-preset";
  EXPECT_FALSE(write_synth_model(o));
  o.preset = "tiny-llama";
  o.layers = 99;
  EXPECT_FALSE(write_synth_model(o));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(parent)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model"});
  EXPECT_TRUE(import_model(dir));
}

TEST(SynthCli, WritesAFolderThatRuns) {
  const std::string dir = fresh_dir("cli");
  auto w = test::run_kiln("synth --preset tiny-qwen2 --layers 1 --dtype bf16 --seed 3 -o " + test::shell_quote(dir));
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto r = test::run_kiln("run " + test::shell_quote(dir) + " -p 'Once upon a time' -n 4 --seed 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto bad = test::run_kiln("synth --preset nope -o " + test::shell_quote(dir + "-x"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("tinyllama-1.1b"), std::string::npos) << bad.err;
  auto exists = test::run_kiln("synth --preset tiny-llama -o " + test::shell_quote(dir));
  EXPECT_EQ(exists.exit_code, 2);
  auto list = test::run_kiln("synth --list");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("llama-2-7b"), std::string::npos);
}

}  // namespace
}  // namespace kiln
