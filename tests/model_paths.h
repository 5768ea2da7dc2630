// A model file through each path the tests compare: the FP32 reference pass and a compiled
// program, their logits at every position, and greedy decoding (shared by the tests of each
// architecture against transformers' reference data).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/driver.h"
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

}  // namespace kiln::test
