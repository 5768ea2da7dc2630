#include "tools/synth/synth_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_set>

namespace kiln {

namespace fs = std::filesystem;

namespace {

SynthPreset llama(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, int vocab,
                  int max_pos, bool tied) {
  SynthPreset p;
  p.name = std::move(name);
  p.model = std::move(model);
  p.architecture = "LlamaForCausalLM";
  p.model_type = "llama";
  p.hidden_size = dim;
  p.intermediate_size = hidden;
  p.num_layers = layers;
  p.num_heads = heads;
  p.num_kv_heads = kv;
  p.vocab_size = vocab;
  p.max_position_embeddings = max_pos;
  p.tie_embeddings = tied;
  return p;
}

SynthPreset qwen2(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, int vocab) {
  SynthPreset p = llama(std::move(name), std::move(model), dim, hidden, layers, heads, kv, vocab, 32768, true);
  p.architecture = "Qwen2ForCausalLM";
  p.model_type = "qwen2";
  p.rms_norm_eps = 1e-6;
  p.rope_theta = 1e6;
  p.qkv_bias = true;
  return p;
}

// Qwen3: no qkv bias, per-head q/k norms, and a head_dim of its own (128 where hidden / heads is 64).
SynthPreset qwen3(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, int head_dim,
                  int vocab) {
  SynthPreset p = llama(std::move(name), std::move(model), dim, hidden, layers, heads, kv, vocab, 40960, true);
  p.architecture = "Qwen3ForCausalLM";
  p.model_type = "qwen3";
  p.rms_norm_eps = 1e-6;
  p.rope_theta = 1e6;
  p.qk_norm = true;
  p.explicit_head_dim = head_dim;
  return p;
}

// Phi-3 shapes: no biases, fused projections, a 4k context (the LongRoPE of the 128k variants is
// not written).
SynthPreset phi3(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, int vocab,
                 bool tied, double partial_rotary) {
  SynthPreset p = llama(std::move(name), std::move(model), dim, hidden, layers, heads, kv, vocab, 4096, tied);
  p.architecture = "Phi3ForCausalLM";
  p.model_type = "phi3";
  p.partial_rotary_factor = partial_rotary;
  return p;
}

SynthPreset gemma3(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, int head_dim,
                   int vocab, int window) {
  SynthPreset p = llama(std::move(name), std::move(model), dim, hidden, layers, heads, kv, vocab, 32768, true);
  p.architecture = "Gemma3ForCausalLM";
  p.model_type = "gemma3_text";
  p.rms_norm_eps = 1e-6;
  p.rope_theta = 1e6;
  p.qk_norm = true;
  p.explicit_head_dim = head_dim;
  p.sliding_window = window;
  p.sliding_pattern = 6;
  p.query_pre_attn_scalar = head_dim;
  return p;
}

SynthPreset smollm2(std::string name, std::string model, int dim, int hidden, int layers, int heads, int kv, double theta) {
  SynthPreset p = llama(std::move(name), std::move(model), dim, hidden, layers, heads, kv, 49152, 8192, true);
  p.rope_theta = theta;
  return p;
}

std::vector<SynthPreset> make_presets() {
  std::vector<SynthPreset> v;
  v.push_back(llama("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", 2048, 5632, 22, 32, 4, 32000, 2048, false));
  SynthPreset l3 = llama("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, 131072, true);
  l3.rope_theta = 500000.0;
  l3.llama3_factor = 32.0;
  l3.llama3_low_freq_factor = 1.0;
  l3.llama3_high_freq_factor = 4.0;
  l3.llama3_original_max_position = 8192;
  v.push_back(l3);
  v.push_back(smollm2("smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct", 576, 1536, 30, 9, 3, 100000.0));
  v.push_back(smollm2("smollm2-360m", "HuggingFaceTB/SmolLM2-360M-Instruct", 960, 2560, 32, 15, 5, 100000.0));
  v.push_back(smollm2("smollm2-1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct", 2048, 8192, 24, 32, 32, 130000.0));
  v.push_back(qwen2("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 151936));
  v.push_back(qwen2("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151936));
  v.push_back(qwen3("qwen3-0.6b", "Qwen/Qwen3-0.6B", 1024, 3072, 28, 16, 8, 128, 151936));
  v.push_back(qwen3("qwen3-1.7b", "Qwen/Qwen3-1.7B", 2048, 6144, 28, 16, 8, 128, 151936));
  v.push_back(phi3("phi-3-mini-4k", "microsoft/Phi-3-mini-4k-instruct", 3072, 8192, 32, 32, 32, 32064, false, 1.0));
  v.push_back(phi3("phi-4-mini", "microsoft/Phi-4-mini-instruct (4k context)", 3072, 8192, 32, 24, 8, 200064, true, 0.75));
  v.push_back(gemma3("gemma-3-1b", "google/gemma-3-1b-it", 1152, 6912, 26, 4, 1, 256, 262144, 512));
  v.push_back(llama("llama-2-7b", "meta-llama/Llama-2-7b-hf", 4096, 11008, 32, 32, 32, 32000, 4096, false));
  // Small enough for unit tests; the same code paths as the real shapes.
  v.push_back(llama("tiny-llama", "(kiln test shape)", 64, 192, 2, 8, 4, 512, 512, false));
  v.push_back(qwen2("tiny-qwen2", "(kiln test shape)", 64, 160, 2, 4, 2, 640));
  v.push_back(qwen3("tiny-qwen3", "(kiln test shape)", 64, 160, 2, 4, 2, 32, 640));
  v.push_back(phi3("tiny-phi3", "(kiln test shape)", 64, 160, 2, 4, 2, 640, true, 0.5));
  SynthPreset tg = gemma3("tiny-gemma3", "(kiln test shape)", 64, 160, 7, 4, 2, 32, 640, 4);
  tg.max_position_embeddings = 512;
  v.push_back(tg);
  return v;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// splitmix64: a tiny, fast generator with good 64-bit output; one stream per chunk.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr uint64_t kChunk = 1u << 20;  // elements per generator stream

int layer_count(const SynthPreset& p, int layers) { return layers > 0 ? layers : p.num_layers; }

}  // namespace

std::span<const SynthPreset> synth_presets() {
  static const std::vector<SynthPreset> presets = make_presets();
  return presets;
}

Result<SynthPreset> find_synth_preset(std::string_view name) {
  const std::string want = lower(name);
  std::string names;
  for (const SynthPreset& p : synth_presets()) {
    if (p.name == want) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return invalid_argument("unknown preset '" + std::string(name) + "' (" + names + ")");
}

uint64_t SynthTensor::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<SynthTensor> synth_tensors(const SynthPreset& p, int layers) {
  using K = SynthTensor::Kind;
  const int64_t dim = p.hidden_size, hidden = p.intermediate_size, hd = p.head_dim();
  const int64_t q = p.num_heads * hd, kv = p.num_kv_heads * hd, vocab = p.vocab_size;
  std::vector<SynthTensor> t;
  const bool phi3 = p.model_type == "phi3", gemma3 = p.model_type == "gemma3_text";
  t.push_back({"model.embed_tokens.weight", {vocab, dim}, K::kMatrix});
  for (int l = 0; l < layer_count(p, layers); ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    t.push_back({b + "input_layernorm.weight", {dim}, K::kNorm});
    if (phi3) {
      t.push_back({b + "self_attn.qkv_proj.weight", {q + 2 * kv, dim}, K::kMatrix});
    } else {
      t.push_back({b + "self_attn.q_proj.weight", {q, dim}, K::kMatrix});
      t.push_back({b + "self_attn.k_proj.weight", {kv, dim}, K::kMatrix});
      t.push_back({b + "self_attn.v_proj.weight", {kv, dim}, K::kMatrix});
    }
    if (p.qkv_bias) {
      t.push_back({b + "self_attn.q_proj.bias", {q}, K::kBias});
      t.push_back({b + "self_attn.k_proj.bias", {kv}, K::kBias});
      t.push_back({b + "self_attn.v_proj.bias", {kv}, K::kBias});
    }
    if (p.qk_norm) {
      t.push_back({b + "self_attn.q_norm.weight", {hd}, K::kNorm});
      t.push_back({b + "self_attn.k_norm.weight", {hd}, K::kNorm});
    }
    t.push_back({b + "self_attn.o_proj.weight", {dim, q}, K::kMatrix});
    t.push_back({b + "post_attention_layernorm.weight", {dim}, K::kNorm});
    if (gemma3) {
      t.push_back({b + "pre_feedforward_layernorm.weight", {dim}, K::kNorm});
      t.push_back({b + "post_feedforward_layernorm.weight", {dim}, K::kNorm});
    }
    if (phi3) {
      t.push_back({b + "mlp.gate_up_proj.weight", {2 * hidden, dim}, K::kMatrix});
    } else {
      t.push_back({b + "mlp.gate_proj.weight", {hidden, dim}, K::kMatrix});
      t.push_back({b + "mlp.up_proj.weight", {hidden, dim}, K::kMatrix});
    }
    t.push_back({b + "mlp.down_proj.weight", {dim, hidden}, K::kMatrix});
  }
  t.push_back({"model.norm.weight", {dim}, K::kNorm});
  if (!p.tie_embeddings) t.push_back({"lm_head.weight", {vocab, dim}, K::kMatrix});
  return t;
}

std::string synth_config_json(const SynthPreset& p, int layers, DType dtype, uint64_t seed) {
  using OJ = nlohmann::ordered_json;
  OJ j;
  j["architectures"] = OJ::array({p.architecture});
  j["model_type"] = p.model_type;
  j["hidden_size"] = p.hidden_size;
  j["intermediate_size"] = p.intermediate_size;
  j["num_hidden_layers"] = layer_count(p, layers);
  j["num_attention_heads"] = p.num_heads;
  j["num_key_value_heads"] = p.num_kv_heads;
  j["head_dim"] = p.head_dim();
  j["vocab_size"] = p.vocab_size;
  j["max_position_embeddings"] = p.max_position_embeddings;
  j["rms_norm_eps"] = p.rms_norm_eps;
  j["rope_theta"] = p.rope_theta;
  if (p.llama3_factor > 0) {
    j["rope_scaling"] = OJ{{"rope_type", "llama3"},
                           {"factor", p.llama3_factor},
                           {"low_freq_factor", p.llama3_low_freq_factor},
                           {"high_freq_factor", p.llama3_high_freq_factor},
                           {"original_max_position_embeddings", p.llama3_original_max_position}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = p.tie_embeddings;
  if (p.model_type == "phi3") {
    j["original_max_position_embeddings"] = p.max_position_embeddings;
    if (p.partial_rotary_factor < 1.0) j["partial_rotary_factor"] = p.partial_rotary_factor;
    j["sliding_window"] = nullptr;
  } else if (p.model_type == "gemma3_text") {
    // Transformers 4.x's keys, as the published config has them, and the layer types they imply.
    j.erase("hidden_act");
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["rope_local_base_freq"] = p.rope_local_theta;
    j["sliding_window"] = p.sliding_window;
    j["sliding_window_pattern"] = p.sliding_pattern;
    OJ types = OJ::array();
    for (int l = 0; l < layer_count(p, layers); ++l)
      types.push_back((l + 1) % p.sliding_pattern == 0 ? "full_attention" : "sliding_attention");
    j["layer_types"] = types;
    j["query_pre_attn_scalar"] = p.query_pre_attn_scalar;
    j["attn_logit_softcapping"] = nullptr;
    j["final_logit_softcapping"] = nullptr;
    j["attention_bias"] = false;
  } else if (p.model_type == "qwen2") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = p.max_position_embeddings;
    j["max_window_layers"] = layer_count(p, layers);
  } else if (p.model_type == "qwen3") {
    j["attention_bias"] = false;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = layer_count(p, layers);
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  j["attention_dropout"] = 0.0;
  // The ids of the synthetic tokenizer, not of the published model's.
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  j["initializer_range"] = 0.02;
  j["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float16";
  j["use_cache"] = true;
  j["kiln_synth"] = OJ{{"preset", p.name}, {"copies", p.model}, {"seed", seed}, {"weights", "random"}};
  return j.dump(2) + "\n";
}

Result<std::string> synth_tokenizer_json(int vocab_size) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.emplace_back(buf);
  }
  const std::string space = "\xE2\x96\x81";  // ▁
  const size_t first_text = pieces.size();
  pieces.push_back(space);
  for (char c = 'a'; c <= 'z'; ++c) pieces.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) pieces.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) pieces.emplace_back(1, c);
  for (const char* c = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"; *c; ++c) pieces.emplace_back(1, *c);
  if (vocab_size < 512 || static_cast<size_t>(vocab_size) < pieces.size())
    return invalid_argument("a synthetic tokenizer needs a vocabulary of at least 512, not " + std::to_string(vocab_size));

  // Merged pieces: a left piece (half the time one that starts a word) and a short right piece
  // without "▁", joined when the result is new. Picks favour early (short) pieces, as real BPE
  // vocabularies complete their short pieces first. A fixed generator: the same vocabulary
  // every time.
  std::unordered_set<std::string> known(pieces.begin(), pieces.end());
  std::vector<size_t> left, word_left, right;
  for (size_t i = first_text; i < pieces.size(); ++i) {
    left.push_back(i);
    if (pieces[i] == space) word_left.push_back(i);
    else right.push_back(i);
  }
  auto early = [](const std::vector<size_t>& v, uint32_t bits, int power) {
    double u = static_cast<double>(bits) / 4294967296.0;
    double x = u;
    for (int k = 1; k < power; ++k) x *= u;
    return v[std::min(v.size() - 1, static_cast<size_t>(x * static_cast<double>(v.size())))];
  };
  std::vector<std::pair<size_t, size_t>> merges;
  SplitMix rng{0x6b696c6e2d746f6bull};
  while (pieces.size() < static_cast<size_t>(vocab_size)) {
    const uint64_t r = rng.next(), r2 = rng.next();
    const size_t a = early((r2 & 1) ? word_left : left, static_cast<uint32_t>(r), 3);
    const size_t b = early(right, static_cast<uint32_t>(r >> 32), 2);
    if (pieces[a].size() >= 16) continue;
    std::string joined = pieces[a] + pieces[b];
    if (!known.insert(joined).second) continue;
    const size_t id = pieces.size();
    const bool word = joined.compare(0, space.size(), space) == 0;
    pieces.push_back(std::move(joined));
    merges.emplace_back(a, b);
    left.push_back(id);
    if (word) word_left.push_back(id);
    if (!word && pieces[id].size() <= 3) right.push_back(id);
  }

  // Written by hand: a JSON library's ordered object is quadratic in 150k keys.
  auto q = [](const std::string& s) { return nlohmann::json(s).dump(); };
  std::string out;
  out.reserve(pieces.size() * 40);
  out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [\n";
  for (int i = 0; i < 3; ++i)
    out += "    {\"id\": " + std::to_string(i) + ", \"content\": " + q(pieces[static_cast<size_t>(i)]) +
           ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}" +
           (i < 2 ? ",\n" : "\n");
  out += "  ],\n";
  out +=
      "  \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"}, "
      "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}]},\n"
      "  \"pre_tokenizer\": null,\n"
      "  \"post_processor\": {\"type\": \"TemplateProcessing\", "
      "\"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
      "\"pair\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
      "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], "
      "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},\n"
      "  \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
      "\"\xE2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, "
      "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},\n";
  out +=
      "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": \"<unk>\",\n"
      "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": true,\n"
      "    \"byte_fallback\": true,\n    \"ignore_merges\": false,\n    \"vocab\": {\n";
  for (size_t i = 0; i < pieces.size(); ++i)
    out += "      " + q(pieces[i]) + ": " + std::to_string(i) + (i + 1 < pieces.size() ? ",\n" : "\n");
  out += "    },\n    \"merges\": [\n";
  for (size_t i = 0; i < merges.size(); ++i)
    out += "      [" + q(pieces[merges[i].first]) + ", " + q(pieces[merges[i].second]) + "]" +
           (i + 1 < merges.size() ? ",\n" : "\n");
  out += "    ]\n  }\n}\n";
  return out;
}

void synth_values(const SynthTensor& t, uint64_t seed, uint64_t first, std::span<float> out) {
  // Four 16-bit uniforms summed: mean 2, variance 4/12; scaled to standard deviation 0.02.
  constexpr float kScale = 0.02f * 1.7320508f / 65536.0f;
  const float base = t.kind == SynthTensor::Kind::kNorm ? 1.0f : 0.0f;
  const uint64_t name_hash = fnv1a(t.name);
  uint64_t i = first;
  size_t o = 0;
  while (o < out.size()) {
    const uint64_t chunk = i / kChunk;
    SplitMix rng{seed * 0x2545f4914f6cdd1dull ^ name_hash ^ (chunk * 0xd1b54a32d192ed03ull)};
    for (uint64_t skip = chunk * kChunk; skip < i; ++skip) rng.next();  // only when `first` is mid-chunk
    const uint64_t end = std::min<uint64_t>((chunk + 1) * kChunk, first + out.size());
    for (; i < end; ++i, ++o) {
      const uint64_t r = rng.next();
      const int64_t s = static_cast<int64_t>(r & 0xffff) + static_cast<int64_t>((r >> 16) & 0xffff) +
                        static_cast<int64_t>((r >> 32) & 0xffff) + static_cast<int64_t>(r >> 48) - 2 * 65535;
      out[o] = base + static_cast<float>(s) * kScale;
    }
  }
}

namespace {

// A file written with plain POSIX calls, so that errors carry errno and the data can be synced.
class OutFile {
 public:
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) return io_error(path + ": cannot create: " + std::strerror(errno));
    return Status::ok();
  }
  Status write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return io_error(path_ + ": write failed: " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::ok();
  }
  Status close() {
    if (::fsync(fd_) != 0) return io_error(path_ + ": fsync failed: " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return io_error(path_ + ": close failed: " + std::strerror(errno));
    return Status::ok();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

Status write_text(const std::string& path, const std::string& text) {
  OutFile f;
  KILN_RETURN_IF_ERROR(f.open(path));
  KILN_RETURN_IF_ERROR(f.write(text.data(), text.size()));
  return f.close();
}

struct Shard {
  std::string file;
  std::vector<size_t> tensors;
  uint64_t bytes = 0;
};

// The safetensors header of a shard; the data begins 64-byte aligned (padded with spaces).
std::string shard_header(const std::vector<SynthTensor>& all, const Shard& s, DType dtype) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t off = 0;
  const char* dt = dtype == DType::kBF16 ? "BF16" : "F16";
  for (size_t i : s.tensors) {
    const SynthTensor& t = all[i];
    const uint64_t n = t.elements() * 2;
    h += ",\"" + t.name + "\":{\"dtype\":\"" + dt + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) h += ',';
      h += std::to_string(t.shape[d]);
    }
    h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + n) + "]}";
    off += n;
  }
  h += "}";
  while ((8 + h.size()) % 64 != 0) h += ' ';
  return h;
}

Status write_shard(const std::string& path, const std::vector<SynthTensor>& all, const Shard& s, const SynthOptions& o,
                   uint64_t& done, uint64_t total) {
  OutFile f;
  KILN_RETURN_IF_ERROR(f.open(path));
  const std::string header = shard_header(all, s, o.dtype);
  const uint64_t len = header.size();
  KILN_RETURN_IF_ERROR(f.write(&len, 8));
  KILN_RETURN_IF_ERROR(f.write(header.data(), header.size()));
  std::vector<float> values(kChunk);
  std::vector<uint16_t> half(kChunk);
  const bool bf16 = o.dtype == DType::kBF16;
  for (size_t i : s.tensors) {
    const SynthTensor& t = all[i];
    const uint64_t n = t.elements();
    for (uint64_t first = 0; first < n; first += kChunk) {
      const size_t m = static_cast<size_t>(std::min<uint64_t>(kChunk, n - first));
      synth_values(t, o.seed, first, std::span<float>(values.data(), m));
      for (size_t k = 0; k < m; ++k) half[k] = bf16 ? f32_to_bf16(values[k]) : f32_to_f16(values[k]);
      KILN_RETURN_IF_ERROR(f.write(half.data(), m * 2));
      done += m * 2;
      if (o.progress) o.progress(static_cast<double>(done) / static_cast<double>(total));
    }
  }
  return f.close();
}

std::string pad5(size_t v) {
  std::string s = std::to_string(v);
  return std::string(s.size() < 5 ? 5 - s.size() : 0, '0') + s;
}

Status write_folder(const std::string& dir, const SynthPreset& p, const SynthOptions& o, SynthReport& r) {
  const std::vector<SynthTensor> tensors = synth_tensors(p, o.layers);
  // Shards in order, each up to shard_bytes (a tensor larger than that gets a shard of its own).
  std::vector<Shard> shards(1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensors[i].elements() * 2;
    if (!shards.back().tensors.empty() && shards.back().bytes + n > o.shard_bytes) shards.emplace_back();
    shards.back().tensors.push_back(i);
    shards.back().bytes += n;
    r.parameters += tensors[i].elements();
    r.weight_bytes += n;
  }
  if (shards.size() == 1) {
    shards[0].file = "model.safetensors";
  } else {
    for (size_t s = 0; s < shards.size(); ++s)
      shards[s].file = "model-" + pad5(s + 1) + "-of-" + pad5(shards.size()) + ".safetensors";
  }

  KILN_RETURN_IF_ERROR(write_text(dir + "/config.json", synth_config_json(p, o.layers, o.dtype, o.seed)));
  r.files.push_back("config.json");
  KILN_ASSIGN_OR_RETURN(std::string tok, synth_tokenizer_json(p.vocab_size));
  KILN_RETURN_IF_ERROR(write_text(dir + "/tokenizer.json", tok));
  r.files.push_back("tokenizer.json");
  const std::string tok_config = nlohmann::ordered_json{{"bos_token", "<s>"},
                                                        {"eos_token", "</s>"},
                                                        {"unk_token", "<unk>"},
                                                        {"add_bos_token", true},
                                                        {"add_eos_token", false},
                                                        {"model_max_length", p.max_position_embeddings},
                                                        {"tokenizer_class", "LlamaTokenizerFast"}}
                                     .dump(2) +
                                 "\n";
  KILN_RETURN_IF_ERROR(write_text(dir + "/tokenizer_config.json", tok_config));
  r.files.push_back("tokenizer_config.json");

  uint64_t done = 0;
  for (const Shard& s : shards) {
    KILN_RETURN_IF_ERROR(write_shard(dir + "/" + s.file, tensors, s, o, done, r.weight_bytes));
    r.files.push_back(s.file);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const Shard& s : shards)
      for (size_t i : s.tensors) map[tensors[i].name] = s.file;
    nlohmann::ordered_json index{{"metadata", {{"total_size", r.weight_bytes}}}, {"weight_map", map}};
    KILN_RETURN_IF_ERROR(write_text(dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
    r.files.push_back("model.safetensors.index.json");
  }
  return Status::ok();
}

}  // namespace

Result<SynthReport> write_synth_model(const SynthOptions& o) {
  KILN_ASSIGN_OR_RETURN(SynthPreset p, find_synth_preset(o.preset));
  if (o.layers < 0 || o.layers > p.num_layers)
    return invalid_argument("--layers " + std::to_string(o.layers) + ": " + p.name + " has " +
                            std::to_string(p.num_layers) + " layers (1.." + std::to_string(p.num_layers) + ")");
  if (o.dtype != DType::kF16 && o.dtype != DType::kBF16) return invalid_argument("synth writes f16 or bf16 weights");
  if (o.out_dir.empty()) return invalid_argument("no output folder");
  if (o.shard_bytes == 0) return invalid_argument("shard size must be positive");

  std::string out = o.out_dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  std::error_code ec;
  const bool exists = fs::exists(out, ec);
  if (exists && !o.force) return invalid_argument(out + ": already exists (pass --force to replace it)");
  if (exists && !fs::is_directory(out, ec)) return invalid_argument(out + ": exists and is not a folder");
  fs::path parent = fs::path(out).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) return not_found(parent.string() + ": no such folder");

  uint64_t need = 0;
  for (const SynthTensor& t : synth_tensors(p, o.layers)) need += t.elements() * 2;
  struct statvfs vfs {};
  if (::statvfs(parent.c_str(), &vfs) == 0) {
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (avail < need + (64u << 20))
      return io_error(parent.string() + ": " + std::to_string(need >> 20) + " MiB needed, " +
                      std::to_string(avail >> 20) + " MiB free");
  }

  std::string tmpl = out + ".tmp-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return io_error(tmpl + ": cannot create a temporary folder: " + std::strerror(errno));
  const std::string tmp = tmpl;
  ::chmod(tmp.c_str(), 0755);  // mkdtemp makes it 0700; the folder is for everyone to read
  SynthReport r;
  r.preset = p;
  r.preset.num_layers = layer_count(p, o.layers);
  Status st = write_folder(tmp, p, o, r);
  if (st.is_ok()) {
    std::string old;
    if (exists) {  // move the old folder aside, put the new one in place, then delete the old
      old = out + ".old-XXXXXX";
      if (::mkdtemp(old.data()) == nullptr || ::rename(out.c_str(), old.c_str()) != 0)
        st = io_error(out + ": cannot move the existing folder aside: " + std::strerror(errno));
    }
    if (st.is_ok() && ::rename(tmp.c_str(), out.c_str()) != 0) {
      st = io_error("cannot rename " + tmp + " to " + out + ": " + std::strerror(errno));
      if (!old.empty()) ::rename(old.c_str(), out.c_str());
    } else if (st.is_ok() && !old.empty()) {
      fs::remove_all(old, ec);
    }
  }
  if (!st.is_ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  return r;
}

}  // namespace kiln
