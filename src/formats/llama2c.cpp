#include "formats/llama2c.h"

#include <array>

#include "core/byte_reader.h"

namespace kiln {

Result<ImportedModel> read_llama2c(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  ByteReader r(file->bytes(), path);
  std::array<int32_t, 7> h{};
  static const char* kNames[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    KILN_ASSIGN_OR_RETURN(h[static_cast<size_t>(i)], r.read<int32_t>(kNames[i]));
  }
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  // A negative vocabulary size marks an unshared classifier; INT32_MIN has no absolute value.
  c.vocab_size = h[5] == INT32_MIN ? -1 : (h[5] < 0 ? -h[5] : h[5]);
  c.tie_embeddings = h[5] > 0;
  c.max_seq_len = h[6];
  c.head_dim = (c.n_heads > 0 && c.dim > 0 && c.dim % c.n_heads == 0) ? c.dim / c.n_heads : 0;
  if (c.n_heads > 0 && c.dim > 0 && c.dim % c.n_heads != 0)
    return corrupt(path + ": header: dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                   std::to_string(c.n_heads));
  c.rope_style = RopeStyle::kAdjacentPairs;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.bos_id = 1;
  c.eos_id = 2;
  c.stop_ids = {2, 1};  // llama2.c stops when BOS is sampled
  if (c.vocab_size < 3) return corrupt(path + ": header: vocab_size " + std::to_string(h[5]) + " is too small");
  KILN_RETURN_IF_ERROR(validate_config(c, path + ": header"));

  ImportedModel m;
  m.format = "llama2c";
  m.path = path;
  m.config = c;

  // Every count below is bounded by validate_config, so 64-bit products cannot overflow.
  const uint64_t d = static_cast<uint64_t>(c.dim), L = static_cast<uint64_t>(c.n_layers);
  const uint64_t q = static_cast<uint64_t>(c.q_dim()), kv = static_cast<uint64_t>(c.kv_dim());
  const uint64_t hd = static_cast<uint64_t>(c.hidden_dim), v = static_cast<uint64_t>(c.vocab_size);
  const uint64_t freq = static_cast<uint64_t>(c.max_seq_len) * static_cast<uint64_t>(c.head_dim) / 2;
  uint64_t floats = v * d + L * (d + q * d + 2 * kv * d + d * q + d + 3 * hd * d) + d + 2 * freq;
  if (!c.tie_embeddings) floats += v * d;
  const uint64_t expected = 28 + 4 * floats;
  if (file->size() != expected)
    return corrupt(path + ": file is " + std::to_string(file->size()) + " bytes, but its header (dim " +
                   std::to_string(c.dim) + ", " + std::to_string(c.n_layers) + " layers, vocab " +
                   std::to_string(h[5]) + ") needs " + std::to_string(expected));

  uint64_t off = 28;
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    uint64_t n = shape_elements(shape).value_or(0);
    TensorSource t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = std::move(shape);
    t.bytes = file->bytes().subspan(off, n * 4);
    t.file = path;
    off += n * 4;
    m.tensors[name] = t;
  };
  // llama2.c stores each kind for all layers together; slice them per layer.
  auto per_layer = [&](const std::string& kind, std::vector<int64_t> shape) {
    for (int l = 0; l < c.n_layers; ++l) take("blk." + std::to_string(l) + "." + kind, shape);
  };
  const auto D = static_cast<int64_t>(d), Q = static_cast<int64_t>(q), KV = static_cast<int64_t>(kv),
             H = static_cast<int64_t>(hd), V = static_cast<int64_t>(v);
  take("token_embd.weight", {V, D});
  per_layer("attn_norm.weight", {D});
  per_layer("attn_q.weight", {Q, D});
  per_layer("attn_k.weight", {KV, D});
  per_layer("attn_v.weight", {KV, D});
  per_layer("attn_output.weight", {D, Q});
  per_layer("ffn_norm.weight", {D});
  per_layer("ffn_gate.weight", {H, D});
  per_layer("ffn_down.weight", {D, H});
  per_layer("ffn_up.weight", {H, D});
  take("output_norm.weight", {D});
  off += 2 * freq * 4;  // legacy freq_cis tables, recomputed at run time
  if (!c.tie_embeddings) take("output.weight", {V, D});
  m.files.push_back(std::move(file));
  KILN_RETURN_IF_ERROR(check_model_tensors(m));
  return m;
}

}  // namespace kiln
