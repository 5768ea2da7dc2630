#include "perf/profile_json.h"

namespace kiln {

namespace {

using OJ = nlohmann::ordered_json;

OJ cost_json(const InstructionCost& c) {
  return OJ{{"weight_bytes", c.weight_bytes}, {"activation_read_bytes", c.activation_read},
            {"activation_written_bytes", c.activation_written}, {"kv_read_bytes", c.kv_read},
            {"kv_written_bytes", c.kv_written}, {"products", c.products}, {"flops", c.flops}};
}

OJ tallies_json(const std::vector<Tally>& ts, size_t top) {
  OJ a = OJ::array();
  for (const Tally& t : ts) {
    if (top > 0 && a.size() >= top) break;
    OJ j{{"name", t.key}};
    if (t.layer >= 0) j["layer"] = t.layer;
    j["count"] = t.count;
    j["seconds"] = t.seconds;
    j["share"] = t.share;
    j["bytes"] = cost_json(t.cost);
    j["gb_per_s"] = t.gbs();
    j["gop_per_s"] = t.gops();
    j["flops_per_byte"] = t.intensity();
    j["bandwidth_fraction"] = t.bandwidth_fraction;
    j["compute_fraction"] = t.compute_fraction;
    a.push_back(std::move(j));
  }
  return a;
}

OJ phase_json(const PhaseSummary& s, double bandwidth, size_t top) {
  OJ j{{"steps", s.steps}, {"tokens", s.tokens}, {"seconds", s.seconds}, {"tokens_per_second", s.tokens_per_second()}};
  if (!s.by_op.empty()) {
    j["instruction_seconds"] = s.instruction_seconds;
    j["bytes"] = cost_json(s.cost);
    const double gbs = s.seconds > 0 ? s.cost.bytes() / s.seconds / 1e9 : 0;
    j["gb_per_s"] = gbs;
    j["bandwidth_fraction"] = bandwidth > 0 ? gbs / bandwidth : 0;
    j["by_op"] = tallies_json(s.by_op, top);
    j["by_kind"] = tallies_json(s.by_kind, top);
    j["by_backend"] = tallies_json(s.by_backend, top);
    j["by_layer"] = tallies_json(s.by_layer, top);
    j["by_instruction"] = tallies_json(s.by_node, top);
  }
  return j;
}

}  // namespace

nlohmann::ordered_json profile_to_json(const Profile& p, size_t top) {
  OJ j{{"level", profile_level_name(p.level)}};
  if (!p.model.empty()) j["model"] = p.model;
  j["threads"] = p.n_threads;
  j["kernels"] = p.kernels;
  j["time_to_first_token_s"] = p.time_to_first_token_s;
  j["prefill"] = phase_json(p.prefill, p.ceilings.bandwidth_gbs, top);
  j["decode"] = phase_json(p.decode, p.ceilings.bandwidth_gbs, top);
  const MemoryParts& m = p.memory;
  j["memory"] = OJ{{"peak_rss_bytes", m.peak_rss}, {"rss_bytes", m.rss_now},
                   {"weights_mapped_bytes", m.weights_mapped}, {"weights_resident_bytes", m.weights_resident},
                   {"arena_bytes", m.arenas}, {"kv_cache_bytes", m.kv_cache}, {"scratch_bytes", m.scratch}};
  OJ c{{"bandwidth_gb_per_s", p.ceilings.bandwidth_gbs}, {"products_per_s", OJ::array()}};
  for (const auto& [k, rate] : p.ceilings.product_rate)
    c["products_per_s"].push_back(OJ{{"backend", std::get<0>(k)}, {"scheme", scheme_name(std::get<1>(k))},
                                     {"step_tokens", std::get<2>(k)}, {"rate", rate}});
  j["ceilings"] = c;
  if (p.fault) {
    OJ f{{"message", p.fault->message()}, {"op", op_name(p.fault->op)}, {"layer", p.fault->layer},
         {"node", p.fault->node}, {"position", p.fault->position}, {"value", p.fault->value}, {"inputs", OJ::array()}};
    for (const auto& r : p.fault->inputs)
      f["inputs"].push_back(OJ{{"value", r.value}, {"min", r.min}, {"max", r.max}, {"nonfinite", r.nonfinite}});
    j["numerics_fault"] = f;
  }
  return j;
}

}  // namespace kiln
