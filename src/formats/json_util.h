// Checked access to nlohmann::json values: a wrong type is an error naming the key, never a throw.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

using Json = nlohmann::json;

// Parses without exceptions; the error names the file and says whether the bytes were UTF-8.
Result<Json> parse_json(std::string_view text, const std::string& file);
// Bytes (a file section) as the text parse_json reads.
inline std::string_view as_text(std::span<const uint8_t> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// Optional fields: absent or null gives `fallback`; a present value of the wrong type is an error.
Result<int64_t> json_int(const Json& obj, const std::string& key, int64_t fallback, const std::string& where);
Result<double> json_number(const Json& obj, const std::string& key, double fallback, const std::string& where);
Result<bool> json_bool(const Json& obj, const std::string& key, bool fallback, const std::string& where);
Result<std::string> json_string(const Json& obj, const std::string& key, const std::string& fallback,
                                const std::string& where);
// An int field that must fit in int (for model dimensions).
// An array of integers, each in [lo, hi], appended to `out`.
Status json_int_array(const Json& obj, const char* key, int64_t lo, int64_t hi, std::vector<int64_t>& out,
                      const std::string& where);
Result<int> json_dim(const Json& obj, const std::string& key, int fallback, const std::string& where);

}  // namespace kiln
