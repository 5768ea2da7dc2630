#include "artifact/program_section.h"

#include <limits>

#include "formats/json_util.h"

namespace kiln {

std::string program_to_json(const Program& p) {
  Json j;
  Json values = Json::array();
  for (const Value& v : p.graph.values) values.push_back({{"name", v.name}, {"width", v.width}});
  Json weights = Json::array();
  for (const WeightDesc& w : p.graph.weights)
    weights.push_back({{"name", w.name}, {"shape", w.shape}, {"scheme", scheme_name(w.scheme)}, {"group_size", w.group_size},
                       {"symmetric", w.symmetric}, {"layout", w.layout}});
  Json nodes = Json::array();
  for (const Node& n : p.graph.nodes) {
    nodes.push_back({{"op", std::string(op_name(n.op))}, {"inputs", n.inputs}, {"outputs", n.outputs},
                     {"weights", n.weights}, {"layer", n.layer}, {"n_heads", n.n_heads},
                     {"n_kv_heads", n.n_kv_heads}, {"head_dim", n.head_dim}, {"eps", n.eps}, {"tail", n.tail},
                     {"backend", n.backend}});
    if (n.scale != 0.0f) nodes.back()["scale"] = n.scale;  // only where set: older files stay the same
    if (n.softcap != 0.0f) nodes.back()["softcap"] = n.softcap;
  }
  j["values"] = values;
  j["weights"] = weights;
  j["nodes"] = nodes;
  j["tokens_input"] = p.graph.tokens_input;
  j["logits_output"] = p.graph.logits_output;
  j["rope_inv_freq"] = p.rope_inv_freq;
  if (!p.rope_inv_freq_local.empty()) j["rope_inv_freq_local"] = p.rope_inv_freq_local;
  if (!p.rope_inv_freq_long.empty()) j["rope_inv_freq_long"] = p.rope_inv_freq_long;
  return j.dump();
}

std::string plan_to_json(const MemoryPlan& plan) {
  Json j = {{"max_tokens", plan.max_tokens}, {"logit_rows", plan.logit_rows}, {"offsets", plan.offsets}, {"sizes", plan.sizes},
            {"arena_bytes", plan.arena_bytes}, {"total_bytes", plan.total_bytes}};
  return j.dump();
}

namespace {

Status ids(const Json& j, const char* key, size_t limit, std::vector<int>& out, const std::string& where) {
  std::vector<int64_t> v;
  KILN_RETURN_IF_ERROR(json_int_array(j, key, 0, static_cast<int64_t>(limit) - 1, v, where));
  out.assign(v.begin(), v.end());
  return Status::ok();
}

}  // namespace

Result<Program> program_from_json(std::string_view text, std::string_view plan_text, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(text, where + ": program"));
  KILN_ASSIGN_OR_RETURN(Json plan, parse_json(plan_text, where + ": memory plan"));
  Program p;
  Graph& g = p.graph;
  if (!j.is_object() || !j["values"].is_array() || !j["weights"].is_array() || !j["nodes"].is_array() ||
      !plan.is_object())
    return corrupt(where + ": program must have values, weights, nodes and a memory plan");
  constexpr int64_t kMaxWidth = int64_t{1} << 28;
  for (const Json& v : j["values"]) {
    KILN_ASSIGN_OR_RETURN(std::string name, json_string(v, "name", "", where));
    KILN_ASSIGN_OR_RETURN(int64_t width, json_int(v, "width", -1, where));
    if (width < 1 || width > kMaxWidth) return corrupt(where + ": value '" + name + "' has a bad width");
    g.values.push_back({name, width});
  }
  for (const Json& w : j["weights"]) {
    WeightDesc d;
    KILN_ASSIGN_OR_RETURN(d.name, json_string(w, "name", "", where));
    KILN_ASSIGN_OR_RETURN(std::string scheme, json_string(w, "scheme", "", where));
    const std::optional<Scheme> parsed = parse_scheme(scheme);
    if (!parsed)
      return corrupt(where + ": weight '" + d.name + "': unknown scheme '" + scheme + "' (" +
                     std::string(scheme_names_list()) + ")");
    d.scheme = *parsed;
    KILN_ASSIGN_OR_RETURN(d.layout, json_string(w, "layout", "", where));
    KILN_ASSIGN_OR_RETURN(d.group_size, json_dim(w, "group_size", 0, where));
    KILN_ASSIGN_OR_RETURN(d.symmetric, json_bool(w, "symmetric", true, where));
    KILN_RETURN_IF_ERROR(json_int_array(w, "shape", 1, kMaxWidth, d.shape, where + ": weight '" + d.name + "'"));
    if (d.shape.empty() || d.shape.size() > 2) return corrupt(where + ": weight '" + d.name + "' must have 1 or 2 dimensions");
    g.weights.push_back(std::move(d));
  }
  const size_t nv = g.values.size(), nw = g.weights.size();
  for (const Json& n : j["nodes"]) {
    Node node;
    KILN_ASSIGN_OR_RETURN(std::string op, json_string(n, "op", "", where));
    KILN_ASSIGN_OR_RETURN(node.op, op_from_name(op));
    KILN_RETURN_IF_ERROR(ids(n, "inputs", nv, node.inputs, where));
    KILN_RETURN_IF_ERROR(ids(n, "outputs", nv, node.outputs, where));
    KILN_RETURN_IF_ERROR(ids(n, "weights", nw, node.weights, where));
    KILN_ASSIGN_OR_RETURN(node.layer, json_dim(n, "layer", -1, where));
    KILN_ASSIGN_OR_RETURN(node.n_heads, json_dim(n, "n_heads", 0, where));
    KILN_ASSIGN_OR_RETURN(node.n_kv_heads, json_dim(n, "n_kv_heads", 0, where));
    KILN_ASSIGN_OR_RETURN(node.head_dim, json_dim(n, "head_dim", 0, where));
    KILN_ASSIGN_OR_RETURN(double eps, json_number(n, "eps", 0.0, where));
    node.eps = static_cast<float>(eps);
    KILN_ASSIGN_OR_RETURN(double scale, json_number(n, "scale", 0.0, where));
    if (!(scale >= 0.0 && scale < 1e30)) return corrupt(where + ": a node's scale must be a finite non-negative number");
    node.scale = static_cast<float>(scale);
    KILN_ASSIGN_OR_RETURN(double softcap, json_number(n, "softcap", 0.0, where));
    if (!(softcap >= 0.0 && softcap < 1e30)) return corrupt(where + ": a node's softcap must be a finite non-negative number");
    node.softcap = static_cast<float>(softcap);
    KILN_ASSIGN_OR_RETURN(node.tail, json_bool(n, "tail", false, where));
    KILN_ASSIGN_OR_RETURN(node.backend, json_string(n, "backend", "", where));
    g.nodes.push_back(std::move(node));
  }
  KILN_ASSIGN_OR_RETURN(g.tokens_input, json_dim(j, "tokens_input", -1, where));
  KILN_ASSIGN_OR_RETURN(g.logits_output, json_dim(j, "logits_output", -1, where));
  KILN_RETURN_IF_ERROR(verify_graph(g).with_context(where));

