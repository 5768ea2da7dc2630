#include "formats/llama_logits.h"

#include <cstring>

#include "core/byte_reader.h"

namespace kiln {

int32_t LlamaLogits::token(size_t i) const {
  int32_t t;
  std::memcpy(&t, tokens_bytes.data() + i * 4, 4);
  return t;
}

void LlamaLogits::log_probs(size_t row, float* out) const {
  const uint8_t* r = rows.data() + row * row_bytes();
  float scale, min;
  std::memcpy(&scale, r, 4);
  std::memcpy(&min, r + 4, 4);
  for (int i = 0; i < n_vocab; ++i) {
    uint16_t q;
    std::memcpy(&q, r + 8 + static_cast<size_t>(i) * 2, 2);
    out[i] = scale * static_cast<float>(q) + min;
  }
}

Result<LlamaLogits> read_llama_logits(std::shared_ptr<const MappedFile> file) {
  const std::string name = file->path();
  ByteReader r(file->bytes(), name);
  KILN_ASSIGN_OR_RETURN(auto magic, r.read_bytes(8, "the magic"));
  if (std::memcmp(magic.data(), "_logits_", 8) != 0)
    return corrupt(name + ": not llama-perplexity's saved logits (no \"_logits_\" magic; make one with "
                          "`llama-perplexity --kl-divergence-base FILE`)");
  LlamaLogits l;
  KILN_ASSIGN_OR_RETURN(l.n_ctx, r.read<int32_t>("n_ctx"));
  KILN_ASSIGN_OR_RETURN(l.n_vocab, r.read<int32_t>("n_vocab"));
  KILN_ASSIGN_OR_RETURN(l.n_chunk, r.read<int32_t>("n_chunk"));
  if (l.n_ctx < 4 || l.n_ctx > (1 << 24)) return corrupt(name + ": n_ctx " + std::to_string(l.n_ctx) + " is out of range");
  if (l.n_vocab < 1 || l.n_vocab > (1 << 24))
    return corrupt(name + ": n_vocab " + std::to_string(l.n_vocab) + " is out of range");
  if (l.n_chunk < 1 || l.n_chunk > (1 << 24))
    return corrupt(name + ": n_chunk " + std::to_string(l.n_chunk) + " is out of range");
  // Sizes in 64 bits: each factor is below 2^24, the products below 2^64.
  const uint64_t n_tokens = static_cast<uint64_t>(l.n_chunk) * static_cast<uint64_t>(l.n_ctx);
  KILN_ASSIGN_OR_RETURN(l.tokens_bytes, r.read_bytes(n_tokens * 4, "the tokens"));
  const uint64_t want = static_cast<uint64_t>(l.n_chunk) * static_cast<uint64_t>(l.rows_per_chunk()) * l.row_bytes();
  if (r.remaining() != want)
    return corrupt(name + ": " + std::to_string(r.remaining()) + " bytes of log-probabilities, not the " +
                   std::to_string(want) + " that " + std::to_string(l.n_chunk) + " chunks of " +
                   std::to_string(l.n_ctx) + " over a vocabulary of " + std::to_string(l.n_vocab) + " take");
  KILN_ASSIGN_OR_RETURN(l.rows, r.read_bytes(want, "the log-probabilities"));
  for (uint64_t i = 0; i < n_tokens; ++i)
    if (const int32_t t = l.token(i); t < 0 || t >= l.n_vocab)
      return corrupt(name + ": token " + std::to_string(i) + " is " + std::to_string(t) + ", outside the vocabulary of " +
                     std::to_string(l.n_vocab));
  l.file = std::move(file);
  return l;
}

}  // namespace kiln
