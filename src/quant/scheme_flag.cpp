#include "quant/scheme_flag.h"

#include <cctype>
#include <optional>
#include <string>

namespace kiln {

namespace {

struct Alias {
  std::string_view name;
  Scheme scheme;
  int group;       // 0: the flag's --group
  int symmetric;   // -1: the flag's symmetry, else 0/1
};

constexpr Alias kAliases[] = {
    {"fp32", Scheme::kF32, 0, -1},      {"float32", Scheme::kF32, 0, -1}, {"float", Scheme::kF32, 0, -1},
    {"fp16", Scheme::kF16, 0, -1},      {"half", Scheme::kF16, 0, -1},    {"float16", Scheme::kF16, 0, -1},
    {"bfloat16", Scheme::kBF16, 0, -1}, {"q4_0", Scheme::kW4A16, 32, 1},  {"q4_1", Scheme::kW4A16, 32, 0},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<QuantParams> parse_grouped_w8(std::string_view name) {
  const std::string n = lower(name);
  for (std::string_view prefix : {"w8a16 g", "w8a16g"}) {
    if (n.rfind(prefix, 0) != 0) continue;
    const std::string digits = n.substr(prefix.size());
    if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    QuantParams p{Scheme::kW8A16};
    p.w8_group = std::stoi(digits);
    return canonical(p);
  }
  return std::nullopt;
}

Result<QuantParams> parse_scheme_flag(std::string_view name, int group_size, bool symmetric) {
  const std::string n = lower(name);
  if (auto s = parse_scheme(n); s && *s != Scheme::kW5A16) return QuantParams{*s, group_size, symmetric};
  // q8_0 is GGML's block of 32 int8 with an f16 scale: w8a16 g32 byte for byte.
  if (n == "q8_0") return parse_scheme_flag("w8a16 g32", group_size, symmetric);
  // GGML's k-quant super-blocks, kept as they are: Q4_K is w4a16 g256 asymmetric, Q5_K is w5a16,
  // Q6_K is w6a16.
  if (n == "q6_k") return QuantParams{Scheme::kW6A16, 0, true};
  if (n == "q5_k") return QuantParams{Scheme::kW5A16, 0, true};
  // GGML's Q5_0 and Q5_1 blocks of 32: w5a16 in blocks of 32, symmetric and asymmetric.
  if (n == "q5_0" || n == "q5_1") {
    if (group_size != 32)  // 32: the flag's default, not a choice
      return invalid_argument("scheme '" + std::string(name) + "' is w5a16 in blocks of 32 (GGML's own); it has no groups of " +
                              std::to_string(group_size));
    QuantParams p{Scheme::kW5A16, 0, n == "q5_0"};
    p.w5_group = 32;
    return p;
  }
  // "w5a16" is Q5_K's super-blocks whatever the (default) --group.
  if (n == "w5a16") return QuantParams{Scheme::kW5A16, 0, true};
  if (n == "iq4_xs") return QuantParams{Scheme::kW4A16, 256, true};  // GGML's IQ4_XS: w4a16 g256 symmetric
  if (n == "q4_k") {
    if (group_size != 32 && group_size != 256)  // 32: the flag's default, not a choice
      return invalid_argument("scheme 'q4_k' is w4a16 in super-blocks of 256 (8 groups of 32 with 6-bit scales); "
                              "for groups of " + std::to_string(group_size) + " use -q w4a16 --group " + std::to_string(group_size));
    return QuantParams{Scheme::kW4A16, 256, false};
  }
  if (auto p = parse_grouped_w8(n)) {
    KILN_RETURN_IF_ERROR(validate_params(*p));
    return *p;
  }
  for (const Alias& a : kAliases) {
    if (a.name != n) continue;
    // The default --group is 32, so only a --group given against the alias lands here.
    if (a.group != 0 && group_size != a.group)
      return invalid_argument("scheme '" + std::string(name) + "' is w4a16 with groups of " + std::to_string(a.group) +
                              "; for groups of " + std::to_string(group_size) + " use -q w4a16 --group " +
                              std::to_string(group_size));
    return QuantParams{a.scheme, a.group != 0 ? a.group : group_size, a.symmetric < 0 ? symmetric : a.symmetric == 1};
  }
  if (n == "int8" || n == "int4") {
    const std::string w = n == "int8" ? "w8" : "w4";
    return invalid_argument("scheme '" + std::string(name) + "' does not say the activations' width: " + w +
                            "a16 keeps 16-bit activations (QNN's default), " + w + "a8 quantizes them to 8 bits too");
  }
  return invalid_argument("unknown scheme '" + std::string(name) + "' (known: " + std::string(scheme_names_list()) +
                          "; aliases: fp32, fp16, bfloat16, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, iq4_xs)");
}

}  // namespace kiln
