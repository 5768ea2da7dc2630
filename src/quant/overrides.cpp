#include "quant/overrides.h"

#include <algorithm>
#include <climits>

#include "formats/json_util.h"
#include "quant/scheme_flag.h"

namespace kiln {

namespace {

constexpr std::string_view kOpKinds[] = {"embedding", "attn_q",   "attn_k", "attn_v", "attn_output",
                                         "ffn_gate",  "ffn_up",   "ffn_down", "output"};
constexpr std::string_view kAttention[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
constexpr std::string_view kFfn[] = {"ffn_gate", "ffn_up", "ffn_down"};

constexpr std::string_view kTopKeys[] = {"default", "group_size", "symmetric", "auto_fallback", "rules", "comment"};
constexpr std::string_view kRuleKeys[] = {"match", "layers", "op", "scheme", "group_size", "symmetric", "comment"};

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

template <size_t N>
std::string join(const std::string_view (&list)[N]) {
  std::string out;
  for (auto s : list) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// A JSON string literal, safe for any bytes.
std::string json_quoted(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string rule_text(const Rule& r) {
  std::string t;
  auto add = [&](const std::string& part) { t += (t.empty() ? "" : ", ") + part; };
  if (r.match) add("\"match\": " + json_quoted(*r.match));
  if (r.layers) add("\"layers\": [" + std::to_string(r.layers->first) + ", " + std::to_string(r.layers->second) + "]");
  if (r.op) add("\"op\": " + json_quoted(*r.op));
  return "{" + t + "}";
}

// A rule the compiler adds before the file's own (the classifier guard, src/compiler/precision.cpp)
// has a note in its text beyond its selectors; parse_rule's text is the selectors alone.
bool added_by_compiler(const Rule& r) { return !r.text.empty() && r.text != rule_text(r); }

// "rule N (...)", N counting the file's rules only, so that it is the number the user wrote.
std::string rule_label(const OverridesFile& file, size_t index) {
  const Rule& r = file.rules[index];
  if (added_by_compiler(r)) return "the rule " + r.text;
  size_t n = 0;
  for (size_t k = 0; k <= index; ++k) n += added_by_compiler(file.rules[k]) ? 0 : 1;
  return "rule " + std::to_string(n) + " (" + (r.text.empty() ? rule_text(r) : r.text) + ")";
}

Status check_keys(const Json& obj, const std::string_view* known, size_t n_known, const std::string& where,
                  const std::string& known_list) {
  for (const auto& item : obj.items()) {
    if (std::find(known, known + n_known, item.key()) == known + n_known)
      return corrupt(where + ": unknown key " + json_quoted(item.key()) + " (known: " + known_list + ")");
  }
  return Status::ok();
}

// A scheme name, or "w8a16 g32" (w8a16 with 8-bit groups): the scheme and its w8_group.
Result<QuantParams> scheme_field(const Json& obj, const std::string& key, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(std::string name, json_string(obj, key, "", where));
  if (auto s = parse_scheme(name)) return QuantParams{*s};
  if (auto p = parse_grouped_w8(name); p && validate_params(*p)) return *p;
  return corrupt(where + ": '" + key + "': unknown scheme " + json_quoted(name) + " (known: " +
                 std::string(scheme_names_list()) + ", w8a16 g32/g64/g128; in rules also q4_0, q4_1, q4_k, iq4_xs, q5_0, q5_1, q5_k, q6_k, q8_0)");
}

Result<int> group_field(const Json& obj, const std::string& where, int fallback) {
  KILN_ASSIGN_OR_RETURN(int64_t g, json_int(obj, "group_size", fallback, where));
  if (g != 32 && g != 64 && g != 128 && g != 256)
    return corrupt(where + ": 'group_size' " + std::to_string(g) + " is not one of 32, 64, 128 (256: w4a16 asymmetric, GGML's Q4_K)");
  return static_cast<int>(g);
}

Result<int> layer_number(const Json& v, const std::string& where) {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    return corrupt(where + ": 'layers' must be [first, last] or one layer number");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(INT_MAX)
                             : (v.get<int64_t>() < 0 || v.get<int64_t>() > INT_MAX))
    return corrupt(where + ": 'layers': " + v.dump() + " is not a layer number (0 or more)");
  return static_cast<int>(v.get<int64_t>());
}

Result<Rule> parse_rule(const Json& jr, const std::string& where, const OverridesFile& file) {
  if (!jr.is_object()) return corrupt(where + ": a rule is a JSON object {\"match\": ..., \"scheme\": ...}");
  KILN_RETURN_IF_ERROR(check_keys(jr, kRuleKeys, std::size(kRuleKeys), where, join(kRuleKeys)));
  Rule r;
  if (!jr.contains("scheme") || jr["scheme"].is_null()) return corrupt(where + ": has no 'scheme'");
  // A name a llama.cpp user brings (q5_0, q4_k, q8_0, fp16, ...) is one layout, its group and
  // symmetry included (quant/scheme_flag.h).
  std::optional<QuantParams> alias;
  if (jr["scheme"].is_string()) {
    const std::string name = jr["scheme"].get<std::string>();
    if (!parse_scheme(name) && !parse_grouped_w8(name))
      if (auto a = parse_scheme_flag(name, 32, true)) alias = canonical(*a);
  }
  QuantParams named;
  if (alias) named = *alias;
  else {
    KILN_ASSIGN_OR_RETURN(named, scheme_field(jr, "scheme", where));
  }
  r.params.scheme = named.scheme;
  r.params.w8_group = named.w8_group;

  if (jr.contains("match") && !jr["match"].is_null()) {
    KILN_ASSIGN_OR_RETURN(std::string m, json_string(jr, "match", "", where));
    if (m.empty()) return corrupt(where + ": 'match' is empty");
    r.match = std::move(m);
  }
  if (jr.contains("layers") && !jr["layers"].is_null()) {
    const Json& l = jr["layers"];
    if (l.is_array()) {
      if (l.size() != 2) return corrupt(where + ": 'layers' must be [first, last] (two numbers)");
      KILN_ASSIGN_OR_RETURN(int first, layer_number(l[0], where));
      KILN_ASSIGN_OR_RETURN(int last, layer_number(l[1], where));
      if (first > last)
        return corrupt(where + ": 'layers' [" + std::to_string(first) + ", " + std::to_string(last) +
                       "]: first is after last");
      r.layers = {first, last};
    } else {
      KILN_ASSIGN_OR_RETURN(int one, layer_number(l, where));
      r.layers = {one, one};
    }
  }
  if (jr.contains("op") && !jr["op"].is_null()) {
    KILN_ASSIGN_OR_RETURN(std::string op, json_string(jr, "op", "", where));
    if (!is_op_selector(op))
      return corrupt(where + ": 'op': unknown op " + json_quoted(op) + " (known: " + join(kOpKinds) +
                     "; groups: attention, ffn)");
    r.op = std::move(op);
  }
  if (!r.match && !r.layers && !r.op)
    return corrupt(where + ": has no 'match', 'layers' or 'op'; to set the scheme of every tensor use 'default'");

  if (alias) {
    for (const char* key : {"group_size", "symmetric"})
      if (jr.contains(key) && !jr[key].is_null())
        return corrupt(where + ": '" + key + "' does not apply: scheme " + json_quoted(jr["scheme"].get<std::string>()) +
                       " is " + describe(*alias) + ", its group and symmetry fixed");
    r.params = *alias;
    r.text = rule_text(r);
    return r;
  }
  const bool four = is_4bit(r.params.scheme);
  // w8a16 takes a group only when the rule names one: without it, one scale per row.
  const bool w8_grouped = r.params.scheme == Scheme::kW8A16 && jr.contains("group_size") && !jr["group_size"].is_null();
  for (const char* key : {"group_size", "symmetric"})
    if (!four && !(w8_grouped && std::string_view(key) == "group_size") && jr.contains(key) && !jr[key].is_null())
      return corrupt(where + ": '" + key + "' applies to 4-bit schemes (w4a16, w4a8) and w8a16 groups only, not " +
                     std::string(scheme_name(r.params.scheme)));
  KILN_ASSIGN_OR_RETURN(r.params.group_size, group_field(jr, where, file.defaults.group_size));
  if (w8_grouped) r.params.w8_group = r.params.group_size;
  KILN_ASSIGN_OR_RETURN(r.params.symmetric, json_bool(jr, "symmetric", file.defaults.symmetric, where));
  r.params = canonical(r.params);
  r.text = rule_text(r);
  return r;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  // Greedy matching with one backtrack point (the last '*'): O(|pattern| * |text|), never exponential.
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == text[t]))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool is_op_kind(std::string_view op) { return contains(kOpKinds, op); }

bool is_op_selector(std::string_view selector) {
  return is_op_kind(selector) || selector == "attention" || selector == "ffn";
}

bool op_selector_matches(std::string_view selector, std::string_view op) {
  if (selector == "attention") return contains(kAttention, op);
  if (selector == "ffn") return contains(kFfn, op);
  return selector == op;
}

bool rule_matches(const Rule& rule, const WeightRef& w) {
  if (rule.match && !glob_match(*rule.match, w.name) && (w.alias.empty() || !glob_match(*rule.match, w.alias)))
    return false;
  if (rule.layers && (w.layer < rule.layers->first || w.layer > rule.layers->second)) return false;
  if (rule.op && !op_selector_matches(*rule.op, w.op)) return false;
  return true;
}

Result<OverridesFile> parse_overrides(std::string_view json, const std::string& path) {
  return parse_overrides(json, path, OverridesFile{});
}

Result<OverridesFile> parse_overrides(std::string_view json, const std::string& path, const OverridesFile& base) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(json, path));
  if (!j.is_object()) return corrupt(path + ": an overrides file is a JSON object {\"default\": ..., \"rules\": [...]}");
  KILN_RETURN_IF_ERROR(check_keys(j, kTopKeys, std::size(kTopKeys), path, join(kTopKeys)));

