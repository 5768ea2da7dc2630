#include "formats/json_util.h"

#include <climits>

#include "core/byte_reader.h"
#include "core/utf8.h"

namespace kiln {

Result<Json> parse_json(std::string_view text, const std::string& file) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (!is_valid_utf8(text)) return corrupt(file + ": not valid UTF-8 (JSON must be UTF-8)");
    return corrupt(file + ": malformed JSON");
  }
  return j;
}

namespace {
Status type_error(const std::string& where, const std::string& key, const char* want) {
  return corrupt(where + ": '" + key + "' must be " + want);
}
const Json* field(const Json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

Result<int64_t> json_int(const Json& obj, const std::string& key, int64_t fallback, const std::string& where) {
  const Json* v = field(obj, key);
  if (v == nullptr) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_unsigned()) {
    auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return type_error(where, key, "an integer in range");
    return static_cast<int64_t>(u);
  }
  return type_error(where, key, "an integer");
}

Result<double> json_number(const Json& obj, const std::string& key, double fallback, const std::string& where) {
  const Json* v = field(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) return type_error(where, key, "a number");
  return v->get<double>();
}

Result<bool> json_bool(const Json& obj, const std::string& key, bool fallback, const std::string& where) {
  const Json* v = field(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return type_error(where, key, "true or false");
  return v->get<bool>();
}

Result<std::string> json_string(const Json& obj, const std::string& key, const std::string& fallback,
                                const std::string& where) {
  const Json* v = field(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return type_error(where, key, "a string");
  return v->get<std::string>();
}

Result<int> json_dim(const Json& obj, const std::string& key, int fallback, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(int64_t v, json_int(obj, key, fallback, where));
  if (v < INT_MIN || v > INT_MAX) return corrupt(where + ": '" + key + "' is out of range: " + std::to_string(v));
  return static_cast<int>(v);
}

Status json_int_array(const Json& j, const char* key, int64_t lo, int64_t hi, std::vector<int64_t>& out,
                      const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return corrupt(where + ": '" + key + "' must be an array");
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return corrupt(where + ": '" + key + "' has an entry outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v.get<int64_t>());
  }
  return Status::ok();
}

}  // namespace kiln
