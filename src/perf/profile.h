// The profiler's data model: a session's step and instruction records (runtime/step_trace.h)
// joined with the program (op, layer, back end, kernel) and the cost model (instruction_cost.h),
// summed per op, layer, back end and op kind, prefill against decode, and put against the
// machine's ceilings when they were measured (bandwidth: perf/bandwidth.h; products per second:
// perf/compute_probe.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "perf/instruction_cost.h"
#include "runtime/step_trace.h"

namespace kiln {

class Model;
class Session;

// Where the process's resident memory is (bytes).
struct MemoryParts {
  uint64_t peak_rss = 0;          // getrusage's maximum
  uint64_t rss_now = 0;
  uint64_t weights_mapped = 0;    // the weights' bytes
  uint64_t weights_resident = 0;  // of those, in memory now (mincore; all of them when not mapped)
  uint64_t arenas = 0, kv_cache = 0, scratch = 0;  // the session's
};
// The parts for `session` now.
MemoryParts memory_parts(const Session& session);

// The ceilings an instruction is put against; rates in products per second, all threads.
struct Ceilings {
  double bandwidth_gbs = 0;  // 0: not measured
  std::map<std::tuple<std::string, Scheme, int>, double> product_rate;  // back end, scheme, step tokens
};

enum class Phase { kPrefill, kDecode };
std::string_view phase_name(Phase p);

struct NodeInfo {
  std::string op, backend, kernel, kind;  // kind: "matmul", "attention", "norm", "elementwise", "embed", "kv"
  int layer = -1;
  // Where in the model: "layer 3", or outside the layers by role: "embedding", "final norm",
  // "classifier", "logit soft-cap" (the rows of by_layer and the bars of the report's layer chart).
  std::string part;
};

struct StepSample {
  StepRecord record;
  Phase phase = Phase::kPrefill;
  double seconds = 0;
  double instruction_seconds = 0;  // detailed: the sum of its instructions' times
  InstructionCost cost;            // the sum of its instructions' costs
};

struct InstructionSample {
  int step = 0;  // into Profile::steps
  int node = 0;
  double begin_s = 0, seconds = 0;
  InstructionCost cost;
  int step_tokens = 1;  // rows the instruction ran on (for the product ceiling of its step size)
};

// One row of a summary table: the instructions of one op, layer, back end, kind or node.
struct Tally {
  std::string key;
  int layer = -1;
  int count = 0;
  double seconds = 0;
  InstructionCost cost;  // summed
  double share = 0;      // of the phase's instruction time
  double gbs() const { return seconds > 0 ? cost.bytes() / seconds / 1e9 : 0; }
  double gops() const { return seconds > 0 ? cost.flops / seconds / 1e9 : 0; }
  double intensity() const { return cost.bytes() > 0 ? cost.flops / cost.bytes() : 0; }  // FLOPs per byte
  double bandwidth_fraction = 0;  // gbs() over the bandwidth ceiling (0: not measured)
  double compute_fraction = 0;    // the time its products take at their ceilings over its time (0: not measured)
  double product_seconds = 0;     // that time
};

struct PhaseSummary {
  int steps = 0, tokens = 0;
  double seconds = 0, instruction_seconds = 0;
  double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0; }
  InstructionCost cost;
  std::vector<Tally> by_op, by_layer, by_backend, by_kind, by_node;  // by time, largest first
};

struct Profile {
  ProfileLevel level = ProfileLevel::kOff;
  std::string model;  // a label (the path)
  std::string kernels;  // Model::kernel_choice(): the table each back end ran, and why not a faster one
  int n_threads = 1;
  std::vector<NodeInfo> nodes;
  std::vector<StepSample> steps;
  std::vector<InstructionSample> instructions;  // detailed only
  PhaseSummary prefill, decode;
  double time_to_first_token_s = 0;  // from the first step's start to the end of the prefill before the first decode step
  MemoryParts memory;
  Ceilings ceilings;
  std::optional<NumericsFault> fault;
};

// `prompt_tokens` >= 0: the steps that carried the first prompt_tokens tokens are prefill, the
// rest decode; -1: a step of more than one token, or at position 0, is prefill, a one-token step
// after it decode. `ceilings` may be empty (the C API measures none).
Profile build_profile(const Model& model, const StepTracer& tracer, DType kv_dtype, int n_threads,
                      const MemoryParts& memory, const Ceilings& ceilings, int prompt_tokens = -1);

// The (back end, scheme, step size) of every instruction with products: the rates to measure.
std::vector<std::tuple<std::string, Scheme, int>> needed_rates(const Profile& p);

}  // namespace kiln
