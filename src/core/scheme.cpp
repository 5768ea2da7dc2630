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

}  // namespace kiln
