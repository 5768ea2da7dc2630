#include "perf/token_stats.h"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {
// max and log(sum(exp(l - max))).
void log_sum(const float* l, size_t vocab, double& mx, double& lse) {
  mx = l[0];
  for (size_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(l[v]));
  double sum = 0;
  for (size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
  lse = std::log(sum);
}
}  // namespace

double token_nll(const float* l, size_t vocab, int target) {
  double mx = 0, lse = 0;
  log_sum(l, vocab, mx, lse);
  return -(static_cast<double>(l[target]) - mx - lse);
}

double kl_divergence(const float* p, const float* q, size_t vocab) {
  double pm = 0, pl = 0, qm = 0, ql = 0;
  log_sum(p, vocab, pm, pl);
  log_sum(q, vocab, qm, ql);
  double kl = 0;
  for (size_t v = 0; v < vocab; ++v) {
    const double lp = static_cast<double>(p[v]) - pm - pl;
    const double lq = static_cast<double>(q[v]) - qm - ql;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(kl, 0.0);  // rounding can leave -1e-17 for equal distributions
}

int argmax(const float* l, size_t vocab) { return static_cast<int>(std::max_element(l, l + vocab) - l); }

}  // namespace kiln
