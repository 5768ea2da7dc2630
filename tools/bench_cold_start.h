// kiln bench --cold-start: the time from process start to the first generated token, page cache
// warm and cold; each repeat is a new process (`kiln bench --first-token`, the child below) whose
// timestamps the parent reads on the shared monotonic clock.
#pragma once

#include <string>

#include "engine/open_model.h"

namespace kiln::cli {

struct ColdStartArgs {
  std::string model, scheme, tokenizer, kv_type, prompt, cache;
  int group = 32, threads = 1, repeats = 5;
  bool drop_all = false, json = false;
  OpenOptions open;  // the child's
};

// The parent: one untimed run, then `repeats` children per cache state.
int bench_cold_start(const ColdStartArgs& c);
// The child: open, tokenize, one prompt step, the first token; prints its timestamps as JSON.
int bench_first_token(const ColdStartArgs& c);

}  // namespace kiln::cli
