#include "engine/describe_source.h"

#include <map>

namespace kiln {

namespace {

std::string gguf_string(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  const std::string* s = v ? v->as_string() : nullptr;
  return s ? *s : std::string();
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
  j["tensors"] = tensors;
  j["sizes"] = {{"tensor_bytes", tensor_bytes}, {"parameters", params}, {"by_type", by_type}};
  return j;
}

}  // namespace kiln
