// SmolLM3 (issue 22): a Llama decoder whose every 4th layer applies no RoPE (NoPE). A tiny
// random-weight model made by transformers itself (tests/gen/make_hf_tiny_smollm3.py): 4 layers,
// layer 3 NoPE, tied embeddings; its GGUF written with llama.cpp's names and q/k permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "compiler/driver.h"
#include "artifact/config_section.h"
#include "formats/hf_config.h"
#include "formats/import.h"
#include "graph/builder.h"
#include "graph/program.h"
#include "quant/overrides.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

using json = nlohmann::json;

std::string folder() { return test::data_path("hf-tiny/smollm3"); }
std::string gguf() { return folder() + "/model.gguf"; }
json reference() { return json::parse(test::read_file(folder() + "/reference.json")); }

std::shared_ptr<const Model> compiled(const std::string& path, const char* scheme = "f32") {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  CompileOptions o;
  o.require_tokenizer = false;
  o.quant = *overrides_from_flags(scheme, 32, true, true);
  auto img = compile_model(*imp, o, nullptr);
  EXPECT_TRUE(img) << img.status().message();
  auto m = Model::create(std::move(img).value());
  EXPECT_TRUE(m) << m.status().message();
  return *m;
}

std::shared_ptr<const ReferenceModel> reference_model(const std::string& path) {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  auto m = ReferenceModel::create(std::move(imp->model));
  EXPECT_TRUE(m) << m.status().message();
  return *m;
}

// The largest relative error, over every prompt and position, of `d`'s logits against transformers'.
template <typename MakeDecoder>
double worst_error(MakeDecoder make) {
  const json ref = reference();
  double worst = 0;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    auto d = make();
    const auto tokens = ref["prompts"][p].get<std::vector<int>>();
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto l = d->decode(std::span<const int>(&tokens[i], 1));
      EXPECT_TRUE(l) << l.status().message();
      if (!l) return 1;
      const auto want = ref["logits"][p][i].get<std::vector<float>>();
      worst = std::max(worst, test::relative_error(l->data(), want.data(), want.size()));
    }
  }
  return worst;
}

TEST(SmolLM3, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kSmolLM3);
    EXPECT_EQ(c.rope_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
    EXPECT_TRUE(c.tie_embeddings);
  }
  // The graph of a NoPE layer has no RoPE node.
  auto imp = import_model(folder());
  auto g = build_decoder_graph(imp->model.config);
  ASSERT_TRUE(g);
  int ropes[4] = {};
  for (const Node& n : g->nodes)
    if (n.op == OpCode::kRope) ++ropes[n.layer];
  EXPECT_EQ(ropes[0], 2);
  EXPECT_EQ(ropes[3], 0);
}

TEST(SmolLM3, LogitsMatchTransformersFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    EXPECT_LT(worst_error([&] { return *ReferenceSession::create(reference_model(path), 0); }), 1e-4) << "reference pass";
    EXPECT_LT(worst_error([&] { return *Session::create(compiled(path), 0); }), 1e-4) << "compiled program";
  }
}

TEST(SmolLM3, GreedyTokensEqualTransformers) {
  const json ref = reference();
  const auto prompt = ref["greedy"]["prompt"].get<std::vector<int>>();
  const auto want = ref["greedy"]["tokens"].get<std::vector<int>>();
  for (const std::string& path : {folder(), gguf()}) {
    auto s = *Session::create(compiled(path), 0);
    std::vector<int> got;
    auto l = s->decode(prompt);
    for (size_t i = 0; i < want.size() && l; ++i) {
      got.push_back(static_cast<int>(std::max_element(l->begin(), l->end()) - l->begin()));
      l = s->decode(std::span<const int>(&got.back(), 1));
    }
    EXPECT_EQ(got, want) << path;
  }
}

// The per-layer RoPE list survives a .kiln's config section; a bad one is a named error.
TEST(SmolLM3, RopeLayersInTheKilnFileAndBadConfigs) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  auto back = config_from_json(config_to_json(imp->model.config), "config");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->rope_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  // A .kiln written before SmolLM3 has no list: RoPE in every layer.
  nlohmann::json old = nlohmann::json::parse(config_to_json(imp->model.config));
  old.erase("rope_layers");
  old["arch"] = "llama";
  auto older = config_from_json(old.dump(), "config");
  ASSERT_TRUE(older) << older.status().message();
  EXPECT_TRUE(older->rope_layers.empty());
  old["rope_layers"] = {1, 0};
  EXPECT_FALSE(config_from_json(old.dump(), "config"));  // 2 entries for 4 layers
  std::string cfg = test::read_file(folder() + "/config.json");
  auto bad = [&](const std::string& from, const std::string& to, const std::string& message) {
    std::string text = cfg;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto c = parse_hf_config(text, "", "config.json");
    ASSERT_FALSE(c) << to;
    EXPECT_NE(c.status().message().find(message), std::string::npos) << c.status().message();
  };
  bad("\"no_rope_layers\": [", "\"no_rope_layers\": [1, ", "no_rope_layers must be a list of 4 entries");
  bad("\"no_rope_layers\": [\n    1,", "\"no_rope_layers\": [\n    2,", "no_rope_layers entries must be 0 or 1");
}

}  // namespace
}  // namespace kiln
