#include "perf/trace_json.h"

#include <map>

namespace kiln {

nlohmann::ordered_json trace_to_json(const Profile& p) {
  using OJ = nlohmann::ordered_json;
  OJ events = OJ::array();
  constexpr int kPid = 1;
  events.push_back(OJ{{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", 0}, {"args", {{"name", "kiln"}}}});
  // Small thread ids, in the order the threads first ran a step.
  std::map<uint64_t, int> tids;
  for (const StepSample& s : p.steps)
    if (tids.emplace(s.record.thread, static_cast<int>(tids.size()) + 1).second) {
      const int tid = tids[s.record.thread];
      events.push_back(OJ{{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", tid},
                          {"args", {{"name", "steps " + std::to_string(tid)}}}});
    }
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  for (const StepSample& s : p.steps) {
    const int tid = tids[s.record.thread];
    events.push_back(OJ{{"name", std::string(phase_name(s.phase)) + " step"}, {"cat", "step"}, {"ph", "X"},
                        {"ts", us(s.record.begin_ns)}, {"dur", us(s.record.end_ns - s.record.begin_ns)}, {"pid", kPid},
                        {"tid", tid},
                        {"args", {{"tokens", s.record.tokens}, {"first_position", s.record.first_pos}, {"batch", s.record.batch}}}});
    events.push_back(OJ{{"name", "memory"}, {"ph", "C"}, {"ts", us(s.record.end_ns)}, {"pid", kPid},
                        {"args", {{"rss_mib", static_cast<double>(s.record.rss_bytes) / (1024.0 * 1024.0)}}}});
  }
  for (const InstructionSample& i : p.instructions) {
    const NodeInfo& n = p.nodes[static_cast<size_t>(i.node)];
    const StepSample& s = p.steps[static_cast<size_t>(i.step)];
    const double gbs = i.seconds > 0 ? i.cost.bytes() / i.seconds / 1e9 : 0;
    const double gops = i.seconds > 0 ? i.cost.flops / i.seconds / 1e9 : 0;
    events.push_back(OJ{{"name", n.op}, {"cat", n.kind}, {"ph", "X"}, {"ts", i.begin_s * 1e6}, {"dur", i.seconds * 1e6},
                        {"pid", kPid}, {"tid", tids[s.record.thread]},
                        {"args", {{"node", i.node}, {"layer", n.layer}, {"backend", n.backend}, {"kernel", n.kernel},
                                  {"rows", i.step_tokens}, {"weight_bytes", i.cost.weight_bytes},
                                  {"activation_bytes", i.cost.activation_read + i.cost.activation_written},
                                  {"kv_bytes", i.cost.kv_read + i.cost.kv_written}, {"flops", i.cost.flops},
                                  {"gb_per_s", gbs}, {"gop_per_s", gops}}}});
  }
  return OJ{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace kiln
