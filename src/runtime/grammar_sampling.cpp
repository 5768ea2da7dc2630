#include "runtime/grammar_sampling.h"

#include <chrono>
#include <limits>

namespace kiln {

std::shared_ptr<const TokenTrie> grammar_vocabulary(const Tokenizer& tokenizer) {
  // Any token but BOS as the one before: decode_piece then gives the bytes a token has mid-text.
  const int prev = tokenizer.bos_id() == 0 ? 1 : 0;
  std::vector<std::string> bytes(static_cast<size_t>(std::max(tokenizer.vocab_size(), 0)));
  for (int id = 0; id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) bytes[static_cast<size_t>(id)] = tokenizer.decode_piece(prev, id);
  return std::make_shared<const TokenTrie>(std::move(bytes));
}

GrammarSampler::GrammarSampler(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
                               std::vector<int> stop_ids)
    : mask_(std::move(grammar), std::move(vocabulary), std::move(stop_ids)) {}

Result<int> GrammarSampler::sample(Sampler& sampler, std::span<const float> logits, std::span<const int> history,
                                   size_t n_prompt) {
  ++stats_.tokens;
  const int pick = sampler.sample(logits, history, n_prompt);
  if (mask_.allows(pick)) return pick;  // the early accept: no mask needed
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.masked;
  const uint64_t walks = mask_.walks();
  const std::vector<uint64_t>& bits = mask_.allowed();
  stats_.walks += static_cast<int>(mask_.walks() - walks);
  masked_.resize(logits.size());
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool ok = (i >> 6) < bits.size() && ((bits[i >> 6] >> (i & 63)) & 1u);
    masked_[i] = ok ? logits[i] : -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  if (!any) {
    stats_.mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (mask_.is_complete()) return kDone;
    return invalid_argument("the grammar allows no token of the model's vocabulary here (after " +
                            std::to_string(stats_.tokens - 1) + " tokens)");
  }
  const int id = sampler.sample(masked_, history, n_prompt);
  stats_.mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return id;
}

Status GrammarSampler::accept(int id) {
  if (mask_.is_stop(id)) return Status::ok();
  if (!mask_.accept(id)) return invalid_argument("the grammar refused token " + std::to_string(id) + " that it allowed");
  return Status::ok();
}

}  // namespace kiln
