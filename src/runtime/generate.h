// The inference loop: feed the prompt, then sample, emit and feed back until a stop. The one
// generation loop of the project: the CLI, the C API and the server all end here.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/grammar_sampling.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

enum class StopReason {
  kLength,       // n_predict tokens generated
  kStopToken,    // the model sampled an end token
  kContextFull,  // the KV cache is full
  kStopString,   // the text reached one of the stop strings (not emitted)
  kCancelled,    // the cancel flag was raised (between two steps)
  kCallback,     // the sink asked to stop
};
std::string_view stop_reason_name(StopReason r);

struct GenerationStats {
  int prompt_tokens = 0;  // decoded for this call (the reused prefix not counted)
  int reused_tokens = 0;  // the prompt's prefix the cache already held
  int generated_tokens = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  double first_token_seconds = 0;  // from the call to the first sampled token
  StopReason stop = StopReason::kLength;
  std::vector<int> generated;  // the sampled tokens, the stop token not included
  GrammarSamplingStats grammar;  // under GenerateOptions::grammar
  bool grammar_triggered = false;  // a lazy grammar's trigger appeared and the grammar held from there
  bool grammar_refused = false;    // it appeared with text the grammar refuses: the reply stayed free
  // Speculative decoding: tokens drafted and accepted; and the target's steps after the prompt
  // (one per token without speculation, one per verification with it).
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  int target_steps = 0;
};

class Speculator;  // runtime/speculative.h

struct GenerateOptions {
  // The session already holds prompt[0, reused) at positions 0.. (a chat turn's shared prefix):
  // only the rest is decoded. The whole prompt still counts as history for the sampler.
  int reused = 0;
  // Stop tokens besides the model's (a chat template's end-of-turn token).
  std::vector<int> extra_stop_ids;
  // Generation ends where the text reaches one of these; it and what follows are not emitted.
  // Text that may be the start of one is held back until it is known not to be.
  std::vector<std::string> stop_strings;
  // Raised from any thread: generation stops before its next step (prefill chunk or token),
  // with StopReason::kCancelled; a cancelled prefill leaves the session at `reused`.
  const std::atomic<bool>* cancel = nullptr;
  // Counts this generation while it decodes token by token (a StepExecutor's decoding()), so that
  // sessions decoding at once are batched.
  std::atomic<int>* decoding = nullptr;
  // Called after each prefill chunk with the fresh tokens decoded so far and their total (the
  // reused prefix not counted), on the generating thread; returning false stops the call as a
  // cancel does (StopReason::kCancelled, the session left at `reused`).
  std::function<bool(int done, int total)> on_prefill;
  // Constrained output: only text this grammar allows is sampled (runtime/grammar_sampling.h), over
  // the vocabulary grammar_vocabulary() gives for the tokenizer; a stop token only where it may end.
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTrie> grammar_vocabulary;
  // Non-empty: the grammar is lazy (llama.cpp's lazy grammars): the reply is free until this text
  // appears in it, and from its first byte on must follow the grammar, whose text therefore starts
  // with it (a tool call inside a free reply: "<tool_call>"). Where the text that came with the
  // trigger is already outside the grammar, the reply stays free (GenerationStats::grammar_refused).
  std::string grammar_trigger;
  // Speculative decoding (runtime/speculative.h) over the session given: the loop's tokens come
  // from its verified steps; null: one token per step.
  Speculator* speculator = nullptr;
};

// Receives the text as it is produced, in pieces that are always whole UTF-8 characters, with
// the tokens sampled since the previous piece; returns false to stop (StopReason::kCallback).
using PieceSink = std::function<bool(std::string_view text, std::span<const int> ids)>;

// A sampled stop token ends generation and is not emitted.
Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict, const PieceSink& sink,
                                 const GenerateOptions& options);
// The same with a sink that takes the text only and never stops.
Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit,
                                 const GenerateOptions& options = GenerateOptions{});

// Generates on a session whose cache holds `cached` (the tokens at its positions 0.. position()):
// the prompt's longest prefix already there is reused (at least one token is decoded for fresh
// logits), the rest decoded; afterwards `cached` is the prompt and the reply as far as the cache
// holds them. Every front end's "send this whole conversation" goes through here.
Result<GenerationStats> generate_reusing(Decoder& session, std::vector<int>& cached, Sampler& sampler,
                                         const Tokenizer& tokenizer, std::span<const int> prompt, int n_predict,
                                         const PieceSink& sink, GenerateOptions options);

}  // namespace kiln
