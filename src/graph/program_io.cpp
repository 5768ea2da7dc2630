#include <limits>

#include "formats/json_util.h"
#include "graph/program.h"

namespace kiln {

std::string program_to_json(const Program& p) {
  Json j;
  Json values = Json::array();
  for (const Value& v : p.graph.values) values.push_back({{"name", v.name}, {"width", v.width}});
  Json weights = Json::array();
  for (const WeightDesc& w : p.graph.weights)
    weights.push_back({{"name", w.name}, {"shape", w.shape}, {"scheme", w.scheme}, {"group_size", w.group_size},
                       {"symmetric", w.symmetric}, {"layout", w.layout}});
  Json nodes = Json::array();
  for (const Node& n : p.graph.nodes)
    nodes.push_back({{"op", std::string(op_name(n.op))}, {"inputs", n.inputs}, {"outputs", n.outputs},
                     {"weights", n.weights}, {"layer", n.layer}, {"n_heads", n.n_heads},
                     {"n_kv_heads", n.n_kv_heads}, {"head_dim", n.head_dim}, {"eps", n.eps}, {"tail", n.tail},
                     {"backend", n.backend}});
  j["values"] = values;
  j["weights"] = weights;
  j["nodes"] = nodes;
  j["tokens_input"] = p.graph.tokens_input;
  j["logits_output"] = p.graph.logits_output;
  j["rope_inv_freq"] = p.rope_inv_freq;
  return j.dump();
}

std::string plan_to_json(const MemoryPlan& plan) {
  Json j = {{"max_tokens", plan.max_tokens}, {"logit_rows", plan.logit_rows}, {"offsets", plan.offsets}, {"sizes", plan.sizes},
            {"arena_bytes", plan.arena_bytes}, {"total_bytes", plan.total_bytes}};
  return j.dump();
}

namespace {

// Reads an array of integers in [lo, hi].
Status int_array(const Json& j, const char* key, int64_t lo, int64_t hi, std::vector<int64_t>& out,
                 const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return corrupt(where + ": '" + key + "' must be an array");
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return corrupt(where + ": '" + key + "' has an entry outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v.get<int64_t>());
  }
  return Status::ok();
}

Status ids(const Json& j, const char* key, size_t limit, std::vector<int>& out, const std::string& where) {
  std::vector<int64_t> v;
  KILN_RETURN_IF_ERROR(int_array(j, key, 0, static_cast<int64_t>(limit) - 1, v, where));
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
    KILN_ASSIGN_OR_RETURN(d.scheme, json_string(w, "scheme", "", where));
    KILN_ASSIGN_OR_RETURN(d.layout, json_string(w, "layout", "", where));
    KILN_ASSIGN_OR_RETURN(d.group_size, json_dim(w, "group_size", 0, where));
    KILN_ASSIGN_OR_RETURN(d.symmetric, json_bool(w, "symmetric", true, where));
    KILN_RETURN_IF_ERROR(int_array(w, "shape", 1, kMaxWidth, d.shape, where + ": weight '" + d.name + "'"));
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
    KILN_ASSIGN_OR_RETURN(node.tail, json_bool(n, "tail", false, where));
    KILN_ASSIGN_OR_RETURN(node.backend, json_string(n, "backend", "", where));
    g.nodes.push_back(std::move(node));
  }
  KILN_ASSIGN_OR_RETURN(g.tokens_input, json_dim(j, "tokens_input", -1, where));
  KILN_ASSIGN_OR_RETURN(g.logits_output, json_dim(j, "logits_output", -1, where));
  KILN_RETURN_IF_ERROR(verify_graph(g).with_context(where));

