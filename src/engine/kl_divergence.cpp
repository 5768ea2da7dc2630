#include "engine/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "engine/defaults.h"
#include "runtime/session.h"

namespace kiln {

namespace {

// KL(base || kiln) at one position, llama.cpp's way: the base's log-probabilities below -16 (which
// its 16-bit rows do not keep) are left out.
double position_kld(const float* base_lp, const float* logits, size_t vocab, double log_sum) {
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i)
    if (base_lp[i] > -16.0f) sum += std::exp(static_cast<double>(base_lp[i])) * (base_lp[i] - (logits[i] - log_sum));
  return sum;
}

// The squared differences of kiln's log-probabilities from the base's, and the base's squares, at
// one position over the entries the base keeps.
void add_squares(const float* base_lp, const float* logits, size_t vocab, double log_sum, double& err2, double& ref2) {
  for (size_t i = 0; i < vocab; ++i)
    if (base_lp[i] > -16.0f) {
      const double d = (logits[i] - log_sum) - base_lp[i];
      err2 += d * d;
      ref2 += static_cast<double>(base_lp[i]) * base_lp[i];
    }
}

double log_sum_exp(const float* logits, size_t vocab) {
  const float top = *std::max_element(logits, logits + vocab);
  double s = 0;
  for (size_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i] - top));
  return top + std::log(s);
}

}  // namespace

Result<KlResult> kl_divergence_against(const OpenedModel& m, const LlamaLogits& base, const PerplexityOptions& o) {
  const ModelConfig& cfg = m.model->config();
  if (base.n_vocab != cfg.vocab_size)
    return invalid_argument(base.file->path() + ": llama.cpp's vocabulary has " + std::to_string(base.n_vocab) +
                            " entries, the model's " + std::to_string(cfg.vocab_size) + ": not the same model");
  if (base.n_ctx > cfg.max_seq_len)
    return invalid_argument(base.file->path() + ": its window of " + std::to_string(base.n_ctx) +
                            " tokens exceeds the model's maximum of " + std::to_string(cfg.max_seq_len));
  KILN_ASSIGN_OR_RETURN(auto session, Session::create(m.model, base.n_ctx, o.threads, o.kv_dtype));
  Session& s = *session;
  const int bos = add_bos_by_default(*m.tokenizer) ? m.tokenizer->bos_id() : -1;
  const auto vocab = static_cast<size_t>(cfg.vocab_size);
  const auto n_ctx = static_cast<size_t>(base.n_ctx), first = static_cast<size_t>(base.first_scored());
  std::vector<float> base_lp(vocab);
  std::vector<int> w(n_ctx);
  KlResult r;
  double kld = 0, nll = 0, base_nll = 0, err2 = 0, ref2 = 0;
  int64_t same = 0;
  for (int c = 0; c < base.n_chunk; ++c) {
    for (size_t i = 0; i < n_ctx; ++i) w[i] = base.token(static_cast<size_t>(c) * n_ctx + i);
    if (bos >= 0) w[0] = bos;
    s.reset();
    for (size_t i = 0; i < n_ctx; i += static_cast<size_t>(s.max_logit_rows())) {
      const size_t n = std::min(n_ctx - i, static_cast<size_t>(s.max_logit_rows()));
      KILN_ASSIGN_OR_RETURN(std::span<const float> logits, s.decode_all(std::span<const int>(w).subspan(i, n)));
      for (size_t t = 0; t < n; ++t) {
        const size_t pos = i + t;
        if (pos < first || pos + 1 >= n_ctx) continue;
        const float* l = logits.data() + t * vocab;
        base.log_probs(static_cast<size_t>(c) * static_cast<size_t>(base.rows_per_chunk()) + (pos - first), base_lp.data());
        const double lse = log_sum_exp(l, vocab);
        const double k = position_kld(base_lp.data(), l, vocab, lse);
        kld += k;
        r.max_kld = std::max(r.max_kld, k);
        add_squares(base_lp.data(), l, vocab, lse, err2, ref2);
        const int next = w[pos + 1];
        nll += lse - l[next];
        base_nll -= base_lp[static_cast<size_t>(next)];
        same += std::max_element(l, l + vocab) - l == std::max_element(base_lp.begin(), base_lp.end()) - base_lp.begin();
        ++r.scored;
      }
    }
  }
  const auto n = static_cast<double>(r.scored);
  r.mean_kld = kld / n;
  r.same_top = static_cast<double>(same) / n;
  r.nmse = ref2 > 0 ? err2 / ref2 : 0.0;
  r.ppl = std::exp(nll / n);
  r.base_ppl = std::exp(base_nll / n);
  return r;
}

}  // namespace kiln
