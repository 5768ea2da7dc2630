#include "formats/tensor_source.h"

#include <algorithm>
#include <limits>

namespace kiln {

std::optional<uint64_t> shape_elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > std::numeric_limits<uint64_t>::max() / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

uint64_t TensorSource::elements() const { return shape_elements(shape).value_or(0); }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status check_no_overlap(std::vector<const TensorSource*> ts, const std::string& file) {
  std::sort(ts.begin(), ts.end(), [](const TensorSource* a, const TensorSource* b) {
    return a->bytes.data() < b->bytes.data();
  });
  for (size_t i = 1; i < ts.size(); ++i) {
    const TensorSource* prev = ts[i - 1];
    if (prev->bytes.empty()) continue;
    if (ts[i]->bytes.data() < prev->bytes.data() + prev->bytes.size())
      return corrupt(file + ": tensors '" + prev->name + "' and '" + ts[i]->name + "' overlap");
  }
  return Status::ok();
}

namespace {

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Expected> expected_tensors(const ModelConfig& c) {
  std::vector<Expected> e;
  const int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), h = c.hidden_dim, v = c.vocab_size;
  e.push_back({"token_embd.weight", {v, d}});
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    e.push_back({p + "attn_norm.weight", {d}});
    e.push_back({p + "attn_q.weight", {q, d}});
    e.push_back({p + "attn_k.weight", {kv, d}});
    e.push_back({p + "attn_v.weight", {kv, d}});
    if (c.qkv_bias) {
      e.push_back({p + "attn_q.bias", {q}});
      e.push_back({p + "attn_k.bias", {kv}});
      e.push_back({p + "attn_v.bias", {kv}});
    }
    if (c.qk_norm) {
      e.push_back({p + "attn_q_norm.weight", {c.head_dim}});
      e.push_back({p + "attn_k_norm.weight", {c.head_dim}});
    }
    e.push_back({p + "attn_output.weight", {d, q}});
    if (c.gemma_block()) {
      e.push_back({p + "post_attention_norm.weight", {d}});
      e.push_back({p + "post_ffw_norm.weight", {d}});
    }
    e.push_back({p + "ffn_norm.weight", {d}});
    e.push_back({p + "ffn_gate.weight", {h, d}});
    e.push_back({p + "ffn_up.weight", {h, d}});
    e.push_back({p + "ffn_down.weight", {d, h}});
  }
  e.push_back({"output_norm.weight", {d}});
  if (!c.tie_embeddings) e.push_back({"output.weight", {v, d}});
  return e;
}

}  // namespace

Result<std::vector<TensorSource>> split_rows(const TensorSource& fused, int64_t cols,
                                             const std::vector<std::pair<std::string, int64_t>>& parts) {
  int64_t rows = 0;
  for (const auto& [name, n] : parts) rows += n;
  if (fused.shape != std::vector<int64_t>{rows, cols})
    return corrupt(fused.file + ": tensor '" + fused.name + "' has shape " + shape_string(fused.shape) + ", expected " +
                   shape_string({rows, cols}) + " from the config");
  const auto row_bytes = dtype_bytes(fused.dtype, static_cast<uint64_t>(cols));
  const auto all = dtype_bytes(fused.dtype, static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols));
  if (!row_bytes || !all || *all != fused.bytes.size() || *row_bytes * static_cast<uint64_t>(rows) != *all)
    return corrupt(fused.file + ": tensor '" + fused.name + "' has " + std::to_string(fused.bytes.size()) +
                   " bytes, which does not match " + std::string(dtype_name(fused.dtype)) + " " + shape_string(fused.shape));
  std::vector<TensorSource> out;
  uint64_t at = 0;
  for (const auto& [name, n] : parts) {
    TensorSource t = fused;
    t.name = name;
    t.shape = {n, cols};
    t.bytes = fused.bytes.subspan(at, *row_bytes * static_cast<uint64_t>(n));
    at += t.bytes.size();
    out.push_back(std::move(t));
  }
  return out;
}

Status check_model_tensors(const ImportedModel& m) {
  for (const Expected& ex : expected_tensors(m.config)) {
    auto it = m.tensors.find(ex.name);
    if (it == m.tensors.end()) return corrupt(m.path + ": missing tensor '" + ex.name + "'");
    const TensorSource& t = it->second;
    if (t.shape != ex.shape)
      return corrupt(t.file + ": tensor '" + t.name + "' has shape " + shape_string(t.shape) + ", expected " +
                     shape_string(ex.shape) + " from the config");
    auto need = dtype_bytes(t.dtype, t.elements());
    if (!need || *need != t.bytes.size())
      return corrupt(t.file + ": tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                     " bytes, which does not match " + std::string(dtype_name(t.dtype)) + " " +
                     shape_string(t.shape));
  }
  return Status::ok();
}

}  // namespace kiln
