// `kiln tune`: a scheme per tensor under a size budget or a KL target, written as the overrides
// file `kiln compile --overrides` reads. The sensitivity sweep (engine/sensitivity_sweep.h) gives
// each tensor's KL at each candidate scheme on the calibration text; quant/budget_choice.h
// chooses; the tuned compile (and the uniform compile it is compared with) is then made in memory
// and measured against the f32 model on the evaluation text, as `kiln compare` measures.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/sensitivity_sweep.h"
#include "quant/budget_choice.h"

namespace kiln {

struct TuneRequest {
  std::string model;
  std::string calib;            // plain text, tokenized with the model's tokenizer
  int64_t calib_tokens = 256;
  // The budget, exactly one: a size (bytes, or "380M", "1.2G") or a scheme ("w4a16 g32", "q4_0")
  // whose uniform compile's weight bytes it is; bits per weight of the chosen tensors; a KL.
  std::string size;
  double bits_per_weight = 0;
  double max_kl = 0;
  std::string eval;  // the text measured at the end; "" : the calibration text
  int64_t max_eval_tokens = 2048;
  std::vector<std::string> candidates;  // parse_sweep_candidate texts; empty: the defaults
  bool exact = false;                   // measure every candidate of every tensor
  bool measure_uniform = false;         // also compile and measure every candidate uniformly (the report's front)
  int threads = 0;                      // 0: the balanced choice
  std::function<void(double)> sweep_progress;
  std::function<void(const std::string&)> notify;  // a line when the checks are done and the runs begin
};

struct TuneMeasure {
  std::string label;       // "tuned", or the uniform scheme's
  uint64_t bytes = 0;      // weight bytes the compile stores
  double predicted_kl = 0; // the sweep's sum
  double kl = 0, top1 = 0, ppl_reference = 0, ppl = 0;
  double seconds = 0;      // its compile
  int fallbacks = 0;       // uniform: tensors its groups do not fit, stored at w8a16 instead
};

struct TuneResult {
  SweepResult sweep;
  BudgetChoice choice;
  std::vector<ChoiceOption> front;  // the predicted front from the smallest choice to the largest
  std::vector<int> scheme_of;  // per sweep tensor: the candidate chosen
  std::string budget;          // in words: "the size of uniform w4a16 g32 (… bytes)"
  uint64_t budget_bytes = 0;   // 0 with a KL target
  uint64_t parameters = 0;     // of the tensors chosen for
  std::string overrides_json;
  TuneMeasure tuned;
  std::vector<TuneMeasure> uniform;  // the scheme --size names, or with measure_uniform every candidate
  std::string eval_name;
  int64_t eval_tokens = 0;
  double seconds = 0;
};

// Reads and checks everything before the sweep: the calibration and evaluation texts, the budget,
// the candidates. Writes nothing.
Result<TuneResult> tune_precision(const TuneRequest& request);

// The overrides file for `scheme_of` (one rule per tensor not at the most common scheme, and
// always one for the classifier); `comment` goes in its "comment".
std::string tuned_overrides_json(const SweepResult& sweep, const std::vector<int>& scheme_of, const std::string& comment);

}  // namespace kiln
