#include "engine/defaults.h"

#include <map>
#include <random>

namespace kiln {

Result<OverridesFile> source_scheme(std::string_view scheme, int group_size) {
  return overrides_from_flags(scheme, group_size, /*symmetric=*/true, /*auto_fallback=*/true);
}

namespace {

bool is_matmul_weight(const TensorSource& t) { return t.shape.size() == 2; }

QuantParams natural_params(DType d) {
  QuantParams p;
  switch (d) {
    case DType::kF32: p.scheme = Scheme::kF32; break;
    case DType::kF16: p.scheme = Scheme::kF16; break;
    case DType::kBF16: p.scheme = Scheme::kBF16; break;
    case DType::kQ4_0:
    case DType::kQ4_1:
      p.scheme = Scheme::kW4A16;
      p.group_size = 32;
      p.symmetric = d == DType::kQ4_0;
      break;
    case DType::kQ4_K:  // its own super-blocks, as they are (layout/weight_layout.h)
      p.scheme = Scheme::kW4A16;
      p.group_size = 256;
      p.symmetric = false;
      break;
    case DType::kQ6_K: p.scheme = Scheme::kW6A16; break;
    case DType::kQ5_K: p.scheme = Scheme::kW5A16; break;
    case DType::kIQ4_XS:  // its own super-blocks of levels, as they are
      p.scheme = Scheme::kW4A16;
      p.group_size = 256;
      p.symmetric = true;
      break;
    case DType::kQ5_0:  // its own blocks of 32, as they are
    case DType::kQ5_1:
      p.scheme = Scheme::kW5A16;
      p.w5_group = 32;
      p.symmetric = d == DType::kQ5_0;
      break;
    case DType::kQ8_0:
    case DType::kIQ4_NL:  // an int8 value (IQ4_NL: a level) and an f16 scale per 32: exactly w8a16 g32
      p.scheme = Scheme::kW8A16;
      p.w8_group = 32;
      break;
    default: p.scheme = Scheme::kW8A16; break;
  }
  return canonical(p);
}

}  // namespace

bool has_quantized_weights(const ImportedModel& m) {
  for (const auto& [name, t] : m.tensors)
    if (is_matmul_weight(t) && t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) return true;
  return false;
}

OverridesFile source_precision(const ImportedModel& m) {
  std::map<std::string, QuantParams> by_name;
  std::map<std::string, int> votes;  // describe(params) -> matmul weights stored so
  std::map<std::string, QuantParams> params_of;
  for (const auto& [name, t] : m.tensors) {
    if (!is_matmul_weight(t)) continue;
    const QuantParams p = natural_params(t.dtype);
    by_name[name] = p;
    votes[describe(p)]++;
    params_of[describe(p)] = p;
  }
  OverridesFile f;
  f.auto_fallback = true;
  f.defaults = natural_params(DType::kF32);
  int best = 0;
  for (const auto& [d, n] : votes)
    if (n > best) best = n, f.defaults = params_of[d];
  // The others, each by its exact name (after the default; the last matching rule wins).
  for (const auto& [name, p] : by_name) {
    if (p == f.defaults) continue;
    Rule r;
    r.match = name;
    r.params = p;
    r.text = "{\"match\": \"" + name + "\"} (stored as " + describe(p) + " in " + m.path + ")";
    f.rules.push_back(std::move(r));
  }
  return f;
}

uint64_t resolve_seed(std::optional<uint64_t> given) {
  if (given) return *given;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace kiln
