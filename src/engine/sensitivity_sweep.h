// The sensitivity sweep behind `kiln tune`: how much each weight adds to the model's error when it
// alone is rounded to each candidate scheme, on a calibration text.
//
// One run of the f32 program (unfused) gives the reference logits and each matmul input's mean
// squares. Then, per weight, each candidate rounds it (round-to-nearest, dequantized back to f32:
// the same values a compile stores) and its error weighted by those mean squares, E||(W - Q) x||^2
// over the calibration rows, is computed. The KL to the reference logits is measured by running the
// model with that one weight swapped for its rounded values, for the cheapest candidate that fits
// it (or with `exact`, for every candidate); the others' KL is that measurement scaled by their
// weighted error against its (KL grows with the square of a small change in the logits, which
// grows with the weight error). A weight read only by the embedding has no input statistics: its
// error is unweighted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/driver.h"

namespace kiln {

struct SweepCandidate {
  std::string label;  // as `kiln tune` prints it and the overrides file names it: "w4a16 g128", "q5_0"
  QuantParams params;
};

// The candidates `kiln tune` chooses among by default: every weight-only layout from 4.5 to 16
// bits a weight, each in the layout llama.cpp users know where one exists.
std::vector<SweepCandidate> default_sweep_candidates();
// "w4a16 g128", "w4a16 g64 asym", "q8_0", "f16", ... : a -q name (quant/scheme_flag.h) with an
// optional group "gN" and "asym". Schemes rounding activations (w8a8, w4a8) are refused: they store
// the bytes of their a16 twins and only add the activations' rounding, so a size budget never
// prefers them.
Result<SweepCandidate> parse_sweep_candidate(std::string_view text);

struct TensorSensitivity {
  std::string name;  // the weight's canonical name (blk.3.attn_v.weight)
  std::string op;    // embedding, attn_q, ..., output
  int layer = -1;
  int64_t rows = 0, cols = 0;
  // Per candidate (the sweep's order): whether it fits this weight's shape, the bytes it stores in
  // (as the compile packs it), its weighted error, its KL (measured or scaled), and whether measured.
  std::vector<bool> fits;
  std::vector<uint64_t> bytes;
  std::vector<double> error;
  std::vector<double> kl;
  std::vector<bool> measured;
};

// What each candidate stores each weight in, as the compile packs it (unfused), and the bytes of
// the weights no choice changes. A weight a candidate does not fit has no size for it; every weight
// chosen for must fit one candidate, else a one-line error naming it. Reads no weight.
struct CandidateBytes {
  std::map<std::string, std::vector<std::optional<uint64_t>>> per_weight;  // name -> per candidate
  uint64_t fixed_bytes = 0;
  uint64_t smallest = 0;  // every weight at its smallest candidate, the fixed bytes included
  uint64_t parameters = 0;  // of the weights chosen for
};
struct SweepOptions {
  std::vector<SweepCandidate> candidates;  // empty: default_sweep_candidates()
  bool exact = false;                      // measure every candidate, not the cheapest alone
  int threads = 1;
  std::function<void(double)> progress;    // 0..1 over the measuring runs
  const CandidateBytes* sizes = nullptr;   // plan_candidates' answer for these candidates, when the caller has it
};

struct SweepResult {
  std::vector<SweepCandidate> candidates;
  std::vector<TensorSensitivity> tensors;  // the weights that are chosen for (matmul weights, tables)
  uint64_t fixed_bytes = 0;                // the other weights' (norms, biases: always f32)
  int64_t tokens = 0;
  double reference_seconds = 0;  // the f32 run
  double seconds = 0;            // everything
  int runs = 0;                  // model runs measuring KL
};

Result<CandidateBytes> plan_candidates(const Import& imp, const CompileOptions& options,
                                       const std::vector<SweepCandidate>& candidates);

// `tokens` as calibration_tokens gives them for `reference`, the f32 unfused image of `imp` with
// `options` (engine/calibration.h: reference_image); the bytes are those `options`' compile packs.
Result<SweepResult> sweep_sensitivity(const Import& imp, const CompileOptions& options, const ProgramImage& reference,
                                      std::span<const int> tokens, const SweepOptions& sweep);

}  // namespace kiln
