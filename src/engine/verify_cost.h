// What speculative decoding's verification step costs on this machine: the time of one step over
// k + 1 tokens (the last accepted token and k drafts, every row's logits) against a one-token
// decode step, and the acceptance rate each k needs to win (README "Speculative decoding").
#pragma once

#include <vector>

#include "core/status.h"
#include "runtime/session.h"

namespace kiln {

struct VerifyCost {
  int k = 0;                  // drafted tokens: the step carries k + 1 rows
  double step_ms = 0;         // median
  double ratio = 0;           // step_ms over the one-token step's
  double break_even = 0;      // the per-token acceptance a with (1 - a^(k+1)) / (1 - a) = ratio (+ k * draft_ratio)
};

struct VerifyCostReport {
  double one_token_ms = 0;  // median one-token decode step
  std::vector<VerifyCost> k;
};

// Expected tokens a verification of k drafts gives at per-token acceptance a: 1 + a + ... + a^k.
double expected_tokens(double a, int k);
// The acceptance at which k drafts pay for a step that costs `cost` one-token steps (1 when none
// below 1 does).
double break_even_acceptance(int k, double cost);

// Times steps on `session` after a context of `depth` tokens: `repeats` of each, k = 1..k_max.
// `draft_ratio`: a draft token's cost as a share of a one-token target step (0: prompt lookup).
Result<VerifyCostReport> measure_verify_cost(Session& session, int depth, int k_max, int repeats, double draft_ratio);

}  // namespace kiln
