// The inference loop: feed the prompt, then sample, emit and feed back until a stop.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/decoder.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

enum class StopReason { kLength, kStopToken, kContextFull };

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  StopReason stop = StopReason::kLength;
  std::vector<int> generated;  // the sampled tokens, the stop token not included
};

struct GenerateOptions {
  // The session already holds prompt[0, reused) at positions 0.. (a chat turn's shared prefix):
  // only the rest is decoded. The whole prompt still counts as history for the sampler.
  int reused = 0;
  // Stop tokens besides the model's (a chat template's end-of-turn token).
  std::vector<int> extra_stop_ids;
};

// `emit` receives the text as it is produced, in pieces that are always whole UTF-8 characters.
// A sampled stop token ends generation and is not emitted.
Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit);
Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit, const GenerateOptions& options);

}  // namespace kiln
