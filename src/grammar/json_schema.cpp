#include "grammar/json_schema.h"

#include <algorithm>
#include <climits>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "grammar/grammar.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json;

// The shared rules a converted schema may use, and what each uses in turn (llama.cpp's
// json.gbnf conventions: `space` after every value, at most one newline and 20 blanks).
struct BaseRule {
  const char* body;
  std::vector<const char*> uses;
};
const std::map<std::string, BaseRule>& base_rules() {
  static const std::map<std::string, BaseRule> rules = {
      {"space", {R"(| " " | "\n" [ \t]{0,20})", {}}},
      {"char", {R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}}},
      {"string", {R"("\"" char* "\"" space)", {"char", "space"}}},
      {"boolean", {R"(("true" | "false") space)", {"space"}}},
      {"null", {R"("null" space)", {"space"}}},
      {"integral-part", {R"([0] | [1-9] [0-9]{0,15})", {}}},
      {"decimal-part", {R"([0-9]{1,16})", {}}},
      {"integer", {R"(("-"? integral-part) space)", {"integral-part", "space"}}},
      {"number", {R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)",
                  {"integral-part", "decimal-part", "space"}}},
      {"value", {"object | array | string | number | boolean | null",
                 {"object", "array", "string", "number", "boolean", "null"}}},
      {"object", {R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)",
                  {"string", "value", "space"}}},
      {"array", {R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}}},
      {"date", {R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}}},
      {"time", {R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))", {}}},
      {"date-time", {R"(date "T" time)", {"date", "time"}}},
      {"uuid", {R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}}},
      // A character of a JSON string as a pattern's '.' sees it: unescaped ones only.
      {"plain-char", {R"([^"\\\x7F\x00-\x1F])", {}}},
  };
  return rules;
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
  return a;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> k = {
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
      "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
      "anyOf", "oneOf", "$ref", "allOf", "prefixItems", "uniqueItems"};
  return k;
}

// A GBNF string literal of UTF-8 text.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Compact JSON text; invalid UTF-8 (which the parser already refuses) would become U+FFFD, never an exception.
std::string dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string to_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string repeat_suffix(int lo, std::optional<int> hi) {
  if (hi && *hi == lo) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + (hi ? std::to_string(*hi) : "") + "}";
}

// Decimal strings of one length n, lo <= hi: the n-digit strings between them.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (lo == hi) return literal(lo);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  auto cls = [](char a, char b) { return a == b ? literal(std::string(1, a)) : std::string("[") + a + "-" + b + "]"; };
  auto any = [](size_t k) { return k == 0 ? std::string() : " [0-9]" + repeat_suffix(static_cast<int>(k), static_cast<int>(k)); };
  if (lo_rest == std::string(n - 1, '0') && hi_rest == std::string(n - 1, '9')) return cls(lo[0], hi[0]) + any(n - 1);
  if (lo[0] == hi[0]) return literal(std::string(1, lo[0])) + " (" + same_length_range(lo_rest, hi_rest) + ")";
  std::string out = literal(std::string(1, lo[0])) + " (" + same_length_range(lo_rest, std::string(n - 1, '9')) + ")";
  if (hi[0] - lo[0] > 1) out += " | " + cls(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)) + any(n - 1);
  out += " | " + literal(std::string(1, hi[0])) + " (" + same_length_range(std::string(n - 1, '0'), hi_rest) + ")";
  return out;
}

int64_t pow10(size_t d) {
  int64_t p = 1;
  while (d--) p *= 10;
  return p;
}

// The decimal numbers without leading zeros in [a, b] (b none: unbounded, up to 16 digits).
std::string nonneg_range(int64_t a, std::optional<int64_t> b) {
  const size_t da = std::to_string(a).size();
  const int64_t top = b ? *b : pow10(da) - 1;
  std::vector<std::string> alts;
  for (size_t d = da; d <= std::to_string(top).size(); ++d) {
    const int64_t lo = d == da ? a : pow10(d - 1);
    const int64_t hi = std::min(top, pow10(d) - 1);
    if (lo <= hi) alts.push_back("(" + same_length_range(std::to_string(lo), std::to_string(hi)) + ")");
  }
  if (!b && da < 16) alts.push_back("[1-9] [0-9]" + repeat_suffix(static_cast<int>(da), 15));
  std::string out;
  for (const auto& a2 : alts) out += (out.empty() ? "" : " | ") + a2;
  return "(" + out + ")";
}

