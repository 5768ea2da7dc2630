#include "formats/folded_weights.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace kiln {

Status rewrite_weights(ImportedModel& m, const std::function<bool(const std::string& canonical)>& which,
                       const std::function<float(float)>& f, const std::string& why) {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<TensorSource*, size_t>> rewritten;  // the tensor, its offset in `bytes`
  for (auto& [name, t] : m.tensors) {
    if (!which(name)) continue;
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
      return unsupported(t.file + ": tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) + " (f32, f16 or bf16 expected: " +
                         why + " is folded into it)");
    const uint64_t n = t.elements();
    const size_t at = bytes.size();
    bytes.resize(at + n * sizeof(float));
    for (uint64_t i = 0; i < n; ++i) {
      float w;
      if (t.dtype == DType::kF32) {
        std::memcpy(&w, t.bytes.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, t.bytes.data() + 2 * i, 2);
        w = t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      const float v = f(w);
      std::memcpy(bytes.data() + at + 4 * i, &v, 4);
    }
    rewritten.emplace_back(&t, at);
  }
  if (rewritten.empty()) return Status::ok();
  auto file = MappedFile::from_bytes(std::move(bytes), m.path + " (" + why + ")");
  for (auto [t, at] : rewritten) {
    t->dtype = DType::kF32;
    t->bytes = std::span<const uint8_t>(file->data() + at, t->elements() * sizeof(float));
  }
  m.files.push_back(std::move(file));
  return Status::ok();
}

Status fold_gemma_norms(ImportedModel& m) {
  return rewrite_weights(
      m, [](const std::string& n) { return n.ends_with("norm.weight"); }, [](float w) { return 1.0f + w; },
      "Gemma norms, 1 + w");
}

Status fold_minicpm_scales(ImportedModel& m) {
  ModelConfig& c = m.config;
  const float r = c.residual_scale;
  // z = x / r turns x + r * F(norm(x)) into z + F(norm(z)) with the norm's eps over r^2; z starts
  // as the embedding times scale_emb / r. Exact in real arithmetic; in f32 only the roundings move.
  const float eps = c.rms_eps / (r * r), embed = (c.embed_scale > 0.0f ? c.embed_scale : 1.0f) / r;
  if (!(eps > 0.0f) || eps > 1.0f || !std::isfinite(embed))
    return unsupported(m.path + ": MiniCPM's residual scale " + std::to_string(r) + " with rms_norm_eps " +
                       std::to_string(c.rms_eps) + " cannot become the norms' eps (" + std::to_string(eps) +
                       ", above 1)");
  c.rms_eps = eps;
  c.embed_scale = embed;
  const float logit = c.logit_scale;
  KILN_RETURN_IF_ERROR(rewrite_weights(
      m, [](const std::string& n) { return n == "output_norm.weight"; }, [logit](float w) { return w * logit; },
      "MiniCPM's logit scale"));
  c.residual_scale = c.logit_scale = 0.0f;  // in the embedding's scale, the norms' eps and the final norm now
  return Status::ok();
}

}  // namespace kiln
