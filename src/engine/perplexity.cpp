#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/defaults.h"
#include "perf/token_stats.h"
#include "runtime/program_session.h"

namespace kiln {

Result<PerplexityResult> perplexity(const OpenedModel& m, std::string_view text, const PerplexityOptions& o) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, m.tokenizer->encode(text, add_bos_by_default(*m.tokenizer)));
  const ModelConfig& cfg = m.model->config();
  KILN_ASSIGN_OR_RETURN(const int ctx, scoring_window(o.n_ctx, cfg.max_seq_len));
  KILN_ASSIGN_OR_RETURN(auto session, ProgramSession::create(m.model, ctx, o.threads, o.kv_dtype));
  ProgramSession& s = *session;
  double nll = 0;
  int64_t scored = 0;
  const auto vocab = static_cast<size_t>(cfg.vocab_size);
  for (size_t start = 0; start + 1 < tokens.size(); start += static_cast<size_t>(ctx)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(ctx));
    s.reset();
    for (size_t i = start; i < end; i += static_cast<size_t>(s.max_logit_rows())) {
      const size_t n = std::min(end - i, static_cast<size_t>(s.max_logit_rows()));
      KILN_ASSIGN_OR_RETURN(std::span<const float> logits, s.decode_all(std::span<const int>(tokens).subspan(i, n)));
      for (size_t t = 0; t < n && i + t + 1 < end; ++t) {
        nll += token_nll(logits.data() + t * vocab, vocab, tokens[i + t + 1]);
        ++scored;
      }
    }
  }
  if (scored == 0) return invalid_argument("too short to score (needs at least two tokens)");
  return PerplexityResult{std::exp(nll / static_cast<double>(scored)), scored, ctx};
}

}  // namespace kiln