  auto rf = j.find("rope_inv_freq");
  if (rf == j.end() || !rf->is_array() || rf->size() > 4096) return corrupt(where + ": 'rope_inv_freq' must be an array");
  for (const Json& f : *rf) {
    if (!f.is_number()) return corrupt(where + ": 'rope_inv_freq' must hold numbers");
    p.rope_inv_freq.push_back(f.get<float>());
  }
  KILN_ASSIGN_OR_RETURN(p.plan.max_tokens, json_dim(plan, "max_tokens", 0, where));
  if (p.plan.max_tokens < 1 || p.plan.max_tokens > (1 << 16)) return corrupt(where + ": plan: bad max_tokens");
  // Files before logit_rows planned the tail's values for max_tokens rows.
  KILN_ASSIGN_OR_RETURN(p.plan.logit_rows, json_dim(plan, "logit_rows", p.plan.max_tokens, where));
  if (p.plan.logit_rows < 1 || p.plan.logit_rows > p.plan.max_tokens) return corrupt(where + ": plan: bad logit_rows");
  KILN_ASSIGN_OR_RETURN(p.plan.arena_bytes, json_int(plan, "arena_bytes", -1, where));
  KILN_ASSIGN_OR_RETURN(p.plan.total_bytes, json_int(plan, "total_bytes", -1, where));
  constexpr int64_t kMaxArena = int64_t{1} << 40;
  if (p.plan.arena_bytes < 0 || p.plan.arena_bytes > kMaxArena) return corrupt(where + ": plan: bad arena size");
  KILN_RETURN_IF_ERROR(int_array(plan, "offsets", 0, p.plan.arena_bytes, p.plan.offsets, where + ": plan"));
  KILN_RETURN_IF_ERROR(int_array(plan, "sizes", 0, p.plan.arena_bytes, p.plan.sizes, where + ": plan"));
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

std::string config_to_json(const ModelConfig& c) {
  Json j = {{"arch", std::string(arch_name(c.arch))},
            {"dim", c.dim},
            {"hidden_dim", c.hidden_dim},
            {"n_layers", c.n_layers},
            {"n_heads", c.n_heads},
            {"n_kv_heads", c.n_kv_heads},
            {"head_dim", c.head_dim},
            {"vocab_size", c.vocab_size},
            {"max_seq_len", c.max_seq_len},
            {"rms_eps", c.rms_eps},
            {"rope_theta", c.rope_theta},
            {"rope_half_split", c.rope_style == RopeStyle::kHalfSplit},
            {"rope_scaling",
             {{"type", c.rope_scaling.type == RopeScaling::Type::kNone     ? "none"
                       : c.rope_scaling.type == RopeScaling::Type::kLinear ? "linear"
                                                                           : "llama3"},
              {"factor", c.rope_scaling.factor},
              {"low_freq_factor", c.rope_scaling.low_freq_factor},
              {"high_freq_factor", c.rope_scaling.high_freq_factor},
              {"original_max_position", c.rope_scaling.original_max_position}}},
            {"tie_embeddings", c.tie_embeddings},
            {"qkv_bias", c.qkv_bias},
            {"qk_norm", c.qk_norm},
            {"sliding_window", c.sliding_window},
            {"rope_layers", c.rope_layers},
            {"bos_id", c.bos_id},
            {"eos_id", c.eos_id},
            {"stop_ids", c.stop_ids}};
  return j.dump();
}

Result<ModelConfig> config_from_json(std::string_view text, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(text, where));
  if (!j.is_object()) return corrupt(where + ": not an object");
  ModelConfig c;
  KILN_ASSIGN_OR_RETURN(std::string arch, json_string(j, "arch", "", where));
  if (arch == "llama") c.arch = Arch::kLlama;
  else if (arch == "qwen2") c.arch = Arch::kQwen2;
  else if (arch == "mistral") c.arch = Arch::kMistral;
  else if (arch == "qwen3") c.arch = Arch::kQwen3;
  else if (arch == "smollm3") c.arch = Arch::kSmolLM3;
  else return corrupt(where + ": unknown arch '" + arch + "'");
  KILN_ASSIGN_OR_RETURN(c.dim, json_dim(j, "dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.hidden_dim, json_dim(j, "hidden_dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_layers, json_dim(j, "n_layers", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_heads, json_dim(j, "n_heads", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, json_dim(j, "n_kv_heads", 0, where));
  KILN_ASSIGN_OR_RETURN(c.head_dim, json_dim(j, "head_dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.vocab_size, json_dim(j, "vocab_size", 0, where));
  KILN_ASSIGN_OR_RETURN(c.max_seq_len, json_dim(j, "max_seq_len", 0, where));
  KILN_ASSIGN_OR_RETURN(double eps, json_number(j, "rms_eps", 0, where));
  KILN_ASSIGN_OR_RETURN(double theta, json_number(j, "rope_theta", 0, where));
  c.rms_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  KILN_ASSIGN_OR_RETURN(bool half, json_bool(j, "rope_half_split", false, where));
  c.rope_style = half ? RopeStyle::kHalfSplit : RopeStyle::kAdjacentPairs;
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    KILN_ASSIGN_OR_RETURN(std::string type, json_string(*rs, "type", "none", where));
    if (type == "none") c.rope_scaling.type = RopeScaling::Type::kNone;
    else if (type == "linear") c.rope_scaling.type = RopeScaling::Type::kLinear;
    else if (type == "llama3") c.rope_scaling.type = RopeScaling::Type::kLlama3;
    else return corrupt(where + ": unknown rope scaling '" + type + "'");
    KILN_ASSIGN_OR_RETURN(double f, json_number(*rs, "factor", 1, where));
    KILN_ASSIGN_OR_RETURN(double lo, json_number(*rs, "low_freq_factor", 1, where));
    KILN_ASSIGN_OR_RETURN(double hi, json_number(*rs, "high_freq_factor", 4, where));
    KILN_ASSIGN_OR_RETURN(c.rope_scaling.original_max_position, json_dim(*rs, "original_max_position", 8192, where));
    c.rope_scaling.factor = static_cast<float>(f);
    c.rope_scaling.low_freq_factor = static_cast<float>(lo);
    c.rope_scaling.high_freq_factor = static_cast<float>(hi);
  }
  KILN_ASSIGN_OR_RETURN(c.tie_embeddings, json_bool(j, "tie_embeddings", false, where));
  KILN_ASSIGN_OR_RETURN(c.qkv_bias, json_bool(j, "qkv_bias", false, where));
  KILN_ASSIGN_OR_RETURN(c.qk_norm, json_bool(j, "qk_norm", false, where));
  KILN_ASSIGN_OR_RETURN(c.sliding_window, json_dim(j, "sliding_window", 0, where));
  std::vector<int64_t> rope_layers;  // absent in files written before SmolLM3: RoPE everywhere
  if (j.contains("rope_layers")) KILN_RETURN_IF_ERROR(int_array(j, "rope_layers", 0, 1, rope_layers, where));
  c.rope_layers.assign(rope_layers.begin(), rope_layers.end());
  KILN_ASSIGN_OR_RETURN(c.bos_id, json_dim(j, "bos_id", -1, where));
  KILN_ASSIGN_OR_RETURN(c.eos_id, json_dim(j, "eos_id", -1, where));
  std::vector<int64_t> stops;
  KILN_RETURN_IF_ERROR(int_array(j, "stop_ids", 0, std::numeric_limits<int32_t>::max(), stops, where));
  c.stop_ids.assign(stops.begin(), stops.end());
  KILN_RETURN_IF_ERROR(validate_config(c, where));
  return c;
}

}  // namespace kiln
