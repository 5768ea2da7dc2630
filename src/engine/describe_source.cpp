#include "engine/describe_source.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/compile_file.h"
#include "engine/describe.h"

namespace kiln {

namespace {

std::string gguf_string(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  const std::string* s = v ? v->as_string() : nullptr;
  return s ? *s : std::string();
}

// What `kiln compile` with its default flags makes of each weight: the compiler's own plan
// (plan_weights, with the options compile_to_file uses), not a table of its own. Grouped by
// stored type and what it becomes, and the bytes per kiln scheme before and after.
nlohmann::json describe_compile(const Import& imp, nlohmann::json& tensors) {
  nlohmann::json j;
  j["command"] = "kiln compile " + imp.model.path + " -o model.kiln";
  CompileRequest request;  // the default flags
  request.model = imp.model.path;
  CompileReport report;
  auto options = compile_options(request, imp);
  auto plan = options ? plan_weights(imp, *options, &report) : Result<std::vector<WeightPlan>>(options.status());
  if (!plan) {
    j["error"] = plan.status().message();
    return j;
  }
  struct Group {
    int tensors = 0;
    uint64_t bytes = 0, compiled_bytes = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Group> by_type;  // type, scheme, how
  std::map<std::string, Group> by_scheme;
  std::map<std::string, std::pair<std::string, uint64_t>> of_tensor;  // source name -> scheme, bytes
  nlohmann::json planned = nlohmann::json::array();
  uint64_t bytes = 0, compiled = 0;
  for (const WeightPlan& e : *plan) {
    const std::string type(dtype_name(e.source_type)), scheme = scheme_text(e.weight);
    const std::string how = weight_origin_text(e.source_type, e.weight.scheme, e.origin);
    planned.push_back({{"name", e.weight.name}, {"type", type}, {"scheme", scheme}, {"how", how},
                       {"bytes", e.source_bytes}, {"compiled_bytes", e.bytes}});
    Group& g = by_type[{type, scheme, how}];
    g.tensors += e.source_bytes > 0;  // a copy in a second layout ("NAME@LAYOUT") is not another tensor
    g.bytes += e.source_bytes;
    g.compiled_bytes += e.bytes;
    Group& s = by_scheme[std::string(scheme_name(e.weight.scheme))];
    s.tensors += e.source_bytes > 0;
    s.bytes += e.source_bytes;
    s.compiled_bytes += e.bytes;
    bytes += e.source_bytes;
    compiled += e.bytes;
    of_tensor[e.weight.name] = {scheme, e.bytes};
  }
  for (auto& t : tensors)
    if (auto it = of_tensor.find(t["name"].get<std::string>()); it != of_tensor.end())
      t["compiles_to"] = {{"scheme", it->second.first}, {"bytes", it->second.second}};
  // The types that end up largest first: the first line is what most of the file becomes.
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, Group>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(), [](const auto& a, const auto& b) { return a.second.compiled_bytes > b.second.compiled_bytes; });
  nlohmann::json jt = nlohmann::json::array();
  for (const auto& [k, g] : types)
    jt.push_back({{"type", std::get<0>(k)}, {"scheme", std::get<1>(k)}, {"how", std::get<2>(k)}, {"tensors", g.tensors},
                  {"bytes", g.bytes}, {"compiled_bytes", g.compiled_bytes}});
  nlohmann::json js = nlohmann::json::object();
  for (const auto& [name, g] : by_scheme)
    js[name] = {{"tensors", g.tensors}, {"bytes", g.bytes}, {"compiled_bytes", g.compiled_bytes},
                {"share", compiled ? static_cast<double>(g.compiled_bytes) / static_cast<double>(compiled) : 0.0}};
  j["by_type"] = jt;
  j["by_scheme"] = js;
  j["bytes"] = bytes;
  j["compiled_bytes"] = compiled;
  j["tensors"] = planned;
  j["notes"] = report.notes;
  return j;
}

}  // namespace

nlohmann::json describe_source(const Import& imp) {
  const ImportedModel& m = imp.model;
  const ModelConfig& c = m.config;
  nlohmann::json j;
  uint64_t file_bytes = 0;
  for (const auto& f : m.files) file_bytes += f->size();
  j["source"] = {{"format", m.format}, {"path", m.path}, {"file_bytes", file_bytes}, {"files", m.files.size()}};
  j["model"] = {{"arch", std::string(arch_name(c.arch))}, {"layers", c.n_layers}, {"dim", c.dim},
                {"heads", c.n_heads}, {"kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                {"hidden_dim", c.hidden_dim}, {"vocab", c.vocab_size}, {"max_seq_len", c.max_seq_len}};
  if (imp.gguf) {
    j["gguf"] = {{"name", gguf_string(*imp.gguf, "general.name")},
                 {"tokenizer_model", gguf_string(*imp.gguf, "tokenizer.ggml.model")},
                 {"tokenizer_pre", gguf_string(*imp.gguf, "tokenizer.ggml.pre")},
                 {"chat_template", !gguf_string(*imp.gguf, "tokenizer.chat_template").empty()}};
  }
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, uint64_t> by_type;
  uint64_t tensor_bytes = 0, params = 0;
  for (const auto& [name, t] : m.tensors) {
    tensors.push_back({{"name", name}, {"shape", t.shape}, {"type", std::string(dtype_name(t.dtype))},
                       {"bytes", t.bytes.size()}});
    by_type[std::string(dtype_name(t.dtype))] += t.bytes.size();
    tensor_bytes += t.bytes.size();
    params += t.elements();
  }
  j["compile"] = describe_compile(imp, tensors);
  j["tensors"] = tensors;
  j["sizes"] = {{"tensor_bytes", tensor_bytes}, {"parameters", params}, {"by_type", by_type}};
  return j;
}

}  // namespace kiln
