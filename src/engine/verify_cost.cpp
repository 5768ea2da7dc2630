#include "engine/verify_cost.h"

#include <chrono>
#include <cmath>

#include "perf/sample_stats.h"

namespace kiln {

double expected_tokens(double a, int k) {
  double sum = 0, term = 1;
  for (int i = 0; i <= k; ++i, term *= a) sum += term;
  return sum;
}

double break_even_acceptance(int k, double cost) {
  if (expected_tokens(1.0, k) <= cost) return 1.0;
  double lo = 0, hi = 1;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (expected_tokens(mid, k) < cost ? lo : hi) = mid;
  }
  return hi;
}

Result<VerifyCostReport> measure_verify_cost(Session& s, int depth, int k_max, int repeats, double draft_ratio) {
  const int vocab = s.config().vocab_size;
  if (depth < 1 || depth + k_max + 1 > s.n_ctx())
    return invalid_argument("a verification cost needs 1.." + std::to_string(s.n_ctx() - k_max - 1) + " tokens of context");
  if (k_max + 1 > std::min(s.max_tokens(), s.max_logit_rows()))
    return invalid_argument("k up to " + std::to_string(k_max) + " needs steps of " + std::to_string(k_max + 1) +
                            " rows; the model's plan returns at most " +
                            std::to_string(std::min(s.max_tokens(), s.max_logit_rows())));
  std::vector<int> ids(static_cast<size_t>(depth + k_max + 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(1 + (i * 7919) % static_cast<size_t>(vocab - 1));
  s.reset();
  KILN_RETURN_IF_ERROR(s.decode(std::span<const int>(ids).first(static_cast<size_t>(depth))).status());
  // One step of n rows at the depth, `repeats` times (after one untimed), the median in ms.
  auto time_step = [&](int n) -> Result<double> {
    std::vector<double> ms;
    const std::span<const int> rows = std::span<const int>(ids).subspan(static_cast<size_t>(depth), static_cast<size_t>(n));
    for (int r = 0; r <= repeats; ++r) {
      s.rewind(depth);
      const auto t0 = std::chrono::steady_clock::now();
      Status st = n == 1 ? s.decode(rows).status() : s.decode_all(rows).status();
      KILN_RETURN_IF_ERROR(st);
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return median_of(ms);
  };
  VerifyCostReport rep;
  KILN_ASSIGN_OR_RETURN(rep.one_token_ms, time_step(1));
  for (int k = 1; k <= k_max; ++k) {
    VerifyCost c;
    c.k = k;
    KILN_ASSIGN_OR_RETURN(c.step_ms, time_step(k + 1));
    c.ratio = rep.one_token_ms > 0 ? c.step_ms / rep.one_token_ms : 0;
    c.break_even = break_even_acceptance(k, c.ratio + k * draft_ratio);
    rep.k.push_back(c);
  }
  s.reset();
  return rep;
}

}  // namespace kiln
