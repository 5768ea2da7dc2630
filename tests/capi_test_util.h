// What the C API tests share: a runtime, a model and a session made the usual way, and generate
// calls that collect the text or the ids.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test::capi {

struct Runtime {
  kiln_runtime* rt = nullptr;
  explicit Runtime(uint64_t budget = 0, int threads = 1) {
    kiln_runtime_params p = kiln_runtime_default_params();
    p.n_threads = threads;
    p.memory_budget_bytes = budget;
    EXPECT_EQ(kiln_runtime_create(&p, &rt), KILN_OK) << kiln_last_error();
  }
  ~Runtime() { kiln_runtime_free(rt); }
};

inline kiln_model* load(kiln_runtime* rt, const std::string& path) {
  kiln_model* m = nullptr;
  EXPECT_EQ(kiln_model_load(rt, path.c_str(), nullptr, &m), KILN_OK) << kiln_last_error();
  return m;
}

inline kiln_session* session(kiln_model* m, float temperature = 0, uint64_t seed = 1, int n_ctx = 0) {
  kiln_session_params p = kiln_session_default_params();
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.n_ctx = n_ctx;
  kiln_session* s = nullptr;
  EXPECT_EQ(kiln_session_create(m, &p, &s), KILN_OK) << kiln_last_error();
  return s;
}

struct Collected {
  std::string text;
  std::vector<std::string> pieces;
  size_t ids = 0;
};

inline int collect(void* user, const char* text, size_t len, const int32_t*, size_t n_ids) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(text, len);
  c->pieces.emplace_back(text, len);
  c->ids += n_ids;
  return 0;
}

inline std::string generate(kiln_session* s, const std::string& prompt, int max_tokens, kiln_generate_result* r = nullptr) {
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = max_tokens;
  Collected c;
  EXPECT_EQ(kiln_session_generate(s, prompt.c_str(), &g, collect, &c, r), KILN_OK) << kiln_last_error();
  return c.text;
}

inline int collect_ids(void* user, const char*, size_t, const int32_t* ids, size_t n_ids) {
  static_cast<std::vector<int>*>(user)->insert(static_cast<std::vector<int>*>(user)->end(), ids, ids + n_ids);
  return 0;
}

inline std::vector<int> generate_ids(kiln_session* s, const char* prompt, int max_tokens) {
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = max_tokens;
  std::vector<int> ids;
  EXPECT_EQ(kiln_session_generate(s, prompt, &g, collect_ids, &ids, nullptr), KILN_OK) << kiln_last_error();
  return ids;
}

inline std::vector<int> prompt_ids(kiln_model* m, const char* text) {
  std::vector<int32_t> ids(256);
  size_t n = 0;
  EXPECT_EQ(kiln_tokenize(m, text, std::strlen(text), KILN_TOKENIZE_ADD_BOS | KILN_TOKENIZE_PARSE_SPECIAL, ids.data(),
                          ids.size(), &n),
            KILN_OK)
      << kiln_last_error();
  return std::vector<int>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace kiln::test::capi
