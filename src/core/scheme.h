// A weight's storage scheme as a value (the graph's weights carry one; quant/scheme.h has the
// layouts and arithmetic), parsed from its name once, where a file or a flag is read.
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

}  // namespace kiln
