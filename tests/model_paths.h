// A model file through each path the tests compare: the FP32 reference pass and a compiled
// program, their logits at every position, and greedy decoding (shared by the tests of each
// architecture against transformers' reference data).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/ref/ref_backend.h"
#include "artifact/kiln_image_reader.h"
#include "compiler/driver.h"
#include "compiler/kiln_writer.h"
#include "formats/hf_config.h"
#include "formats/import.h"
#include "quant/overrides.h"
#include "reference/reference_session.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln::test {

// Compile options for the tiny reference models, which have no tokenizer: `scheme` everywhere
// (f32 by default), falling back where a shape does not fit it.
inline CompileOptions tiny_model_options(bool fuse = true, const char* scheme = "f32") {
  CompileOptions o;
  o.require_tokenizer = false;
  auto q = overrides_from_flags(scheme, 32, true, /*auto_fallback=*/true);
  EXPECT_TRUE(q) << q.status().message();
  if (q) o.quant = *q;
  o.fuse = fuse;
  return o;
}

// A tiny model's reference data for one of its files: the folder's reference.json
// (transformers), or for the GGUF written into it, reference-gguf.json (what llama.cpp runs of it,
// where the GGUF's keys make that differ).
inline nlohmann::json reference_of(const std::string& folder, const std::string& path) {
  return nlohmann::json::parse(read_file(folder + (path == folder + "/model.gguf" ? "/reference-gguf.json" : "/reference.json")));
}

inline std::shared_ptr<const ReferenceModel> reference_model(const std::string& path) {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  if (!imp) return nullptr;
  auto m = ReferenceModel::create(std::move(imp->model));
  EXPECT_TRUE(m) << m.status().message();
  return m ? *m : nullptr;
}

inline std::shared_ptr<const Model> compiled(const std::string& path, const CompileOptions& o,
                                             std::span<const Backend* const> extra = {}) {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  if (!imp) return nullptr;
  auto img = compile_model(*imp, o, nullptr);
  EXPECT_TRUE(img) << img.status().message();
  if (!img) return nullptr;
  auto m = Model::create(std::move(img).value(), extra);
  EXPECT_TRUE(m) << m.status().message();
  return m ? *m : nullptr;
}

// Every position's logits of `tokens` through the reference pass.
inline std::vector<std::vector<float>> reference_logits(const std::shared_ptr<const ReferenceModel>& m,
                                                        const std::vector<int>& tokens) {
  auto s = ReferenceSession::create(m, 0);
  EXPECT_TRUE(s);
  std::vector<std::vector<float>> out;
  if (!s) return out;
  for (int t : tokens) {
    auto l = (*s)->forward(t);
    EXPECT_TRUE(l) << l.status().message();
    if (!l) return out;
    out.emplace_back(l->begin(), l->end());
  }
  return out;
}

// The same through a compiled program, `chunk` tokens per step.
inline std::vector<std::vector<float>> program_logits(const std::shared_ptr<const Model>& m,
                                                      const std::vector<int>& tokens, size_t chunk) {
  auto s = Session::create(m, 0);
  EXPECT_TRUE(s) << s.status().message();
  std::vector<std::vector<float>> out;
  if (!s) return out;
  const auto v = static_cast<size_t>(m->config().vocab_size);
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    auto l = (*s)->decode_all(std::span<const int>(tokens).subspan(i, n));
    EXPECT_TRUE(l) << l.status().message();
    if (!l) return out;
    for (size_t t = 0; t < n; ++t) out.emplace_back(l->begin() + t * v, l->begin() + (t + 1) * v);
  }
  return out;
}

// Greedy decoding, token by token (as transformers' generate(do_sample=False)).
inline std::vector<int> greedy(Decoder& d, const std::vector<int>& prompt, size_t n) {
  std::vector<int> out;
  auto l = d.decode(prompt);
  for (size_t i = 0; i < n && l; ++i) {
    const int next = static_cast<int>(std::max_element(l->begin(), l->end()) - l->begin());
    out.push_back(next);
    l = d.decode(std::span<const int>(&out.back(), 1));
  }
  EXPECT_TRUE(l) << l.status().message();
  return out;
}

// The largest relative error of what `run` gives against a reference file's logits
// ({"prompts": [[ids]], "logits": [prompt][position][vocab]}), over every prompt and position.
inline double worst_against(const nlohmann::json& ref,
                            const std::function<std::vector<std::vector<float>>(const std::vector<int>&)>& run) {
  double worst = 0;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const auto tokens = ref["prompts"][p].get<std::vector<int>>();
    const auto got = run(tokens);
    EXPECT_EQ(got.size(), tokens.size());
    for (size_t i = 0; i < got.size() && i < tokens.size(); ++i) {
      const auto want = ref["logits"][p][i].get<std::vector<float>>();
      EXPECT_EQ(want.size(), got[i].size());
      if (want.size() != got[i].size()) continue;
      worst = std::max(worst, relative_error(got[i].data(), want.data(), want.size()));
    }
  }
  return worst;
}

// A config.json's text with `key` set to `value` (removed where `value` is discarded), parsed.
inline Result<ModelConfig> config_with(const std::string& config_json, const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(config_json);
  if (value.is_discarded()) j.erase(key);
  else j[key] = value;
  return parse_hf_config(j.dump(), "", "config.json");
}

// `r` failed with a message that says `what`.
template <class T>
void expect_error(const Result<T>& r, const std::string& what) {
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
}

