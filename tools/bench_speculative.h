// kiln bench --draft MODEL | --lookup [N]: what a verification step costs on this machine against
// a one-token step (k = 1..--draft-max) and the acceptance each k needs, then the same greedy
// generation without and with speculation: tok/s (medians), acceptance, tokens per target step,
// and whether the texts are the same.
#pragma once

#include <string>

namespace kiln::cli {

struct BenchSpeculativeArgs {
  std::string model, draft, scheme, tokenizer, kv_type, perf;
  std::string prompt;  // the text (through the chat template with `chat`)
  bool chat = false;
  int lookup = 0, draft_max = 8;
  int n_gen = 128;
  int repeats = 3;
  int threads = 0;
  int group = 32;
  bool json = false;
};

int bench_speculative(const BenchSpeculativeArgs& a);

}  // namespace kiln::cli
