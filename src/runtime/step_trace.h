// What a session records about its steps when asked: the profiler's raw data. A StepTracer is
// made by the caller and handed to a session (Session::set_tracer), never a global; a
// session without one pays a null pointer check per instruction.
//
//   basic     one record per step: tokens, position, time, resident memory after it
//   detailed  also one record per program instruction: its node and its time
//
// Independently, check_numerics scans every instruction's outputs for NaN and infinity and stops
// the step at the first one, naming the op, its layer, the token position and the ranges of the
// instruction's inputs (src/runtime/numerics_check.h).
//
// The records are written by the thread that runs the step (the session's own, or the leader of
// a batched decode step while the session waits for it), and read by the session's thread after
// the step: a tracer needs no lock of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/api/backend.h"
#include "graph/graph.h"

namespace kiln {

enum class ProfileLevel : uint8_t { kOff, kBasic, kDetailed };
std::string_view profile_level_name(ProfileLevel level);
Result<ProfileLevel> parse_profile_level(std::string_view name);

struct StepRecord {
  int tokens = 0;      // rows this session had in the step
  int first_pos = 0;   // the session's position before it
  int batch = 1;       // rows in the step, every session's (a batched decode step has several)
  bool all_logits = false;
  uint64_t thread = 0; // the thread that ran it (a hash of its id)
  uint64_t begin_ns = 0, end_ns = 0;  // since the tracer was made
  uint64_t rss_bytes = 0;             // resident memory after the step (sampled at most once a millisecond)
  uint32_t first_instruction = 0, n_instructions = 0;  // into instructions()
};

struct InstructionRecord {
  int32_t node = 0;  // index into the program's graph (= the kernel)
  uint64_t begin_ns = 0, end_ns = 0;
};

// The first non-finite value an instruction wrote.
struct NumericsFault {
  struct Range {
    std::string value;  // the input's name in the graph
    float min = 0, max = 0;
    int64_t nonfinite = 0;  // NaN and infinities among its elements
  };
  int node = 0;
  OpCode op = OpCode::kAdd;
  int layer = -1;
  int row = 0;       // the step's row it was found in
  int position = 0;  // that row's token position
  std::string value; // the output it was found in
  int64_t index = 0; // the element in that row
  float found = 0;   // NaN or an infinity
  std::vector<Range> inputs;
  std::string message() const;
};

class StepTracer {
 public:
  explicit StepTracer(ProfileLevel level, bool check_numerics = false)
      : level_(level), check_numerics_(check_numerics), origin_(std::chrono::steady_clock::now()) {}

  ProfileLevel level() const { return level_; }
  bool check_numerics() const { return check_numerics_; }
  bool per_instruction() const { return level_ == ProfileLevel::kDetailed; }

  uint64_t now_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count());
  }
  uint64_t at(std::chrono::steady_clock::time_point t) const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count());
  }
  // Returns the step's index for end_step.
  size_t begin_step(int tokens, int first_pos, int batch, bool all_logits);
  void end_step(size_t step);
  void instruction(int node, uint64_t begin_ns, uint64_t end_ns) {
    instructions_.push_back({node, begin_ns, end_ns});
  }
  void set_fault(NumericsFault f) { fault_ = std::move(f); }

  // Called after every instruction with the step's context and the rows it ran on (tools that
  // read activations, e.g. `kiln compare`); unset by default.
  std::function<void(int node, const StepContext& ctx, int rows)> after_instruction;

  const std::vector<StepRecord>& steps() const { return steps_; }
  const std::vector<InstructionRecord>& instructions() const { return instructions_; }
  const std::optional<NumericsFault>& fault() const { return fault_; }
  // Forgets the records (not the level).
  void clear();

 private:
  ProfileLevel level_;
  bool check_numerics_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<StepRecord> steps_;
  std::vector<InstructionRecord> instructions_;
  std::optional<NumericsFault> fault_;
  // Reading /proc costs ~8 us, 7 % of a 0.1 ms step of a tiny model: sampled at most once a ms.
  uint64_t rss_ = 0, rss_at_ns_ = 0;
};

// Resident memory of this process now (Linux /proc/self/statm; 0 elsewhere).
uint64_t resident_bytes_now();

}  // namespace kiln