  OverridesFile f;
  f.defaults = base.defaults;
  f.auto_fallback = base.auto_fallback;
  if (j.contains("default") && !j["default"].is_null()) {
    KILN_ASSIGN_OR_RETURN(const QuantParams named, scheme_field(j, "default", path));
    f.defaults.scheme = named.scheme;
    f.defaults.w8_group = named.w8_group;
  }
  // The file's group size and symmetry are kept even when its default is not 4-bit: rules that
  // pick a 4-bit scheme inherit them.
  const int base_group = validate_params({Scheme::kW4A16, base.defaults.group_size}) ? base.defaults.group_size : 32;
  KILN_ASSIGN_OR_RETURN(f.defaults.group_size, group_field(j, path, base_group));
  KILN_ASSIGN_OR_RETURN(f.defaults.symmetric, json_bool(j, "symmetric", base.defaults.symmetric, path));
  KILN_ASSIGN_OR_RETURN(f.auto_fallback, json_bool(j, "auto_fallback", f.auto_fallback, path));

  if (j.contains("rules") && !j["rules"].is_null()) {
    const Json& rules = j["rules"];
    if (!rules.is_array()) return corrupt(path + ": 'rules' must be an array of rules");
    for (size_t i = 0; i < rules.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Rule r, parse_rule(rules[i], path + ": rule " + std::to_string(i + 1), f));
      f.rules.push_back(std::move(r));
    }
  }
  return f;
}

