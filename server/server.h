// kiln serve: an OpenAI-compatible HTTP server over the C API (include/kiln/kiln.h only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::server {

struct ModelSpec {
  std::string name, path;
};

struct ServeOptions {
  std::vector<ModelSpec> models;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;                // sessions (slots) per model
  int queue = 16;                  // requests that may wait for a slot, per model
  uint64_t memory_budget = 0;      // 0: none
  std::string api_key;             // empty: no key needed
  int n_ctx = 0;                   // 0: the model's default
  int threads = 0;                 // 0: chosen by perf mode
  int perf_mode = 0;               // kiln_perf_mode
  int max_tokens = 4096;           // the most max_tokens a request may ask for
  size_t max_body_bytes = 4u << 20;
  int kv_f16 = 0;
  std::string draft;               // a draft model's path for speculative decoding; empty: none
  int draft_max = 0;               // tokens drafted per step at most (0: the runtime's default)
  int no_cache = 0;                // kiln_model_params.no_cache
  std::string cache_dir;           // kiln_model_params.cache_dir ("" : the default)
};

// Loads the models, listens, serves until SIGINT/SIGTERM. Prints "listening on http://HOST:PORT"
// on stderr once ready. Returns 0, or 2 after printing why it could not start.
int serve(const ServeOptions& options);

}  // namespace kiln::server
