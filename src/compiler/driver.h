// The compiler driver: formats -> graph -> precision -> passes -> memory plan -> packed weights.
// The result runs in memory (kiln run on a source model) or is written as a .kiln file.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "artifact/program_image.h"
#include "artifact/quant_record_section.h"
#include "compiler/passes.h"
#include "formats/import.h"
#include "graph/program.h"
#include "quant/gptq_quantizer.h"
#include "quant/importance_quantizer.h"
#include "quant/weight_origin.h"

namespace kiln {

struct CompileOptions {
  OverridesFile quant;                    // default scheme and per-tensor rules
  std::string overrides_path = "--quant";  // names the rules in messages
  std::string tokenizer_path;             // "" : the model's own
  bool require_tokenizer = true;          // false: a model without one compiles (kind "none")
  int max_tokens = kDefaultMaxTokens;     // tokens per step the memory plan is made for
  bool fuse = true;
  bool guard_classifier = true;           // see assign_precision
  std::vector<const Backend*> backends;   // empty: the registered ones
  // The CPU features the kernels may use when the result runs in memory (a .kiln records its
  // target's instead); ~0: whatever this machine has.
  uint64_t cpu_features = ~0ull;
  std::function<void(double)> progress;   // 0..1 while weights are quantized
  // Calibration statistics (engine/calibration.h, or an imatrix file): the integer weights they
  // cover are rounded by quant/importance_quantizer.h instead of round-to-nearest. Null: none.
  std::shared_ptr<const ImportanceStats> importance;
  // How they round: kGptq (quant/gptq_quantizer.h) where they keep the inputs and the scheme has
  // one grid per group or row, the importance-weighted clipping elsewhere; kImatrix: that alone.
  QuantMethod method = QuantMethod::kGptq;
  bool act_order = false;  // GPTQ takes the columns largest H_jj first (quant/gptq_quantizer.h)
  int threads = 1;  // for GPTQ's products
};

// The totals the .kiln quantization record stores (notes, bytes per scheme, parameters), and
// what the passes did.
struct CompileReport : QuantTotals {
  FusionReport fusion;
  PartitionReport partition;
};

Result<ProgramImage> compile_model(const Import& imp, const CompileOptions& options, CompileReport* report);

// What compile_model makes of each weight, without reading or converting any (`kiln inspect` on a
// source model): the same passes up to the layouts. One entry per weight of the compiled program,
// in its order, a copy in a second layout ("NAME@LAYOUT") included.
struct WeightPlan {
  WeightDesc weight;          // name, shape, scheme and layout, as the .kiln records them
  DType source_type = DType::kF32;
  uint64_t source_bytes = 0;  // the source tensor's (0 for a copy: its original counts them)
  WeightOrigin origin = WeightOrigin::kAsStored;
  uint64_t bytes = 0;         // as the .kiln stores it, in its layout
};
// `report` (may be null) gets the notes the compile would print (fallbacks, the classifier).
Result<std::vector<WeightPlan>> plan_weights(const Import& imp, const CompileOptions& options, CompileReport* report);

}  // namespace kiln
