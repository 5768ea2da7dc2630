#include "core/scheme.h"

namespace kiln {

namespace {

struct SchemeName {
  Scheme scheme;
  std::string_view name;
};
constexpr SchemeName kSchemeNames[] = {
    {Scheme::kF32, "f32"},     {Scheme::kF16, "f16"},     {Scheme::kBF16, "bf16"}, {Scheme::kW8A16, "w8a16"},
    {Scheme::kW4A16, "w4a16"}, {Scheme::kW8A8, "w8a8"}, {Scheme::kW4A8, "w4a8"},   {Scheme::kW6A16, "w6a16"},
    {Scheme::kW5A16, "w5a16"},
};

}  // namespace

std::string_view scheme_name(Scheme s) {
  for (const auto& e : kSchemeNames)
    if (e.scheme == s) return e.name;
  return "?";
}

std::optional<Scheme> parse_scheme(std::string_view name) {
  for (const auto& e : kSchemeNames)
    if (e.name == name) return e.scheme;
  return std::nullopt;
}

std::string_view scheme_names_list() { return "f32, f16, bf16, w8a16, w6a16, w5a16, w4a16, w8a8, w4a8"; }

int weight_bits(Scheme s) {
  switch (s) {
    case Scheme::kF32: return 32;
    case Scheme::kF16:
    case Scheme::kBF16: return 16;
    case Scheme::kW8A16:
    case Scheme::kW8A8: return 8;
    case Scheme::kW6A16: return 6;
    case Scheme::kW5A16: return 5;
    case Scheme::kW4A16:
    case Scheme::kW4A8: return 4;
  }
  return 0;
}

bool is_float_scheme(Scheme s) { return s == Scheme::kF32 || s == Scheme::kF16 || s == Scheme::kBF16; }
bool is_4bit(Scheme s) { return s == Scheme::kW4A16 || s == Scheme::kW4A8; }
bool a16_activations(Scheme s) { return s == Scheme::kW4A16 || s == Scheme::kW6A16 || s == Scheme::kW5A16; }
bool quantizes_activations(Scheme s) { return s == Scheme::kW8A8 || s == Scheme::kW4A8; }

Scheme widen_to_w8(Scheme s) {
  if (s == Scheme::kW4A16 || s == Scheme::kW6A16 || s == Scheme::kW5A16) return Scheme::kW8A16;
  if (s == Scheme::kW4A8) return Scheme::kW8A8;
  return s;
}

}  // namespace kiln
