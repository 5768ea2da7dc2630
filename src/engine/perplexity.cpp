#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/defaults.h"
#include "runtime/program_session.h"

namespace kiln {

Result<PerplexityResult> perplexity(const OpenedModel& m, std::string_view text, const PerplexityOptions& o) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, m.tokenizer->encode(text, add_bos_by_default(*m.tokenizer)));
  const ModelConfig& cfg = m.model->config();
  // Refused, not cut to fit: a perplexity over another window than asked for is another number.
  if (o.n_ctx > cfg.max_seq_len)
    return invalid_argument("a window of " + std::to_string(o.n_ctx) + " tokens exceeds the model's maximum of " +
                            std::to_string(cfg.max_seq_len));
  if (o.n_ctx == 1) return invalid_argument("a window of 1 token scores nothing (a window needs at least 2)");
  const int ctx = o.n_ctx > 0 ? o.n_ctx : std::min(cfg.max_seq_len, 512);
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
        const float* l = logits.data() + t * vocab;
        double mx = l[0];
        for (size_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(l[v]));
        double sum = 0;
        for (size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
        const int target = tokens[i + t + 1];
        nll += -(static_cast<double>(l[target]) - mx - std::log(sum));
        ++scored;
      }
    }
  }
  if (scored == 0) return invalid_argument("too short to score (needs at least two tokens)");
  return PerplexityResult{std::exp(nll / static_cast<double>(scored)), scored, ctx};
}

}  // namespace kiln