// `img` written to a .kiln file named `name` (native target) and read back, checked.
inline Result<KilnImage> through_kiln_file(const ProgramImage& img, const CompileReport& report, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(KilnTarget target, resolve_target("native"));
  const std::string path = temp_dir() + "/" + name;
  KILN_RETURN_IF_ERROR(write_kiln(img, target, report, path));
  return open_kiln_image(path, true);
}

// A copy of the GGUF at `path` whose float32 metadata `key` holds `value`, written as `name`;
// its path. Fails the test where the key is absent or not a float32.
inline std::string gguf_with_float(const std::string& path, const std::string& key, float value, const std::string& name) {
  std::string bytes = read_file(path);
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos) return {};
  uint32_t type;
  std::memcpy(&type, bytes.data() + at + key.size(), 4);
  EXPECT_EQ(type, 6u) << key << " is not a GGUF float32";
  std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);
  const std::string out = temp_dir() + "/" + name;
  write_file(out, bytes);
  return out;
}

// The checks every architecture's tiny model passes, for each of its files (a folder and its GGUF)
// against that file's reference data (`reference_for(path)`: prompts, logits and a "greedy" entry).
// `model` names the lines they print.
using ReferenceFor = std::function<nlohmann::json(const std::string&)>;
using OptionsFor = std::function<CompileOptions(bool fuse)>;

inline std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// The FP32 reference pass, within 1e-4 relative at every position.
inline void expect_reference_pass_matches(const char* model, const std::vector<std::string>& paths,
                                          const ReferenceFor& reference_for) {
  for (const std::string& path : paths) {
    auto m = reference_model(path);
    ASSERT_TRUE(m);
    const double worst = worst_against(reference_for(path), [&](const std::vector<int>& t) { return reference_logits(m, t); });
    std::printf("%s reference pass from %s: max relative logit error %.3g\n", model, file_name(path).c_str(), worst);
    EXPECT_LT(worst, 1e-4) << path;
  }
}

// The compiled program, fused or not, `chunks` tokens a step, within 1e-4 relative.
inline void expect_compiled_matches(const char* model, const std::vector<std::string>& paths, const ReferenceFor& reference_for,
                                    const OptionsFor& options, const std::vector<size_t>& chunks = {1, 3, 64}) {
  for (const std::string& path : paths)
    for (bool fuse : {false, true}) {
      auto m = compiled(path, options(fuse));
      ASSERT_TRUE(m);
      for (size_t chunk : chunks) {
        const double worst = worst_against(reference_for(path), [&](const std::vector<int>& t) { return program_logits(m, t, chunk); });
        std::printf("%s compiled f32 from %s, fuse %d, %zu tokens a step: max relative logit error %.3g\n", model,
                    file_name(path).c_str(), fuse, chunk, worst);
        EXPECT_LT(worst, 1e-4) << path << " fuse " << fuse << " chunk " << chunk;
      }
    }
}

// The program on the CPU back end and on the reference back end alone, against the reference pass
// on the same weights (tighter than against transformers) over 16 tokens, past a short window
// several times over, in steps of 1, 4 and 16 tokens.
inline void expect_back_ends_match_reference_pass(const std::string& path, const CompileOptions& options) {
  const std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7, 250, 1, 11, 64, 128, 299, 0, 31, 77};
  const auto want = reference_logits(reference_model(path), tokens);
  RefBackend ref;
  CompileOptions only_ref = options;
  only_ref.backends = {&ref};
  const Backend* bind[] = {&ref};
  for (const auto& m : {compiled(path, options), compiled(path, only_ref, bind)}) {
    ASSERT_TRUE(m);
    for (size_t chunk : {size_t{1}, size_t{4}, tokens.size()}) {
      const auto got = program_logits(m, tokens, chunk);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(relative_error(got[i].data(), want[i].data(), want[i].size()), 1e-5) << "chunk " << chunk << " position " << i;
    }
  }
}

// Greedy decoding through the reference pass and the compiled program (on the CPU back end, and on
// the reference back end alone) gives the file's 20 tokens.
inline void expect_greedy_matches(const std::vector<std::string>& paths, const ReferenceFor& reference_for,
                                  const CompileOptions& options) {
  RefBackend rb;
  CompileOptions only_ref = options;
  only_ref.backends = {&rb};
  const Backend* bind[] = {&rb};
  for (const std::string& path : paths) {
    const nlohmann::json ref = reference_for(path);
    const auto prompt = ref["greedy"]["prompt"].get<std::vector<int>>();
    const auto want = ref["greedy"]["tokens"].get<std::vector<int>>();
    ASSERT_EQ(want.size(), 20u);
    auto s = ReferenceSession::create(reference_model(path), 0);
    ASSERT_TRUE(s);
    EXPECT_EQ(greedy(**s, prompt, want.size()), want) << "reference pass, " << path;
    for (const auto& m : {compiled(path, options), compiled(path, only_ref, bind)}) {
      auto p = Session::create(m, 0);
      ASSERT_TRUE(p);
      EXPECT_EQ(greedy(**p, prompt, want.size()), want) << "compiled program, " << path;
    }
  }
}

// A quantized program's logits after the longest prompt, within 5 % of the reference's.
inline void expect_quantized_close(const std::shared_ptr<const Model>& q, const nlohmann::json& ref) {
  ASSERT_TRUE(q);
  const auto tokens = ref["prompts"][2].get<std::vector<int>>();
  const auto got = program_logits(q, tokens, tokens.size());
  ASSERT_EQ(got.size(), tokens.size());
  const auto want = ref["logits"][2][tokens.size() - 1].get<std::vector<float>>();
  EXPECT_LT(relative_error(got.back().data(), want.data(), want.size()), 0.05);
}

}  // namespace kiln::test
