// Random-weight Hugging Face folders in the exact shapes of published models, so that anyone can
// benchmark without downloads (`kiln synth`). Formats only: this writes files, it knows no math.
//
// A folder holds config.json, tokenizer.json (a SentencePiece-style BPE with byte fallback and
// exactly the preset's vocabulary size), tokenizer_config.json, and the weights as F16 or BF16
// safetensors: model.safetensors, or model-0000K-of-0000N.safetensors shards of at most
// `shard_bytes` each with model.safetensors.index.json.
//
// The weights are deterministic from the seed: tensor t's values come from a generator seeded
// by (seed, t's name, chunk of 2^20 elements), so a copy with fewer layers has the same first
// layers, and the values do not depend on how they are written. Matrices and biases have mean 0
// and standard deviation 0.02 (a sum of four uniforms: normal-ish, bounded by +-0.07); norm
// weights are 1 +- that. The tokenizer depends only on the vocabulary size.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

struct SynthPreset {
  std::string name;           // what --preset takes, e.g. "tinyllama-1.1b"
  std::string model;          // the published model it copies, e.g. "TinyLlama/TinyLlama-1.1B-..."
  std::string architecture;   // "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", ...
  std::string model_type;     // "llama", "qwen2", "qwen3", "phi3", "gemma3_text"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  bool tie_embeddings = false;
  bool qkv_bias = false;
  bool qk_norm = false;        // Qwen3: per-head q_norm and k_norm weights
  int explicit_head_dim = 0;   // written as head_dim; 0: hidden_size / num_heads
  // llama3 rope_scaling when factor > 0.
  double llama3_factor = 0;
  double llama3_low_freq_factor = 1;
  double llama3_high_freq_factor = 4;
  int llama3_original_max_position = 8192;
  // Phi-3 (model_type "phi3"): fused qkv_proj and gate_up_proj; RoPE over this part of each head.
  double partial_rotary_factor = 1.0;
  // Gemma 3 ("gemma3_text"): every sliding_pattern-th layer attends globally, the others through
  // the window with their own RoPE base; queries scaled by query_pre_attn_scalar^-1/2.
  int sliding_window = 0;
  int sliding_pattern = 0;
  double rope_local_theta = 10000.0;
  double query_pre_attn_scalar = 0;

  int head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_heads; }
};

// The published shapes (tinyllama-1.1b, llama-3.2-1b, smollm2-135m/360m/1.7b, qwen2.5-0.5b,
// qwen2.5-1.5b, qwen3-0.6b, qwen3-1.7b, phi-3-mini-4k, phi-4-mini, gemma-3-1b, llama-2-7b) and tiny
// ones for tests (tiny-llama, tiny-qwen2, tiny-qwen3, tiny-phi3, tiny-gemma3).
std::span<const SynthPreset> synth_presets();
// By name, ignoring case; the error lists the presets.
Result<SynthPreset> find_synth_preset(std::string_view name);

struct SynthTensor {
  std::string name;  // Hugging Face name, e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<int64_t> shape;
  enum class Kind { kMatrix, kNorm, kBias } kind = Kind::kMatrix;
  uint64_t elements() const;
};

// The tensors of `p` with `layers` layers (0: the preset's), in the order they are written.
std::vector<SynthTensor> synth_tensors(const SynthPreset& p, int layers);

// config.json for `p` with `layers` layers (0: the preset's); dtype F16 or BF16.
std::string synth_config_json(const SynthPreset& p, int layers, DType dtype, uint64_t seed);
// A SentencePiece-style BPE tokenizer.json of exactly vocab_size entries: <unk> <s> </s>, the
// byte pieces <0x00>..<0xFF>, the characters "▁", ASCII letters, digits and punctuation, then
// merged pieces, each with its merge (both halves earlier in the vocabulary). Needs at least
// 512 entries.
Result<std::string> synth_tokenizer_json(int vocab_size);

// Fills `out` with the values of elements [first, first + out.size()) of tensor `t`.
void synth_values(const SynthTensor& t, uint64_t seed, uint64_t first, std::span<float> out);

struct SynthOptions {
  std::string preset;
  std::string out_dir;
  int layers = 0;  // 0: the preset's
  DType dtype = DType::kF16;
  uint64_t seed = 0;
  bool force = false;  // replace an existing out_dir
  uint64_t shard_bytes = 2'000'000'000;
  std::function<void(double)> progress;  // 0..1 as the weights are written
};

struct SynthReport {
  SynthPreset preset;  // with the layer count written
  uint64_t parameters = 0;
  uint64_t weight_bytes = 0;
  std::vector<std::string> files;  // relative to out_dir
};

// Writes the folder under a temporary name beside out_dir and renames it into place: out_dir is
// either absent, the old folder (with force), or complete. The weights are streamed to disk in
// chunks; memory use does not grow with the model.
Result<SynthReport> write_synth_model(const SynthOptions& options);

}  // namespace kiln