// The integers in [lo, hi], either side open when absent.
std::string int_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // the negative ones: -m with m in [max(1, -hi), -lo]
    const int64_t m_lo = hi && *hi < 0 ? -*hi : 1;
    alts.push_back("\"-\" " + nonneg_range(m_lo, lo ? std::optional<int64_t>(-*lo) : std::nullopt));
  }
  if (!hi || *hi >= 0) alts.push_back(nonneg_range(lo ? std::max<int64_t>(*lo, 0) : 0, hi));
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, const JsonSchemaLimits& limits) : root_(root), limits_(limits) {}

  Result<std::string> convert(const std::string& root_rule) {
    KILN_ASSIGN_OR_RETURN(std::string top, visit(root_, root_rule, "", 0));
    if (top != root_rule) rules_[root_rule] = top;
    std::string out = root_rule + " ::= " + rules_[root_rule] + "\n";
    for (const auto& [name, body] : rules_)
      if (name != root_rule) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  Status error(const std::string& path, const std::string& what) const {
    return invalid_argument("json schema: at " + (path.empty() ? std::string("the top") : path) + ": " + what);
  }

  // A base rule and the ones it uses.
  std::string use(const std::string& name) {
    if (rules_.count(name)) return name;
    const BaseRule& r = base_rules().at(name);
    rules_[name] = r.body;
    for (const char* u : r.uses) use(u);
    return name;
  }

  // A fresh rule named after `hint` (letters, digits and '-' kept).
  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (name.empty()) name = "r";
    std::string unique = name;
    for (int i = 1; rules_.count(unique) || base_rules().count(unique); ++i) unique = name + "-" + std::to_string(i);
    rules_[unique] = body;
    return unique;
  }

  Result<std::optional<int64_t>> integer_field(const Json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::optional<int64_t>();
    const Json& v = s[key];
    if (!v.is_number()) return error(path, std::string("'") + key + "' must be a number");
    const double d = v.get<double>();
    if (!(d <= 1e15 && d >= -1e15) || d != static_cast<double>(static_cast<int64_t>(d)))
      return error(path, std::string("'") + key + "' of " + v.dump() + ": bounds must be whole numbers within ±10^15");
    return std::optional<int64_t>(static_cast<int64_t>(d));
  }

  Result<std::optional<int>> count_field(const Json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::optional<int>();
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > limits_.max_count)
      return error(path, std::string("'") + key + "' must be a whole number from 0 to " + std::to_string(limits_.max_count));
    return std::optional<int>(static_cast<int>(v.get<int64_t>()));
  }

  Result<std::string> visit(const Json& s, const std::string& name, const std::string& path, int depth) {
    if (depth > limits_.max_depth)
      return error(path, "subschemas nest deeper than " + std::to_string(limits_.max_depth) + " — the limit");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return error(path, "the schema false allows no value");
      return use("value");
    }
    if (!s.is_object()) return error(path, "a schema must be an object or a boolean");
    size_t n_validating = 0;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (annotations().count(it.key())) continue;
      if (!supported().count(it.key())) return error(path, "'" + it.key() + "' is not supported");
      if (it.key() == "uniqueItems") {
        if (!it.value().is_boolean()) return error(path, "'uniqueItems' must be a boolean");
        // false asks nothing; true would need the grammar to remember every item it has seen.
        if (it.value().get<bool>()) return error(path, "'uniqueItems': true is not supported (a grammar cannot remember the items before)");
        continue;
      }
      ++n_validating;
    }
    // `allowed_beside` may sit next to `key` (a const's or enum's type says nothing more).
    auto alone = [&](const char* key, std::initializer_list<const char*> allowed_beside = {}) -> Status {
      size_t n = n_validating;
      for (const char* b : allowed_beside) n -= s.contains(b) ? 1 : 0;
      if (n > 1) return error(path, std::string("'") + key + "' beside other keywords is not supported");
      return Status::ok();
    };
    if (s.contains("$ref")) {
      KILN_RETURN_IF_ERROR(alone("$ref"));
      return visit_ref(s["$ref"], path, depth);
    }
    if (s.contains("allOf")) return visit_all_of(s, name, path, depth);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      KILN_RETURN_IF_ERROR(alone(key));
      const Json& list = s[key];
      if (!list.is_array() || list.empty()) return error(path, std::string("'") + key + "' must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < list.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(std::string alt, visit(list[i], name + "-" + std::to_string(i), path + "/" + key + "/" + std::to_string(i), depth + 1));
        body += (i ? " | " : "") + alt;
      }
      return add_rule(name, body);
    }
    if (s.contains("const")) {
      KILN_RETURN_IF_ERROR(alone("const", {"type", "enum"}));
      return add_rule(name, literal(dump(s["const"])) + " " + use("space"));
    }
    if (s.contains("enum")) {
      KILN_RETURN_IF_ERROR(alone("enum", {"type"}));
      const Json& list = s["enum"];
      if (!list.is_array() || list.empty()) return error(path, "'enum' must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < list.size(); ++i) body += (i ? " | " : "") + literal(dump(list[i]));
      return add_rule(name, "(" + body + ") " + use("space"));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return error(path, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return error(path, "'type' must be a string or an array of strings");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return use("value");
    }
    std::string body;
    for (const std::string& t : types) {
      KILN_ASSIGN_OR_RETURN(std::string alt, visit_type(s, t, name, path, depth));
      body += (body.empty() ? "" : " | ") + alt;
    }
    return types.size() == 1 ? body : add_rule(name, body);
  }

  // A local reference: a JSON pointer from the root, "/"-separated, ~1 for '/', ~0 for '~'.
  Result<const Json*> resolve(const std::string& r, const std::string& path) {
    if (r.rfind("#", 0) != 0) return error(path, "'$ref' " + r + ": only local references (#/...) are supported");
    const Json* at = &root_;
    const std::string pointer = r.substr(1);
    size_t i = 0;
    while (i < pointer.size()) {
      if (pointer[i] != '/') return error(path, "'$ref' " + r + " is not a JSON pointer (#/...)");
      const size_t end = std::min(pointer.find('/', i + 1), pointer.size());
      std::string token = pointer.substr(i + 1, end - i - 1);
      for (size_t k; (k = token.find("~1")) != std::string::npos;) token.replace(k, 2, "/");
      for (size_t k; (k = token.find("~0")) != std::string::npos;) token.replace(k, 2, "~");
      if (!at->is_object() || !at->contains(token)) return error(path, "'$ref' " + r + " points at nothing in this schema");
      at = &(*at)[token];
      i = end;
    }
    return at;
  }

  // allOf, as llama.cpp's converter takes it: object schemas (the keywords beside allOf included)
  // merged into one, their properties and required lists joined, closed if any is closed; a lone
  // subschema is itself. Anything else would need the intersection of two grammars.
  Result<std::string> visit_all_of(const Json& s, const std::string& name, const std::string& path, int depth) {
    const Json& list = s["allOf"];
    if (!list.is_array() || list.empty()) return error(path, "'allOf' must be a non-empty array");
    Json beside = s;
    beside.erase("allOf");
    bool beside_validates = false;
    for (auto it = beside.begin(); it != beside.end(); ++it) beside_validates |= !annotations().count(it.key());
    if (list.size() == 1 && !beside_validates) return visit(list[0], name, path + "/allOf/0", depth + 1);
    Json merged = {{"type", "object"}, {"properties", Json::object()}};
    Json required = Json::array();
    auto merge = [&](const Json& part, const std::string& where, int hops) -> Status {
      const Json* sub = &part;
      // Through local references (a few: a reference to a reference is rare).
      for (; sub->is_object() && sub->contains("$ref") && hops < 8; ++hops) {
        if (!(*sub)["$ref"].is_string()) return error(where, "'$ref' must be a string");
        KILN_ASSIGN_OR_RETURN(sub, resolve((*sub)["$ref"].get<std::string>(), where));
      }
      if (!sub->is_object()) return error(where, "an 'allOf' subschema must be an object schema");
      for (auto it = sub->begin(); it != sub->end(); ++it) {
        const std::string& k = it.key();
        if (annotations().count(k)) continue;
        if (k == "type") {
          if (!(it.value().is_string() && it.value().get<std::string>() == "object"))
            return error(where, "'allOf' is supported over object schemas only ('type' " + it.value().dump() + ")");
        } else if (k == "properties") {
          if (!it.value().is_object()) return error(where, "'properties' must be an object");
          for (auto p = it.value().begin(); p != it.value().end(); ++p) {
            if (merged["properties"].contains(p.key()))
              return error(where, "property '" + p.key() + "' is in two parts of 'allOf' (merging them is not supported)");
            merged["properties"][p.key()] = p.value();
          }
        } else if (k == "required") {
          if (!it.value().is_array()) return error(where, "'required' must be an array of strings");
          for (const Json& r : it.value()) required.push_back(r);
        } else if (k == "additionalProperties") {
          if (!it.value().is_boolean()) return error(where, "'additionalProperties' as a schema inside 'allOf' is not supported");
          if (!it.value().get<bool>()) merged["additionalProperties"] = false;
        } else {
          return error(where, "'allOf' is supported over object schemas only ('" + k + "' is not an object keyword)");
        }
      }
      return Status::ok();
    };
    if (beside_validates) KILN_RETURN_IF_ERROR(merge(beside, path, 0));
    for (size_t i = 0; i < list.size(); ++i) KILN_RETURN_IF_ERROR(merge(list[i], path + "/allOf/" + std::to_string(i), 0));
    if (!required.empty()) merged["required"] = std::move(required);
    return visit_object(merged, name, path, depth + 1);
  }

  Result<std::string> visit_ref(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return error(path, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    if (r.rfind("#", 0) != 0) return error(path, "'$ref' " + r + ": only local references (#/...) are supported");
    if (++n_refs_ > limits_.max_properties * 16) return error(path, "too many $ref targets — the limit");
    KILN_ASSIGN_OR_RETURN(const Json* at, resolve(r, path));
    // Named before it is visited, so that a recursive schema refers back to it.
    std::string hint = r.substr(r.find_last_of('/') + 1);
    const std::string rule = add_rule(hint.empty() ? "ref" : hint, "");
    refs_[r] = rule;
    KILN_ASSIGN_OR_RETURN(std::string body, visit(*at, rule, r.substr(1), depth + 1));
    rules_[rule] = body;
    return rule;
  }

  Result<std::string> visit_type(const Json& s, const std::string& type, const std::string& name, const std::string& path,
                                 int depth) {
    if (type == "object") return visit_object(s, name, path, depth);
    if (type == "array") return visit_array(s, name, path, depth);
    if (type == "string") return visit_string(s, name, path);
    if (type == "integer") return visit_integer(s, name, path);
    if (type == "number") return visit_number(s, name, path);
    if (type == "boolean") return use("boolean");
    if (type == "null") return use("null");
    return error(path, "'type' " + type + " is not a JSON Schema type");
  }

  Result<std::string> visit_object(const Json& s, const std::string& name, const std::string& path, int depth) {
    static const Json kEmpty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : kEmpty;
    if (!props.is_object()) return error(path, "'properties' must be an object");
    if (static_cast<int>(props.size()) > limits_.max_properties)
      return error(path, "more than " + std::to_string(limits_.max_properties) + " properties — the limit");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return error(path, "'required' must be an array of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return error(path, "'required' must be an array of strings");
        if (!props.contains(r.get<std::string>()))
          return error(path, "required property '" + r.get<std::string>() + "' is not in 'properties'");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::string> req_kv, opt_items, opt_first;
    for (auto it = props.begin(); it != props.end(); ++it) {
      KILN_ASSIGN_OR_RETURN(std::string value, visit(it.value(), name + "-" + it.key(), path + "/properties/" + it.key(), depth + 1));
      const std::string kv = add_rule(name + "-" + it.key() + "-kv",
                                      literal(dump(Json(it.key()))) + " " + use("space") + " \":\" space " + value);
      if (required.count(it.key())) {
        req_kv.push_back(kv);
      } else {
        opt_items.push_back("\",\" space " + kv);
        opt_first.push_back(kv);
      }
    }
    bool additional = false;
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        additional = a.get<bool>();
      } else {
        KILN_ASSIGN_OR_RETURN(std::string value, visit(a, name + "-additional", path + "/additionalProperties", depth + 1));
        const std::string kv = add_rule(name + "-additional-kv", use("string") + " \":\" space " + value);
        opt_items.push_back("(\",\" space " + kv + ")*");
        opt_first.push_back(kv + " (\",\" space " + kv + ")*");
      }
    }
    if (additional) {
      const std::string kv = add_rule(name + "-additional-kv", use("string") + " \":\" space " + use("value"));
      opt_items.push_back("(\",\" space " + kv + ")*");
      opt_first.push_back(kv + " (\",\" space " + kv + ")*");
    }
    // The optional ones in order, each present or not: tail_i ::= item_i? tail_{i+1}.
    std::vector<std::string> tails(opt_items.size() + 1);
    for (size_t i = opt_items.size(); i-- > 0;) {
      const bool star = opt_items[i].back() == '*';
      const std::string item = star ? opt_items[i] : "(" + opt_items[i] + ")?";
      tails[i] = add_rule(name + "-rest", tails[i + 1].empty() ? item : item + " " + tails[i + 1]);
    }
    std::string body = "\"{\" " + use("space");
    for (size_t i = 0; i < req_kv.size(); ++i) body += (i ? " \",\" space " : " ") + req_kv[i];
    if (!opt_items.empty()) {
      if (!req_kv.empty()) {
        body += " " + tails[0];
      } else {
        std::string first;
        for (size_t i = 0; i < opt_first.size(); ++i)
          first += (i ? " | " : "") + opt_first[i] + (tails[i + 1].empty() ? "" : " " + tails[i + 1]);
        body += " (" + first + ")?";
      }
    }
    return add_rule(name, body + " \"}\" space");
  }

  Result<std::string> visit_array(const Json& s, const std::string& name, const std::string& path, int depth) {
    std::string item = use("value");
    bool more_items = true;  // `items: false` after a prefix: no item past it
    if (s.contains("items")) {
      if (s["items"].is_array()) return error(path, "'items' as an array (draft 7's tuple) is not supported: write it as 'prefixItems'");
      if (s["items"].is_boolean() && !s["items"].get<bool>() && s.contains("prefixItems")) more_items = false;
      else {
        KILN_ASSIGN_OR_RETURN(item, visit(s["items"], name + "-item", path + "/items", depth + 1));
      }
    }
    KILN_ASSIGN_OR_RETURN(std::optional<int> lo, count_field(s, "minItems", path));
    KILN_ASSIGN_OR_RETURN(std::optional<int> hi, count_field(s, "maxItems", path));
    const int min = lo.value_or(0);
    if (hi && *hi < min) return error(path, "'maxItems' is below 'minItems'");
    if (s.contains("prefixItems")) return visit_tuple(s, name, path, depth, item, more_items, min, hi);
    std::string body = "\"[\" " + use("space");
    if (!hi || *hi > 0) {
      const std::string more = "(\",\" space " + item + ")";
      const std::optional<int> more_hi = hi ? std::optional<int>(*hi - 1) : std::nullopt;
      const std::string list = item + " " + more + repeat_suffix(std::max(min - 1, 0), more_hi);
      body += min == 0 ? " (" + list + ")?" : " " + list;
    }
    return add_rule(name, body + " \"]\" space");
  }

  // prefixItems: item i takes schema i, those past the prefix `item` (none when !more_items), with
  // at least `min` and at most `hi` items: element i is optional from min on, and only with those
  // before it.
  Result<std::string> visit_tuple(const Json& s, const std::string& name, const std::string& path, int depth,
                                  const std::string& item, bool more_items, int min, std::optional<int> hi) {
    const Json& prefix = s["prefixItems"];
    if (!prefix.is_array() || prefix.empty()) return error(path, "'prefixItems' must be a non-empty array");
    if (static_cast<int>(prefix.size()) > limits_.max_count)
      return error(path, "'prefixItems' has more than " + std::to_string(limits_.max_count) + " schemas — the limit");
    const int n = static_cast<int>(prefix.size());
    if (!more_items && min > n) return error(path, "'minItems' " + std::to_string(min) + " is more than the " + std::to_string(n) + " prefixItems 'items': false allows");
    const int cap = hi ? *hi : INT_MAX;
    std::vector<std::string> elems;
    for (int i = 0; i < n && i < cap; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string e, visit(prefix[static_cast<size_t>(i)], name + "-" + std::to_string(i),
                                                 path + "/prefixItems/" + std::to_string(i), depth + 1));
      elems.push_back(e);
    }
    // Past the prefix: the rest, as many as the bounds leave.
    std::string tail;
    if (more_items && cap > n) {
      const std::optional<int> rest_hi = hi ? std::optional<int>(*hi - n) : std::nullopt;
      tail = "(\",\" space " + item + ")" + repeat_suffix(std::max(min - n, 0), rest_hi);
    }
    for (int i = static_cast<int>(elems.size()); i-- > 0;) {
      const std::string e = (i ? "\",\" space " : "") + elems[static_cast<size_t>(i)] + (tail.empty() ? "" : " " + tail);
      tail = i < min ? e : "(" + e + ")?";
    }
    return add_rule(name, "\"[\" " + use("space") + " " + tail + " \"]\" space");
  }

  Result<std::string> visit_string(const Json& s, const std::string& name, const std::string& path) {
    KILN_ASSIGN_OR_RETURN(std::optional<int> lo, count_field(s, "minLength", path));
    KILN_ASSIGN_OR_RETURN(std::optional<int> hi, count_field(s, "maxLength", path));
    if (hi && *hi < lo.value_or(0)) return error(path, "'maxLength' is below 'minLength'");
    const bool lengths = lo || hi;
    if (s.contains("format")) {
      if (!s["format"].is_string()) return error(path, "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f != "date" && f != "time" && f != "date-time" && f != "uuid")
        return error(path, "'format' " + f + " is not supported (date, time, date-time and uuid are)");
      if (lengths || s.contains("pattern")) return error(path, "'format' beside minLength, maxLength or pattern is not supported");
      return add_rule(name, "\"\\\"\" " + use(f) + " \"\\\"\" " + use("space"));
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return error(path, "'pattern' must be a string");
      if (lengths) return error(path, "'pattern' beside minLength or maxLength is not supported");
      KILN_ASSIGN_OR_RETURN(std::string re, pattern_to_gbnf(s["pattern"].get<std::string>(), path));
      return add_rule(name, "\"\\\"\" " + re + " \"\\\"\" " + use("space"));
    }
    if (!lengths) return use("string");
    return add_rule(name, "\"\\\"\" " + use("char") + repeat_suffix(lo.value_or(0), hi) + " \"\\\"\" " + use("space"));
  }

  Result<std::string> visit_integer(const Json& s, const std::string& name, const std::string& path) {
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> lo, integer_field(s, "minimum", path));
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> hi, integer_field(s, "maximum", path));
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> xlo, integer_field(s, "exclusiveMinimum", path));
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> xhi, integer_field(s, "exclusiveMaximum", path));
    if (xlo) lo = std::max(lo.value_or(*xlo + 1), *xlo + 1);
    if (xhi) hi = std::min(hi.value_or(*xhi - 1), *xhi - 1);
    if (!lo && !hi) return use("integer");
    if (lo && hi && *hi < *lo) return error(path, "no integer is within the bounds");
    return add_rule(name, int_range(lo, hi) + " " + use("space"));
  }

  Result<std::string> visit_number(const Json& s, const std::string& name, const std::string& path) {
    if (s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
      return error(path, "'exclusiveMinimum' / 'exclusiveMaximum' on a number (not an integer) is not supported");
    if (!s.contains("minimum") && !s.contains("maximum")) return use("number");
    auto bound = [&](const char* key) -> Result<std::optional<int64_t>> {
      auto b = integer_field(s, key, path);
      if (!b.is_ok() || (*b && **b < 0))
        return error(path, std::string("'") + key + "' on a number (not an integer) is supported only as a whole number >= 0");
      return b;
    };
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> lo, bound("minimum"));
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> hi, bound("maximum"));
    if (lo && hi && *hi < *lo) return error(path, "no number is within the bounds");
    const std::string frac = "(\".\" " + use("decimal-part") + ")?";
    std::vector<std::string> alts;
    if (!lo) alts.push_back("\"-\" " + use("integral-part") + " " + frac);  // every negative number is below hi >= 0
    if (!hi) {
      alts.push_back(int_range(lo.value_or(0), std::nullopt) + " " + frac);
    } else {
      if (*hi > lo.value_or(0)) alts.push_back(int_range(lo.value_or(0), *hi - 1) + " " + frac);
      alts.push_back(literal(std::to_string(*hi)) + " (\".\" \"0\"{1,16})?");
    }
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return add_rule(name, "(" + body + ") " + use("space"));
  }

  // --- pattern: a regular-expression subset, matched against the string's JSON encoding ---

  Result<std::string> pattern_to_gbnf(const std::string& re, const std::string& path) {
    re_ = re;
    re_pos_ = 0;
    re_path_ = path;
    re_depth_ = 0;
    const bool start = !re_.empty() && re_[0] == '^';
    if (start) ++re_pos_;
    KILN_ASSIGN_OR_RETURN(std::string body, re_alternatives());
    bool end = false;
    if (re_pos_ < re_.size() && re_[re_pos_] == '$') {
      end = true;
      ++re_pos_;
    }
    if (re_pos_ < re_.size()) return re_error("unexpected '" + std::string(1, re_[re_pos_]) + "'");
    const std::string any = use("plain-char") + "*";
    return (start ? "" : any + " ") + "(" + body + ")" + (end ? "" : " " + any);
  }

  Status re_error(const std::string& what) const {
    return error(re_path_, "'pattern' " + re_ + ": at offset " + std::to_string(re_pos_) + ": " + what);
  }

  Result<std::string> re_alternatives() {
    if (++re_depth_ > limits_.max_depth) return re_error("groups nest too deep");
    std::string out;
    for (;;) {
      KILN_ASSIGN_OR_RETURN(std::string seq, re_sequence());
      out += seq;
      if (re_pos_ < re_.size() && re_[re_pos_] == '|') {
        ++re_pos_;
        out += " | ";
        continue;
      }
      --re_depth_;
      return out;
    }
  }

  Result<std::string> re_sequence() {
    std::string out;
    while (re_pos_ < re_.size()) {
      const char c = re_[re_pos_];
      if (c == '|' || c == ')') break;
      if (c == '$' && re_pos_ + 1 == re_.size()) break;
      std::string atom;
      if (c == '(') {
        ++re_pos_;
        if (re_.compare(re_pos_, 2, "?:") == 0) re_pos_ += 2;
        else if (re_pos_ < re_.size() && re_[re_pos_] == '?') return re_error("lookarounds and named groups are not supported");
        KILN_ASSIGN_OR_RETURN(std::string inner, re_alternatives());
        if (re_pos_ >= re_.size() || re_[re_pos_] != ')') return re_error("expected ')'");
        ++re_pos_;
        atom = "(" + inner + ")";
      } else if (c == '[') {
        KILN_ASSIGN_OR_RETURN(atom, re_class());
      } else if (c == '.') {
        ++re_pos_;
        atom = use("plain-char");
      } else if (c == '^' || c == '$') {
        return re_error("anchors are supported only at the start and the end");
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return re_error("nothing to repeat");
      } else {
        KILN_ASSIGN_OR_RETURN(auto r, re_escape_or_char(false));
        atom = r.size() == 1 && r[0].first == r[0].second ? json_char(r[0].first) : class_text(r, false);
      }
      KILN_ASSIGN_OR_RETURN(std::string quant, re_quantifier());
      out += (out.empty() ? "" : " ") + atom + quant;
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  Result<std::string> re_quantifier() {
    if (re_pos_ >= re_.size()) return std::string();
    const char c = re_[re_pos_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      ++re_pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t close = re_.find('}', re_pos_);
      if (close == std::string::npos) return re_error("'{' is not closed");
      const std::string inside = re_.substr(re_pos_ + 1, close - re_pos_ - 1);
      const size_t comma = inside.find(',');
      auto num = [&](const std::string& t, int& out) -> Status {
        if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
          return re_error("a repetition {m,n} needs numbers");
        out = std::stoi(t);
        if (out > limits_.max_count) return re_error("a repetition count above " + std::to_string(limits_.max_count));
        return Status::ok();
      };
      int lo = 0, hi = -1;
      KILN_RETURN_IF_ERROR(num(comma == std::string::npos ? inside : inside.substr(0, comma), lo));
      if (comma == std::string::npos) hi = lo;
      else if (comma + 1 < inside.size()) KILN_RETURN_IF_ERROR(num(inside.substr(comma + 1), hi));
      if (hi >= 0 && hi < lo) return re_error("{m,n} with n below m");
      re_pos_ = close + 1;
      q = repeat_suffix(lo, hi >= 0 ? std::optional<int>(hi) : std::nullopt);
    } else {
      return std::string();
    }
    if (re_pos_ < re_.size() && (re_[re_pos_] == '?' || re_[re_pos_] == '+'))
      return re_error("lazy and possessive quantifiers are not supported");
    return q;
  }

  // One character or escape (a class escape gives several ranges).
  Result<std::vector<std::pair<uint32_t, uint32_t>>> re_escape_or_char(bool in_class) {
    using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
    if (re_[re_pos_] != '\\') {
      const unsigned char b = static_cast<unsigned char>(re_[re_pos_]);
      const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      if (re_pos_ + n > re_.size()) return re_error("not UTF-8");
      uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
      for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(re_[re_pos_ + i]) & 0x3F);
      re_pos_ += n;
      return Ranges{{cp, cp}};
    }
    if (++re_pos_ >= re_.size()) return re_error("'\\' at the end");
    const char e = re_[re_pos_++];
    switch (e) {
      case 'd': return Ranges{{'0', '9'}};
      case 'w': return Ranges{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      case 's': return Ranges{{' ', ' '}, {'\t', '\n'}, {'\r', '\r'}};
      case 'D': case 'W': case 'S': {
        if (in_class) return re_error("\\D, \\W and \\S inside a class are not supported");
        const Ranges pos = e == 'D' ? Ranges{{'0', '9'}} : e == 'W' ? Ranges{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
                                                                    : Ranges{{' ', ' '}, {'\t', '\n'}, {'\r', '\r'}};
        return CharClass(pos, true).ranges();
      }
      case 'n': return Ranges{{'\n', '\n'}};
      case 't': return Ranges{{'\t', '\t'}};
      case 'r': return Ranges{{'\r', '\r'}};
      default:
        if (std::isalnum(static_cast<unsigned char>(e))) return re_error(std::string("the escape \\") + e + " is not supported");
        return Ranges{{static_cast<uint32_t>(static_cast<unsigned char>(e)), static_cast<uint32_t>(static_cast<unsigned char>(e))}};
    }
  }

  Result<std::string> re_class() {
    ++re_pos_;  // '['
    bool negated = false;
    if (re_pos_ < re_.size() && re_[re_pos_] == '^') {
      negated = true;
      ++re_pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool first = true;
    while (re_pos_ < re_.size() && (re_[re_pos_] != ']' || first)) {
      first = false;
      KILN_ASSIGN_OR_RETURN(auto lo, re_escape_or_char(true));
      if (lo.size() == 1 && lo[0].first == lo[0].second && re_pos_ + 1 < re_.size() && re_[re_pos_] == '-' &&
          re_[re_pos_ + 1] != ']') {
        ++re_pos_;
        KILN_ASSIGN_OR_RETURN(auto hi, re_escape_or_char(true));
        if (hi.size() != 1 || hi[0].first != hi[0].second || hi[0].first < lo[0].first) return re_error("a bad range in a class");
        ranges.emplace_back(lo[0].first, hi[0].first);
      } else {
        ranges.insert(ranges.end(), lo.begin(), lo.end());
      }
    }
    if (re_pos_ >= re_.size()) return re_error("'[' is not closed");
    ++re_pos_;
    return class_text(ranges, negated);
  }

  // A class of the characters a JSON string holds unescaped: '"', '\' and controls are left out
  // (a pattern class allows a subset then, never more).
  std::string class_text(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
    const CharClass wanted(std::move(ranges), negated);
    const CharClass plain({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}}, true);
    std::vector<std::pair<uint32_t, uint32_t>> both;
    for (const auto& a : wanted.ranges())
      for (const auto& b : plain.ranges()) {
        const uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
        if (lo <= hi) both.emplace_back(lo, hi);
      }
    if (both.empty()) return "[^\\x00-\\U0010FFFF]";  // no character: never matches
    auto esc = [](uint32_t cp) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\U%08X", cp);
      return std::string(buf);
    };
    std::string out = "[";
    for (const auto& r : both) out += esc(r.first) + (r.first == r.second ? "" : "-" + esc(r.second));
    return out + "]";
  }

  // One character as its JSON encoding inside a string.
  static std::string json_char(uint32_t cp) {
    const std::string encoded = dump(Json(to_utf8(cp)));  // "\"...\"" with JSON's escapes
    return literal(encoded.substr(1, encoded.size() - 2));
  }

  const Json& root_;
  JsonSchemaLimits limits_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
  int n_refs_ = 0;
  std::string re_, re_path_;
  size_t re_pos_ = 0;
  int re_depth_ = 0;
};

// The deepest nesting of arrays and objects in JSON text (strings skipped), before parsing it.
int json_depth(std::string_view text) {
  int depth = 0, max = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max = std::max(max, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max;
}

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json, const JsonSchemaLimits& limits,
                                        std::string_view root_rule) {
  if (root_rule.empty() || !std::all_of(root_rule.begin(), root_rule.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
      }))
    return invalid_argument("json schema: the root rule's name must be letters, digits and '-'");
  if (schema_json.size() > limits.max_bytes)
    return invalid_argument("json schema: " + std::to_string(schema_json.size()) + " bytes, more than the limit of " +
                            std::to_string(limits.max_bytes));
  if (json_depth(schema_json) > limits.max_depth * 4)
    return invalid_argument("json schema: nested deeper than " + std::to_string(limits.max_depth * 4) + " — the limit");
  const Json schema = Json::parse(schema_json.begin(), schema_json.end(), nullptr, false);
  if (schema.is_discarded()) return invalid_argument("json schema: the text is not JSON");
  return SchemaConverter(schema, limits).convert(std::string(root_rule));
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  std::set<std::string> done;
  std::vector<std::string> todo = {"object"};
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (!done.insert(name).second) continue;
    const BaseRule& r = base_rules().at(name);
    out += name + " ::= " + r.body + "\n";
    for (const char* u : r.uses) todo.push_back(u);
  }
  return out;
}

}  // namespace kiln
