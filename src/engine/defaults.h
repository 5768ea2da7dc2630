// The defaults every front end shares (CLI, C API, Java, server), as data: one place decides the
// context a session gets, whether a prompt starts with BOS, how a seed is chosen.
#pragma once

#include <cstdint>
#include <optional>

#include "formats/model_config.h"
#include "formats/tensor_source.h"
#include "quant/overrides.h"
#include "runtime/session.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

// New tokens per reply when none is asked for (llama.cpp's -n default in its server is larger;
// a phone app wants a bound).
inline constexpr int kDefaultMaxNewTokens = 256;

// A session's context when none is asked for: default_context() (runtime/session.h).

// A plain prompt (no chat template) starts with BOS when the tokenizer has one, as llama.cpp
// and HF tokenizers' add_special_tokens do for Llama-family vocabularies.
inline bool add_bos_by_default(const Tokenizer& t) { return t.bos_id() >= 0; }

// The sampler's defaults: SamplerParams' initialisers (temperature 0.8, top-k 40, top-p 0.95,
// min-p 0.05, no repetition penalty), llama.cpp's.
inline SamplerParams default_sampler() { return SamplerParams{}; }

// The scheme a source model is compiled in when it runs from memory (run -q, ppl -q, bench -q,
// the C API's kiln_model_params.scheme), the same rule as `kiln compile` without --strict: a
// 4-bit tensor whose width the group does not divide is stored at 8 bits.
Result<OverridesFile> source_scheme(std::string_view scheme, int group_size = 32);

// A source's own precision as a scheme per matmul weight (what kiln run and the C API compile a
// source in when no scheme is asked for, and kiln compile a quantized GGUF): F32, F16 and BF16
// as they are; the same bytes for GGML Q4_0 and Q4_1 (W4A16 g32 symmetric and asymmetric), Q4_K
// and IQ4_XS (W4A16 g256 asymmetric and symmetric), Q5_K (W5A16), Q6_K (W6A16) and Q8_0 (W8A16
// g32), Q5_0 and Q5_1 (W5A16 in blocks of 32, symmetric and asymmetric); IQ4_NL as W8A16 g32 (its
// levels as int8, exact); any other GGML block as W8A16 with one scale per row, rounded once.
// Never a whole FP32 copy: the compiler converts one tensor at a time.
OverridesFile source_precision(const ImportedModel& m);
// True when a matmul weight of `m` is stored in a GGML block type (Q4_0, Q8_0, a k-quant, ...).
bool has_quantized_weights(const ImportedModel& m);

// The seed a generation uses: the one given, else a fresh random one (the caller reports it, so
// that a run can be repeated).
uint64_t resolve_seed(std::optional<uint64_t> given);

}  // namespace kiln
