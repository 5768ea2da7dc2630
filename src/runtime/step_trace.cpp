#include "runtime/step_trace.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

namespace kiln {

std::string_view profile_level_name(ProfileLevel level) {
  switch (level) {
    case ProfileLevel::kOff: return "off";
    case ProfileLevel::kBasic: return "basic";
    case ProfileLevel::kDetailed: return "detailed";
  }
  return "off";
}

Result<ProfileLevel> parse_profile_level(std::string_view name) {
  for (ProfileLevel l : {ProfileLevel::kOff, ProfileLevel::kBasic, ProfileLevel::kDetailed})
    if (name == profile_level_name(l)) return l;
  return invalid_argument("unknown profiling level '" + std::string(name) + "' (off, basic or detailed)");
}

size_t StepTracer::begin_step(int tokens, int first_pos, int batch, bool all_logits) {
  StepRecord r;
  r.tokens = tokens;
  r.first_pos = first_pos;
  r.batch = batch;
  r.all_logits = all_logits;
  r.thread = std::hash<std::thread::id>()(std::this_thread::get_id());
  r.first_instruction = static_cast<uint32_t>(instructions_.size());
  r.begin_ns = now_ns();
  steps_.push_back(r);
  return steps_.size() - 1;
}

void StepTracer::end_step(size_t step) {
  StepRecord& r = steps_[step];
  r.end_ns = now_ns();
  r.n_instructions = static_cast<uint32_t>(instructions_.size()) - r.first_instruction;
  if (rss_ == 0 || r.end_ns - rss_at_ns_ >= 1000000) {
    rss_ = resident_bytes_now();
    rss_at_ns_ = r.end_ns;
  }
  r.rss_bytes = rss_;
}

void StepTracer::clear() {
  rss_ = 0;
  steps_.clear();
  instructions_.clear();
  fault_.reset();
}

namespace {
std::string number(float v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", static_cast<double>(v));
  return s;
}
}  // namespace

std::string NumericsFault::message() const {
  std::string m = "non-finite value (" + number(found) + ") in '" + value + "' [" + std::to_string(index) +
                  "], written by " + std::string(op_name(op)) + " (node " + std::to_string(node) + ", " +
                  (layer >= 0 ? "layer " + std::to_string(layer) : std::string("no layer")) + ") at token position " +
                  std::to_string(position) + "; its inputs:";
  for (const Range& r : inputs) {
    m += " " + r.value + " in [" + number(r.min) + ", " + number(r.max) + "]";
    if (r.nonfinite > 0) m += " with " + std::to_string(r.nonfinite) + " non-finite";
    m += ";";
  }
  if (inputs.empty()) m += " none;";
  m.pop_back();
  return m;
}

uint64_t resident_bytes_now() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace kiln