Result<OverridesFile> overrides_from_flags(std::string_view scheme, int group_size, bool symmetric,
                                           bool auto_fallback) {
  KILN_ASSIGN_OR_RETURN(QuantParams p, parse_scheme_flag(scheme, group_size, symmetric));
  OverridesFile f;
  f.defaults = p;
  KILN_RETURN_IF_ERROR(validate_params(f.defaults));
  f.auto_fallback = auto_fallback;
  return f;
}

Result<std::vector<QuantParams>> assign_schemes(const OverridesFile& file, const std::vector<WeightRef>& weights,
                                                const std::string& path, std::vector<std::string>* notes) {
  const std::string prefix = path.empty() ? "" : path + ": ";
  if (is_4bit(file.defaults.scheme)) {
    KILN_RETURN_IF_ERROR(validate_params(file.defaults).with_context(path.empty() ? "default" : path + ": default"));
  }
  struct RuleUse {
    size_t matmul = 0;        // matmul weights it matches
    size_t effective = 0;     // ... on which it is the last match
    const WeightRef* other = nullptr;  // the first non-matmul tensor it matches
  };
  for (size_t i = 0; i < file.rules.size(); ++i)
    KILN_RETURN_IF_ERROR(validate_params(file.rules[i].params).with_context(prefix + rule_label(file, i)));
  std::vector<RuleUse> use(file.rules.size());
  std::vector<QuantParams> out;
  std::vector<int> chosen_by;  // rule index per weight, -1 for the default
  out.reserve(weights.size());
  int max_layer = -1;

  for (const WeightRef& w : weights) {
    max_layer = std::max(max_layer, w.layer);
    int winner = -1;
    for (size_t i = 0; i < file.rules.size(); ++i) {
      if (!rule_matches(file.rules[i], w)) continue;
      if (w.is_matmul_weight) {
        ++use[i].matmul;
        winner = static_cast<int>(i);
      } else if (use[i].other == nullptr) {
        use[i].other = &w;
      }
    }
    if (!w.is_matmul_weight) {
      out.push_back(canonical({Scheme::kF32}));
      chosen_by.push_back(-1);
      continue;
    }
    if (winner >= 0) ++use[static_cast<size_t>(winner)].effective;
    out.push_back(canonical(winner >= 0 ? file.rules[static_cast<size_t>(winner)].params : file.defaults));
    chosen_by.push_back(winner);
  }

  for (size_t i = 0; i < file.rules.size(); ++i) {
    const Rule& r = file.rules[i];
    if (use[i].matmul == 0 && use[i].other == nullptr)
      return invalid_argument(prefix + rule_label(file, i) + " matches no tensor");
    if (use[i].matmul == 0 && r.params.scheme != Scheme::kF32)
      return invalid_argument(prefix + rule_label(file, i) + " would make " + use[i].other->name + " " +
                              std::string(scheme_name(r.params.scheme)) +
                              ", but it is not a matmul weight: norms and biases always stay f32");
    if (notes != nullptr && use[i].matmul > 0 && use[i].effective == 0)
      notes->push_back(prefix + rule_label(file, i) + " has no effect: later rules override it on all " +
                       std::to_string(use[i].matmul) + " tensors it matches");
    if (notes != nullptr && r.layers && r.layers->second > max_layer)
      notes->push_back(prefix + rule_label(file, i) + ": the model's last layer is " + std::to_string(max_layer));
  }

  for (size_t k = 0; k < weights.size(); ++k) {
    const WeightRef& w = weights[k];
    if (w.rows < 0 || w.cols < 0)
      return invalid_argument(prefix + w.name + ": negative shape [" + std::to_string(w.rows) + ", " +
                              std::to_string(w.cols) + "]");
    QuantParams& p = out[k];
    const int g = scale_group(p);
    if (g == 0 || w.cols % g == 0) continue;
    const std::string by = chosen_by[k] < 0 ? std::string("the default")
                                            : rule_label(file, static_cast<size_t>(chosen_by[k]));
    const std::string what = w.name + ": " + describe(p) + " (from " + by + ") needs the input dimension " +
                             std::to_string(w.cols) + " to be a multiple of " + std::to_string(g);
    if (!file.auto_fallback)
      return invalid_argument(prefix + what + "; choose another group size or scheme for it, or allow auto_fallback");
    const Scheme wide = widen_to_w8(p.scheme);
    if (notes != nullptr) notes->push_back(prefix + what + "; using " + std::string(scheme_name(wide)));
    p = canonical({wide});  // w8a16 g32 -> w8a16: one scale per row
  }
  return out;
}

std::string overrides_key(const OverridesFile& f) {
  std::string k = "default " + describe(canonical(f.defaults)) + (f.auto_fallback ? " fallback" : "");
  for (const Rule& r : f.rules) {
    k += "; rule";
    if (r.match) k += " match " + std::to_string(r.match->size()) + ":" + *r.match;
    if (r.layers) k += " layers " + std::to_string(r.layers->first) + "-" + std::to_string(r.layers->second);
    if (r.op) k += " op " + *r.op;
    k += " -> " + describe(canonical(r.params));
  }
  return k;
}

}  // namespace kiln
