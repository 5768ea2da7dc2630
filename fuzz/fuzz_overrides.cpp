// Overrides file parser and scheme assignment on arbitrary text, against a fixed small model.
//
// Beyond "no crash", each accepted input must give a usable assignment: one scheme per tensor,
// norms in f32, valid parameters whose layout fits the tensor's shape; the weight is then
// quantized, dequantized and multiplied with those parameters.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backends/ref/ref_matmul.h"
#include "quant/overrides.h"
#include "quant/weight_quantizer.h"

namespace {

// Two layers, dim 64, FFN 96 (a multiple of 32 but not of 64 or 128), vocabulary 8.
std::vector<kiln::WeightRef> small_model() {
  std::vector<kiln::WeightRef> w;
  w.push_back({"token_embd.weight", "model.embed_tokens.weight", -1, "embedding", true, 8, 64});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    w.push_back({b + "attn_norm.weight", h + "input_layernorm.weight", l, "attn_norm", false, 1, 64});
    w.push_back({b + "attn_q.weight", h + "self_attn.q_proj.weight", l, "attn_q", true, 4, 64});
    w.push_back({b + "attn_k.weight", h + "self_attn.k_proj.weight", l, "attn_k", true, 2, 64});
    w.push_back({b + "attn_v.weight", h + "self_attn.v_proj.weight", l, "attn_v", true, 2, 64});
    w.push_back({b + "attn_output.weight", h + "self_attn.o_proj.weight", l, "attn_output", true, 4, 64});
    w.push_back({b + "ffn_norm.weight", h + "post_attention_layernorm.weight", l, "ffn_norm", false, 1, 64});
    w.push_back({b + "ffn_gate.weight", h + "mlp.gate_proj.weight", l, "ffn_gate", true, 3, 64});
    w.push_back({b + "ffn_up.weight", h + "mlp.up_proj.weight", l, "ffn_up", true, 3, 64});
    w.push_back({b + "ffn_down.weight", h + "mlp.down_proj.weight", l, "ffn_down", true, 4, 96});
  }
  w.push_back({"output_norm.weight", "model.norm.weight", -1, "output_norm", false, 1, 64});
  w.push_back({"output.weight", "lm_head.weight", -1, "output", true, 8, 64});
  return w;
}

void check(bool ok) {
  if (!ok) std::abort();
}

// Quantizes a fixed matrix of w's shape with p, and runs it through dequantize and ref_matmul.
void exercise(const kiln::QuantParams& p, const kiln::WeightRef& w) {
  const int64_t rows = w.rows, cols = w.cols;
  std::vector<float> m(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(2 * cols));
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(static_cast<int>(i * 7919 % 201) - 100) / 64.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 104729 % 61) - 30) / 8.0f;
  auto size = kiln::quantized_size(p, rows, cols);
  check(size.has_value());
  std::vector<uint8_t> q(*size);
  check(kiln::round_to_nearest().quantize(p, m.data(), rows, cols, q).is_ok());
  std::vector<float> d(m.size()), y(static_cast<size_t>(2 * rows));
  check(kiln::dequantize_matrix(p, q, rows, cols, d.data()).is_ok());
  check(kiln::ref_matmul(p, q, rows, cols, x.data(), 2, y.data()).is_ok());
}

void run(std::string_view text, const kiln::OverridesFile& base) {
  static const std::vector<kiln::WeightRef> weights = small_model();
  auto file = kiln::parse_overrides(text, "fuzz/overrides.json", base);
  if (!file) {
    check(!file.status().message().empty());
    return;
  }
  std::vector<std::string> notes;
  auto r = kiln::assign_schemes(*file, weights, "fuzz/overrides.json", &notes);
  if (!r) {
    check(!r.status().message().empty());
    return;
  }
  check(r->size() == weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const kiln::QuantParams& p = (*r)[i];
    check(kiln::validate_params(p).is_ok());
    check(p == kiln::canonical(p));
    check(kiln::check_shape(p, weights[i].rows, weights[i].cols).is_ok());
    if (!weights[i].is_matmul_weight) check(p.scheme == kiln::Scheme::kF32);
    exercise(p, weights[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  run(text, kiln::OverridesFile{});
  // The same file over command-line defaults that differ in every field.
  static const kiln::OverridesFile base = kiln::overrides_from_flags("w4a8", 64, false, true).value();
  run(text, base);
  return 0;
}
