// A weight's storage scheme as a value (the graph's weights carry one), its names and its
// properties; parsed from its name once, where a file or a flag is read. The byte layouts of the
// schemes are layout/weight_layout.h's; how weights are rounded into them, quant/'s.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

// The numeric values are written into `.kiln` files: append new schemes, never renumber.
enum class Scheme : uint8_t { kF32, kF16, kBF16, kW8A16, kW4A16, kW8A8, kW4A8, kW6A16, kW5A16 };
inline constexpr int kSchemeCount = 9;

// "f32", "f16", "bf16", "w8a16", "w4a16", "w8a8", "w4a8", "w6a16", "w5a16".
std::string_view scheme_name(Scheme s);
std::optional<Scheme> parse_scheme(std::string_view name);  // exact, lower case
// "f32, f16, bf16, w8a16, w6a16, w5a16, w4a16, w8a8, w4a8", for error messages.
std::string_view scheme_names_list();

// 32 or 16 for the float schemes, 8, 6, 5 or 4 for the integer ones.
int weight_bits(Scheme s);
bool is_float_scheme(Scheme s);            // f32, f16, bf16
bool is_4bit(Scheme s);                    // w4a16, w4a8
// w4a16, w5a16 and w6a16: activations rounded to 16 bits per block of 32 at run time (backends/ref/ref_matmul.h).
bool a16_activations(Scheme s);
bool quantizes_activations(Scheme s);      // w8a8, w4a8: int8 activations per token at run time
// The 8-bit scheme with the same activation width: w4a16, w5a16, w6a16 -> w8a16, w4a8 -> w8a8; others unchanged.
Scheme widen_to_w8(Scheme s);

}  // namespace kiln