  // The RoPE frequencies, and (Gemma) the sliding-window layers' own and (LongRoPE) the long
  // factors', absent elsewhere.
  auto read_freqs = [&](const char* key, bool required, std::vector<float>& out) -> Status {
    auto rf = j.find(key);
    if (rf == j.end() && !required) return Status::ok();
    if (rf == j.end() || !rf->is_array() || rf->size() > 4096) return corrupt(where + ": '" + key + "' must be an array");
    for (const Json& f : *rf) {
      if (!f.is_number()) return corrupt(where + ": '" + key + "' must hold numbers");
      out.push_back(f.get<float>());
    }
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(read_freqs("rope_inv_freq", true, p.rope_inv_freq));
  KILN_RETURN_IF_ERROR(read_freqs("rope_inv_freq_local", false, p.rope_inv_freq_local));
  KILN_RETURN_IF_ERROR(read_freqs("rope_inv_freq_long", false, p.rope_inv_freq_long));
  KILN_ASSIGN_OR_RETURN(p.plan.max_tokens, json_dim(plan, "max_tokens", 0, where));
  if (p.plan.max_tokens < 1 || p.plan.max_tokens > (1 << 16)) return corrupt(where + ": plan: bad max_tokens");
  // Files before logit_rows planned the tail's values for max_tokens rows.
  KILN_ASSIGN_OR_RETURN(p.plan.logit_rows, json_dim(plan, "logit_rows", p.plan.max_tokens, where));
  if (p.plan.logit_rows < 1 || p.plan.logit_rows > p.plan.max_tokens) return corrupt(where + ": plan: bad logit_rows");
  KILN_ASSIGN_OR_RETURN(p.plan.arena_bytes, json_int(plan, "arena_bytes", -1, where));
  KILN_ASSIGN_OR_RETURN(p.plan.total_bytes, json_int(plan, "total_bytes", -1, where));
  constexpr int64_t kMaxArena = int64_t{1} << 40;
  if (p.plan.arena_bytes < 0 || p.plan.arena_bytes > kMaxArena) return corrupt(where + ": plan: bad arena size");
  KILN_RETURN_IF_ERROR(json_int_array(plan, "offsets", 0, p.plan.arena_bytes, p.plan.offsets, where + ": plan"));
  KILN_RETURN_IF_ERROR(json_int_array(plan, "sizes", 0, p.plan.arena_bytes, p.plan.sizes, where + ": plan"));
  if (p.plan.offsets.size() != nv || p.plan.sizes.size() != nv)
    return corrupt(where + ": plan: one offset and size per value expected");
  // Every value a node touches must fit its planned buffer at max_tokens (logit_rows for the
  // tail's), inside the arena.
  const std::vector<bool> tail = tail_values(g);
  for (const Node& n : g.nodes) {
    for (const auto* list : {&n.inputs, &n.outputs})
      for (int v : *list) {
        const auto sv = static_cast<size_t>(v);
        const int64_t need = g.values[sv].width * 4 * planned_rows(p.plan, tail, sv);
        if (p.plan.sizes[sv] < need || p.plan.offsets[sv] > p.plan.arena_bytes - p.plan.sizes[sv])
          return corrupt(where + ": plan: value '" + g.values[sv].name + "' does not fit its buffer");
      }
  }
  return p;
}

}  // namespace kiln
