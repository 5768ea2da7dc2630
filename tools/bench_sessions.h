// kiln bench --sessions N[,N...]: N sessions of one model generating at once, each on its own
// thread, through the runtime the C API uses (one copy of the weights, one thread pool).
#pragma once

#include <string>
#include <vector>

#include "engine/compile_cache.h"

namespace kiln::cli {

struct BenchSessionsArgs {
  std::string model, scheme, tokenizer, kv_type, perf;
  std::vector<int> sessions;
  int n_prompt = 32;
  int n_gen = 48;
  int threads = 0;
  int group = 32;
  bool json = false;
  CacheOptions cache;  // a source model's compile cache
};

int bench_sessions(const BenchSessionsArgs& a);

}  // namespace kiln::cli
