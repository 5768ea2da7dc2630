// llama-perplexity's saved logits (`llama-perplexity --kl-divergence-base FILE`): the tokens it
// ran, and for each scored position the log-probabilities over the vocabulary, quantized to 16
// bits. kiln reads it to put its own logits against llama.cpp's on exactly the same tokens
// (`kiln ppl --kl-divergence FILE`), as llama.cpp compares two of its own quantizations.
//
// Layout (little-endian): "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk,
// int32 tokens[n_chunk * n_ctx], then per chunk the rows of positions n_ctx/2 .. n_ctx-2 (each
// predicts the token after it), each row: f32 scale, f32 min, uint16 q[n_vocab] padded to an even
// count; log p(token t) = scale * q[t] + min (min is the row's largest log-probability less 16,
// or its smallest if that is larger; q = 0 at or below it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/mapped_file.h"
#include "core/status.h"

namespace kiln {

struct LlamaLogits {
  int n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::span<const uint8_t> tokens_bytes;  // n_chunk * n_ctx int32 (read with token())
  std::span<const uint8_t> rows;          // n_chunk * rows_per_chunk() rows of row_bytes()
  std::shared_ptr<const MappedFile> file;  // owns the bytes

  int first_scored() const { return n_ctx / 2; }
  int rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  size_t row_bytes() const { return (2 * ((static_cast<size_t>(n_vocab) + 1) / 2) + 4) * 2; }
  int32_t token(size_t i) const;
  // Row `row`'s log-probabilities, one per vocabulary entry, into `out` (n_vocab floats).
  void log_probs(size_t row, float* out) const;
};

// Checks every size before use: the header, the counts (positive, n_ctx >= 4), and that the file
// holds exactly the tokens and rows they promise.
Result<LlamaLogits> read_llama_logits(std::shared_ptr<const MappedFile> file);

}  // namespace kiln
