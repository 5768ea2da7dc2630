#include "formats/gguf.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "formats/folded_weights.h"
#include "formats/fused_projections.h"

namespace kiln {

namespace {

// Bounds on what one field may make kiln allocate, checked before allocating: a string stays
// under 2^31 bytes (no int conversion of a length can wrap, llama.cpp's CVE-2025-49847), an array
// holds at most 2^24 elements (the largest vocabularies' merges are under 2^20), widened to 8 bytes
// or a std::string each.
constexpr uint64_t kMaxStringLen = 1u << 30;
constexpr uint64_t kMaxArrayElements = 1u << 24;

Result<std::string> read_string(ByteReader& r, const char* what) {
  KILN_ASSIGN_OR_RETURN(uint64_t len, r.read<uint64_t>(what));
  if (len > kMaxStringLen)
    return r.error(std::string(what) + " length " + std::to_string(len) + " is over the limit of " +
                   std::to_string(kMaxStringLen) + " bytes");
  if (len > r.remaining())
    return r.error(std::string(what) + " length " + std::to_string(len) + " runs past the end of the file (" +
                   std::to_string(r.remaining()) + " bytes left)");
  KILN_ASSIGN_OR_RETURN(auto b, r.read_bytes(len, what));
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// The smallest encoding of one element, so that an array count is checked before reserving.
uint64_t min_element_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

bool is_float_type(GgufType t) { return t == GgufType::kF32 || t == GgufType::kF64; }

// Reads one integer or float scalar of type t, widened.
Status read_number(ByteReader& r, GgufType t, int64_t* i, double* f) {
  auto get = [&](auto tag) -> Status {
    using T = decltype(tag);
    auto v = r.read<T>("metadata value");
    if (!v) return v.status();
    if constexpr (std::is_floating_point_v<T>) {
      *f = static_cast<double>(*v);
    } else {
      if constexpr (std::is_same_v<T, uint64_t>)
        if (*v > static_cast<uint64_t>(INT64_MAX)) return r.error("u64 metadata value is too large");
      *i = static_cast<int64_t>(*v);
    }
    return Status::ok();
  };
  switch (t) {
    case GgufType::kU8: return get(uint8_t{});
    case GgufType::kI8: return get(int8_t{});
    case GgufType::kU16: return get(uint16_t{});
    case GgufType::kI16: return get(int16_t{});
    case GgufType::kU32: return get(uint32_t{});
    case GgufType::kI32: return get(int32_t{});
    case GgufType::kU64: return get(uint64_t{});
    case GgufType::kI64: return get(int64_t{});
    case GgufType::kF32: return get(float{});
    case GgufType::kF64: return get(double{});
    case GgufType::kBool: {
      KILN_ASSIGN_OR_RETURN(uint8_t b, r.read<uint8_t>("bool"));
      if (b > 1) return r.error("bool value " + std::to_string(b) + " is not 0 or 1");
      *i = b;
      return Status::ok();
    }
    default: return r.error("not a scalar type");
  }
}

Result<GgufType> read_type(ByteReader& r, const char* what) {
  KILN_ASSIGN_OR_RETURN(uint32_t t, r.read<uint32_t>(what));
  if (t > static_cast<uint32_t>(GgufType::kF64)) return r.error("unknown metadata type " + std::to_string(t));
  return static_cast<GgufType>(t);
}

Result<GgufValue> read_value(ByteReader& r, GgufType t) {
  GgufValue out;
  out.type = t;
  if (t == GgufType::kString) {
    KILN_ASSIGN_OR_RETURN(std::string s, read_string(r, "string value"));
    out.v = std::move(s);
    return out;
  }
  if (t != GgufType::kArray) {
    int64_t i = 0;
    double f = 0;
    KILN_RETURN_IF_ERROR(read_number(r, t, &i, &f));
    if (is_float_type(t)) out.v = f; else out.v = i;
    return out;
  }
  GgufArray a;
  KILN_ASSIGN_OR_RETURN(a.type, read_type(r, "array element type"));
  if (a.type == GgufType::kArray) return r.error("nested arrays are not supported");
  KILN_ASSIGN_OR_RETURN(uint64_t n, r.read<uint64_t>("array length"));
  const bool past_end = n > r.remaining() / min_element_bytes(a.type);
  const std::string left = "runs past the end of the file (" + std::to_string(r.remaining()) + " bytes left)";
  if (n > kMaxArrayElements)
    return r.error("array of " + std::to_string(n) + " elements is over the limit of " +
                   std::to_string(kMaxArrayElements) + " elements" + (past_end ? " and " + left : ""));
  if (past_end) return r.error("array of " + std::to_string(n) + " elements " + left);
  if (a.type == GgufType::kString) {
    a.strings.reserve(n);
    for (uint64_t k = 0; k < n; ++k) {
      KILN_ASSIGN_OR_RETURN(std::string s, read_string(r, "array string"));
      a.strings.push_back(std::move(s));
    }
  } else if (is_float_type(a.type)) {
    a.floats.resize(n);
    int64_t dummy = 0;
    for (uint64_t k = 0; k < n; ++k) KILN_RETURN_IF_ERROR(read_number(r, a.type, &dummy, &a.floats[k]));
  } else {
    a.ints.resize(n);
    double dummy = 0;
    for (uint64_t k = 0; k < n; ++k) KILN_RETURN_IF_ERROR(read_number(r, a.type, &a.ints[k], &dummy));
  }
  out.v = std::move(a);
  return out;
}

std::optional<DType> ggml_type(uint32_t t) {
  switch (t) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 8: return DType::kQ8_0;
    case 12: return DType::kQ4_K;
    case 13: return DType::kQ5_K;
    case 14: return DType::kQ6_K;
    case 20: return DType::kIQ4_NL;
    case 23: return DType::kIQ4_XS;
    case 30: return DType::kBF16;
    default: return std::nullopt;
  }
}

}  // namespace

Result<GgufFile> read_gguf(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  ByteReader r(file->bytes(), path);
  KILN_ASSIGN_OR_RETURN(uint32_t magic, r.read<uint32_t>("magic"));
  if (magic != 0x46554747u) {
    char hex[11];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    return r.error_at(0, std::string("bad magic ") + hex + " (GGUF is 0x46554747, \"GGUF\"), not a GGUF file");
  }
  GgufFile g;
  KILN_ASSIGN_OR_RETURN(g.version, r.read<uint32_t>("version"));
  if (g.version != 2 && g.version != 3)
    return unsupported(path + ": GGUF version " + std::to_string(g.version) + " is not supported (2 and 3 are)");
  KILN_ASSIGN_OR_RETURN(uint64_t n_tensors, r.read<uint64_t>("tensor count"));
  KILN_ASSIGN_OR_RETURN(uint64_t n_kv, r.read<uint64_t>("metadata count"));
  // Each key-value needs at least 12 bytes and each tensor info 24: check before looping.
  if (n_kv > r.remaining() / 12)
    return r.error("metadata count " + std::to_string(n_kv) + " exceeds the file (" + std::to_string(r.remaining()) +
                   " bytes left hold at most " + std::to_string(r.remaining() / 12) + " key-values of 12 bytes)");
  if (n_tensors > r.remaining() / 24)
    return r.error("tensor count " + std::to_string(n_tensors) + " exceeds the file (" + std::to_string(r.remaining()) +
                   " bytes left hold at most " + std::to_string(r.remaining() / 24) + " tensor infos of 24 bytes)");

  for (uint64_t k = 0; k < n_kv; ++k) {
    KILN_ASSIGN_OR_RETURN(std::string key, read_string(r, "metadata key"));
    if (!is_valid_utf8(key)) return r.error("metadata key is not valid UTF-8");
    KILN_ASSIGN_OR_RETURN(GgufType t, read_type(r, "metadata type"));
    auto v = read_value(r, t);
    if (!v) return v.status().with_context("key '" + key + "'");
    if (g.metadata.count(key)) return r.error("duplicate metadata key '" + key + "'");
    g.metadata.emplace(std::move(key), std::move(v).value());
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    const int64_t* ai = a->as_int();
    if (ai == nullptr) return corrupt(path + ": general.alignment must be an integer");
    if (*ai <= 0 || *ai > (1 << 20) || (*ai & (*ai - 1)) != 0)
      return corrupt(path + ": general.alignment " + std::to_string(*ai) + " must be a power of two up to 1 MiB (1048576)");
    g.alignment = static_cast<uint64_t>(*ai);
  }

  struct Info {
    TensorSource t;
    uint64_t offset;
    uint64_t nbytes;
  };
  std::vector<Info> infos;
  infos.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    Info info;
    KILN_ASSIGN_OR_RETURN(info.t.name, read_string(r, "tensor name"));
    const std::string where = "tensor '" + info.t.name + "'";
    if (!is_valid_utf8(info.t.name)) return r.error("tensor name is not valid UTF-8");
    KILN_ASSIGN_OR_RETURN(uint32_t n_dims, r.read<uint32_t>("tensor dimension count"));
    if (n_dims == 0 || n_dims > 4) return r.error(where + ": " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    std::vector<int64_t> ne(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      KILN_ASSIGN_OR_RETURN(uint64_t v, r.read<uint64_t>("tensor dimension"));
      if (v > (1ull << 40)) return r.error(where + ": dimension " + std::to_string(v) + " is too large");
      ne[d] = static_cast<int64_t>(v);
    }
    info.t.shape.assign(ne.rbegin(), ne.rend());  // GGUF lists the fastest dimension first
    KILN_ASSIGN_OR_RETURN(uint32_t type, r.read<uint32_t>("tensor type"));
    auto dt = ggml_type(type);
    if (!dt)
      return unsupported(path + ": " + where + " has GGML type " + std::to_string(type) +
                         ", which kiln does not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
    info.t.dtype = *dt;
    KILN_ASSIGN_OR_RETURN(info.offset, r.read<uint64_t>("tensor offset"));
    auto n = shape_elements(info.t.shape);
    if (!n || (*n % dtype_info(*dt).block_elems == 0 && !dtype_bytes(*dt, *n)))
      return corrupt(path + ": " + where + ": shape " + shape_string(info.t.shape) +
                     " is too large: its size in bytes overflows 64 bits");
    auto bytes = dtype_bytes(*dt, *n);
    if (!bytes)
      return corrupt(path + ": " + where + ": shape " + shape_string(info.t.shape) + " is not a whole number of " +
                     std::string(dtype_name(*dt)) + " blocks");
    if (ne[0] % dtype_info(*dt).block_elems != 0)
      return corrupt(path + ": " + where + ": rows of " + std::to_string(ne[0]) + " are not whole " +
                     std::string(dtype_name(*dt)) + " blocks");
    info.nbytes = *bytes;
    info.t.file = path;
    infos.push_back(std::move(info));
  }
  const uint64_t data_start = (r.offset() + g.alignment - 1) / g.alignment * g.alignment;
  if (data_start > file->size() && !infos.empty()) return r.error("tensor data starts past the end of the file");
  const uint64_t data_size = file->size() > data_start ? file->size() - data_start : 0;
  for (Info& info : infos) {
    if (info.offset % g.alignment != 0)
      return corrupt(path + ": tensor '" + info.t.name + "': offset " + std::to_string(info.offset) +
                     " is not a multiple of the alignment " + std::to_string(g.alignment));
    if (info.offset > data_size || info.nbytes > data_size - info.offset)
      return corrupt(path + ": tensor '" + info.t.name + "': bytes [" + std::to_string(info.offset) + ", +" +
                     std::to_string(info.nbytes) + ") run past the end of the data (" + std::to_string(data_size) +
                     " bytes)");
    info.t.bytes = file->bytes().subspan(data_start + info.offset, info.nbytes);
    g.tensors.push_back(std::move(info.t));
  }
  std::vector<const TensorSource*> ptrs;
  for (const auto& t : g.tensors) ptrs.push_back(&t);
  KILN_RETURN_IF_ERROR(check_no_overlap(ptrs, path));
  g.file = std::move(file);
  return g;
}

namespace {

struct MetaReader {
  const GgufFile& g;
  const std::string& path;
  Result<int> dim(const std::string& key, std::optional<int> fallback) const {
    const GgufValue* v = g.find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return corrupt(path + ": missing metadata key '" + key + "'");
    }
    const int64_t* i = v->as_int();
    if (i == nullptr) return corrupt(path + ": metadata '" + key + "' must be an integer");
    if (*i < INT_MIN || *i > INT_MAX) return corrupt(path + ": metadata '" + key + "' is out of range");
    return static_cast<int>(*i);
  }
  Result<float> number(const std::string& key, float fallback) const {
    const GgufValue* v = g.find(key);
    if (v == nullptr) return fallback;
    if (const double* f = v->as_float()) return static_cast<float>(*f);
    if (const int64_t* i = v->as_int()) return static_cast<float>(*i);
    return corrupt(path + ": metadata '" + key + "' must be a number");
  }
};

}  // namespace

Result<ImportedModel> gguf_to_model(const GgufFile& g) {
  const std::string& path = g.file->path();
  const GgufValue* arch_v = g.find("general.architecture");
  if (arch_v == nullptr || arch_v->as_string() == nullptr)
    return corrupt(path + ": missing string metadata 'general.architecture'");
  const std::string arch = *arch_v->as_string();
  ModelConfig c;
  if (arch == "llama") {
    c.arch = Arch::kLlama;
    c.rope_style = RopeStyle::kAdjacentPairs;  // convert_hf_to_gguf un-permutes q/k for llama
  } else if (arch == "mistral") {
    c.arch = Arch::kMistral;
    c.rope_style = RopeStyle::kAdjacentPairs;
  } else if (arch == "qwen2") {
    c.arch = Arch::kQwen2;
    c.rope_style = RopeStyle::kHalfSplit;  // llama.cpp runs qwen2 with NEOX RoPE, q/k as in HF
    c.qkv_bias = true;
  } else if (arch == "qwen3") {
    c.arch = Arch::kQwen3;
    c.rope_style = RopeStyle::kHalfSplit;  // as qwen2: NEOX RoPE, q/k rows not permuted
    c.qk_norm = true;
  } else if (arch == "smollm3") {
    c.arch = Arch::kSmolLM3;
    c.rope_style = RopeStyle::kAdjacentPairs;  // converted as llama (q/k un-permuted)
  } else if (arch == "phi3") {
    c.arch = Arch::kPhi3;
    c.rope_style = RopeStyle::kHalfSplit;  // NEOX RoPE, q/k rows as in HF
  } else if (arch == "minicpm") {
    c.arch = Arch::kMiniCPM;
    c.rope_style = RopeStyle::kAdjacentPairs;  // the converter permutes q/k as for llama
  } else if (arch == "gemma2") {
    c.arch = Arch::kGemma2;
    c.rope_style = RopeStyle::kHalfSplit;  // NEOX RoPE, q/k rows as in HF
  } else if (arch == "gemma3") {
    c.arch = Arch::kGemma3;
    c.rope_style = RopeStyle::kHalfSplit;  // NEOX RoPE, q/k rows as in HF
    c.qk_norm = true;
  } else {
    return unsupported(path + ": architecture '" + arch +
                       "' is not supported (llama, mistral, qwen2, qwen3, smollm3, gemma2, gemma3, phi3, minicpm are)");
  }
  MetaReader m{g, path};
  const std::string a = arch + ".";
  KILN_ASSIGN_OR_RETURN(c.dim, m.dim(a + "embedding_length", std::nullopt));
  KILN_ASSIGN_OR_RETURN(c.hidden_dim, m.dim(a + "feed_forward_length", std::nullopt));
  KILN_ASSIGN_OR_RETURN(c.n_layers, m.dim(a + "block_count", std::nullopt));
  // Before the per-layer lists below are sized by it.
  if (c.n_layers < 1 || c.n_layers > kMaxLayers)
    return corrupt(path + ": " + a + "block_count is " + std::to_string(c.n_layers) + ", must be in [1, " +
                   std::to_string(kMaxLayers) + "]");
  KILN_ASSIGN_OR_RETURN(c.n_heads, m.dim(a + "attention.head_count", std::nullopt));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, m.dim(a + "attention.head_count_kv", c.n_heads));
  KILN_ASSIGN_OR_RETURN(c.head_dim, m.dim(a + "attention.key_length", c.n_heads > 0 ? c.dim / c.n_heads : 0));
  // One head size serves keys and values in kiln's attention.
  KILN_ASSIGN_OR_RETURN(int value_length, m.dim(a + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim)
    return unsupported(path + ": " + a + "attention.value_length " + std::to_string(value_length) +
                       " differs from key_length " + std::to_string(c.head_dim) + ", which kiln does not support");
  // RoPE over part of each head (Phi-4-mini's partial_rotary_factor: 96 of 128).
  KILN_ASSIGN_OR_RETURN(int rope_dims, m.dim(a + "rope.dimension_count", c.head_dim));
  if (rope_dims < 2 || rope_dims > c.head_dim || rope_dims % 2 != 0)
    return corrupt(path + ": " + a + "rope.dimension_count " + std::to_string(rope_dims) +
                   " must be even, at least 2 and at most the head size " + std::to_string(c.head_dim));
  if (rope_dims < c.head_dim) c.rotary_dim = rope_dims;
  KILN_ASSIGN_OR_RETURN(c.max_seq_len, m.dim(a + "context_length", 2048));
  KILN_ASSIGN_OR_RETURN(c.rms_eps, m.number(a + "attention.layer_norm_rms_epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(c.rope_theta, m.number(a + "rope.freq_base", 10000.0f));
  KILN_ASSIGN_OR_RETURN(c.sliding_window, m.dim(a + "attention.sliding_window", 0));
  if (c.arch == Arch::kSmolLM3) {
    // llama.cpp's smollm3 has no key for it: every 4th layer (1-based) is NoPE.
    for (int l = 0; l < c.n_layers; ++l) c.rope_layers.push_back((l + 1) % 4 != 0 ? 1 : 0);
  }
  if (c.arch == Arch::kGemma3) {
    // What llama.cpp assumes of a gemma3 file, which has no keys for it: every 6th layer (1-based)
    // global, the others through the window with RoPE base 10000 unscaled; the norms' 1 already
    // folded in by the converter; queries scaled by head_dim^-0.5, but by (dim / heads)^-0.5 in
    // the 27B (62 layers).
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0 ? 1 : 0);
    c.rope_theta_local = 10000.0f;
    c.query_pre_attn_scalar = static_cast<float>(c.n_layers == 62 && c.n_heads > 0 ? c.dim / c.n_heads : c.head_dim);
  }
  if (c.arch == Arch::kGemma2) {
    // As llama.cpp reads a gemma2 file: the even layers through the window, the odd ones global;
    // the window and soft-caps from its keys (llama.cpp's defaults where absent); queries scaled by
    // head_dim^-0.5, but by (dim / heads)^-0.5 in the 27B (46 layers).
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back(l % 2 == 0 ? 1 : 0);
    KILN_ASSIGN_OR_RETURN(c.sliding_window, m.dim(a + "attention.sliding_window", 4096));
    KILN_ASSIGN_OR_RETURN(c.attn_softcap, m.number(a + "attn_logit_softcapping", 50.0f));
    KILN_ASSIGN_OR_RETURN(c.final_softcap, m.number(a + "final_logit_softcapping", 30.0f));
    c.query_pre_attn_scalar = static_cast<float>(c.n_layers == 46 && c.n_heads > 0 ? c.dim / c.n_heads : c.head_dim);
  }
  if (c.arch == Arch::kMiniCPM) {
    // The converter's keys; where absent, MiniCPM's published values (scale_emb 12, scale_depth 1.4,
    // dim_model_base 256). logit_scale is hidden_size / dim_model_base, which the logits' input is
    // divided by.
    KILN_ASSIGN_OR_RETURN(c.embed_scale, m.number(a + "embedding_scale", 12.0f));
    KILN_ASSIGN_OR_RETURN(c.residual_scale, m.number(a + "residual_scale", c.n_layers > 0 ? 1.4f / std::sqrt(float(c.n_layers)) : 1.0f));
    KILN_ASSIGN_OR_RETURN(float divisor, m.number(a + "logit_scale", c.dim / 256.0f));
    if (!(divisor > 0.0f && divisor < 1e30f)) return corrupt(path + ": " + a + "logit_scale must be a positive number");
    c.logit_scale = 1.0f / divisor;
  }
  if (const GgufValue* st = g.find(a + "rope.scaling.type"); st && st->as_string()) {
    const std::string& type = *st->as_string();
    if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      KILN_ASSIGN_OR_RETURN(c.rope_scaling.factor, m.number(a + "rope.scaling.factor", 1.0f));
    } else if (type != "none") {
      return unsupported(path + ": rope scaling type '" + type + "' is not supported (none, linear are)");
    }
  }
  if (const GgufValue* vs = g.find(a + "vocab_size")) {
    KILN_ASSIGN_OR_RETURN(c.vocab_size, m.dim(a + "vocab_size", 0));
    (void)vs;
  }

  ImportedModel out;
  out.format = "gguf";
  out.path = path;
  for (const TensorSource& t : g.tensors) out.tensors[t.name] = t;
  if (c.vocab_size == 0) {
    auto it = out.tensors.find("token_embd.weight");
    if (it == out.tensors.end() || it->second.shape.size() != 2)
      return corrupt(path + ": missing tensor 'token_embd.weight'");
    if (it->second.shape[0] > INT_MAX) return corrupt(path + ": token_embd.weight is too large");
    c.vocab_size = static_cast<int>(it->second.shape[0]);
  }
  c.tie_embeddings = out.tensors.count("output.weight") == 0;
  KILN_ASSIGN_OR_RETURN(int bos, m.dim("tokenizer.ggml.bos_token_id", -1));
  KILN_ASSIGN_OR_RETURN(int eos, m.dim("tokenizer.ggml.eos_token_id", -1));
  c.bos_id = bos;
  c.eos_id = eos;
  if (eos >= 0) c.stop_ids.push_back(eos);
  if (const GgufValue* eot = g.find("tokenizer.ggml.eot_token_id"); eot && eot->as_int() && *eot->as_int() != eos) {
    KILN_ASSIGN_OR_RETURN(int e, m.dim("tokenizer.ggml.eot_token_id", -1));
    c.stop_ids.push_back(e);
  }
  if (c.arch == Arch::kPhi3 && out.tensors.count("rope_factors_short.weight")) {
    // LongRoPE as llama.cpp's converter stores it: the factors as tensors, the attention factor and
    // the original context as keys (model_config.h: past it a session turns by the long factors).
    RopeScaling& r = c.rope_scaling;
    r.type = RopeScaling::Type::kLongRope;
    for (auto [name, list] : {std::pair{"rope_factors_short.weight", &r.short_factor},
                              std::pair{"rope_factors_long.weight", &r.long_factor}}) {
      auto it = out.tensors.find(name);
      if (it == out.tensors.end() || it->second.dtype != DType::kF32 ||
          it->second.shape != std::vector<int64_t>{c.rope_dim() / 2})
        return corrupt(path + ": " + name + " must be F32 [" + std::to_string(c.rope_dim() / 2) + "]");
      list->resize(static_cast<size_t>(c.rope_dim() / 2));
      std::memcpy(list->data(), it->second.bytes.data(), list->size() * sizeof(float));
    }
    KILN_ASSIGN_OR_RETURN(r.original_max_position, m.dim(a + "rope.scaling.original_context_length", c.max_seq_len));
    if (r.original_max_position <= 0) return corrupt(path + ": " + a + "rope.scaling.original_context_length must be positive");
    r.factor = static_cast<float>(c.max_seq_len) / static_cast<float>(r.original_max_position);
    KILN_ASSIGN_OR_RETURN(r.attention_factor, m.number(a + "rope.scaling.attn_factor",
                                                       longrope_attention_factor(r.factor, r.original_max_position)));
  }
  KILN_RETURN_IF_ERROR(validate_config(c, path));
  out.config = c;
  // llama.cpp stores the llama3 rope frequency factors as a tensor; the runtime applies it.
  if (auto rf = out.tensors.find("rope_freqs.weight"); rf != out.tensors.end()) {
    if (rf->second.shape != std::vector<int64_t>{c.rope_dim() / 2} || rf->second.dtype != DType::kF32)
      return corrupt(path + ": rope_freqs.weight must be F32 [" + std::to_string(c.rope_dim() / 2) + "]");
  }
  out.files.push_back(g.file);
  if (c.arch == Arch::kPhi3) {
    // llama.cpp's phi3: q, k, v fused in attn_qkv; gate and up in ffn_up (gate rows first).
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      auto up = out.tensors.find(p + "ffn_up.weight");
      if (up == out.tensors.end()) return corrupt(path + ": missing tensor '" + p + "ffn_up.weight'");
      TensorSource fused = up->second;
      out.tensors.erase(up);
      out.tensors[p + "ffn_gate_up.weight"] = std::move(fused);
    }
    KILN_RETURN_IF_ERROR(split_fused_projections(out, "attn_qkv.weight", "ffn_gate_up.weight"));
  }
  KILN_RETURN_IF_ERROR(check_model_tensors(out));
  if (c.arch == Arch::kMiniCPM) KILN_RETURN_IF_ERROR(fold_minicpm_scales(out));
  return out;
}

}  // namespace kiln
