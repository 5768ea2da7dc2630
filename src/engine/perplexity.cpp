#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/defaults.h"
#include "perf/token_stats.h"
#include "runtime/session.h"

namespace kiln {

Result<PerplexityResult> perplexity(const OpenedModel& m, std::string_view text, const PerplexityOptions& o) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, m.tokenizer->encode(text, add_bos_by_default(*m.tokenizer)));
  const ModelConfig& cfg = m.model->config();
  KILN_ASSIGN_OR_RETURN(const int ctx, scoring_window(o.n_ctx, cfg.max_seq_len));
  KILN_ASSIGN_OR_RETURN(auto session, Session::create(m.model, ctx, o.threads, o.kv_dtype));
  Session& s = *session;
  double nll = 0;
  int64_t scored = 0;
  const auto vocab = static_cast<size_t>(cfg.vocab_size);
  const size_t window = static_cast<size_t>(ctx);
  const int bos = add_bos_by_default(*m.tokenizer) ? m.tokenizer->bos_id() : -1;
  // Position t's logits predict token t + 1; those of positions [first, window - 1) are scored.
  const size_t first = o.second_half ? window / 2 : 0;
  for (size_t start = 0; start + 1 < tokens.size(); start += window) {
    const size_t end = std::min(tokens.size(), start + window);
    if (o.second_half && end - start < window) break;
    std::vector<int> w(tokens.begin() + static_cast<std::ptrdiff_t>(start), tokens.begin() + static_cast<std::ptrdiff_t>(end));
    if (o.second_half && bos >= 0) w[0] = bos;
    s.reset();
    for (size_t i = 0; i < w.size(); i += static_cast<size_t>(s.max_logit_rows())) {
      const size_t n = std::min(w.size() - i, static_cast<size_t>(s.max_logit_rows()));
      KILN_ASSIGN_OR_RETURN(std::span<const float> logits, s.decode_all(std::span<const int>(w).subspan(i, n)));
      for (size_t t = 0; t < n && i + t + 1 < w.size(); ++t) {
        if (i + t < first) continue;
        nll += token_nll(logits.data() + t * vocab, vocab, w[i + t + 1]);
        ++scored;
      }
    }
  }
  if (scored == 0)
    return invalid_argument(o.second_half ? "too short to score: the second-half scoring needs at least one whole window of " +
                                                std::to_string(ctx) + " tokens; the text has " + std::to_string(tokens.size())
                                          : std::string("too short to score (needs at least two tokens)"));
  return PerplexityResult{std::exp(nll / static_cast<double>(scored)), scored, ctx};
}

}  // namespace kiln
