#include "artifact/conformance_section.h"

#include <cmath>

#include "formats/json_util.h"

namespace kiln {

std::string encode_conformance_section(const ConformanceReport& r) {
  Json texts = Json::array();
  for (const ConformanceText& t : r.texts) {
    Json layers = Json::array();
    for (const ConformanceLayer& l : t.worst_layers)
      layers.push_back({{"layer", l.layer}, {"added_error", l.added_error}, {"relative_error", l.relative_error}});
    texts.push_back({{"name", t.name}, {"tokens", t.tokens}, {"scored", t.scored}, {"n_ctx", t.n_ctx},
                     {"top1_agreement", t.top1_agreement}, {"kl", t.kl}, {"max_kl", t.max_kl},
                     {"ppl_reference", t.ppl_reference}, {"ppl_quantized", t.ppl_quantized},
                     {"worst_layers", layers}, {"round_trip", t.round_trip},
                     {"round_trip_mismatch", t.round_trip_mismatch}});
  }
  return Json{{"reference", r.reference}, {"texts", texts}}.dump();
}

namespace {

// A number the encoder wrote. JSON has no infinity: a perplexity or KL that overflowed (a
// program that lost the model) was written as null and reads back as infinite.
Result<double> number_or_infinity(const Json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key)) return corrupt(where + ": '" + key + "' is missing");
  if (j[key].is_null()) return static_cast<double>(INFINITY);
  return json_number(j, key, 0, where);
}

}  // namespace

Result<ConformanceReport> decode_conformance_section(std::span<const uint8_t> bytes, const std::string& where) {
  const std::string w = where + ": conformance";
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(as_text(bytes), w));
  if (!j.is_object()) return corrupt(w + ": not an object");
  ConformanceReport r;
  KILN_ASSIGN_OR_RETURN(r.reference, json_string(j, "reference", "f32", w));
  if (!j.contains("texts") || !j["texts"].is_array() || j["texts"].empty())
    return corrupt(w + ": 'texts' is missing or empty");
  for (const Json& t : j["texts"]) {
    if (!t.is_object()) return corrupt(w + ": a text is not an object");
    ConformanceText c;
    KILN_ASSIGN_OR_RETURN(c.name, json_string(t, "name", "", w));
    const std::string tw = w + " '" + c.name + "'";
    KILN_ASSIGN_OR_RETURN(c.tokens, json_int(t, "tokens", 0, tw));
    KILN_ASSIGN_OR_RETURN(c.scored, json_int(t, "scored", 0, tw));
    KILN_ASSIGN_OR_RETURN(c.n_ctx, json_dim(t, "n_ctx", 0, tw));
    if (c.scored <= 0 || c.tokens <= c.scored) return corrupt(tw + ": no tokens scored");
    KILN_ASSIGN_OR_RETURN(c.top1_agreement, number_or_infinity(t, "top1_agreement", tw));
    KILN_ASSIGN_OR_RETURN(c.kl, number_or_infinity(t, "kl", tw));
    KILN_ASSIGN_OR_RETURN(c.max_kl, number_or_infinity(t, "max_kl", tw));
    KILN_ASSIGN_OR_RETURN(c.ppl_reference, number_or_infinity(t, "ppl_reference", tw));
    KILN_ASSIGN_OR_RETURN(c.ppl_quantized, number_or_infinity(t, "ppl_quantized", tw));
    KILN_ASSIGN_OR_RETURN(c.round_trip, json_bool(t, "round_trip", false, tw));
    KILN_ASSIGN_OR_RETURN(c.round_trip_mismatch, json_int(t, "round_trip_mismatch", -1, tw));
    if (t.contains("worst_layers")) {
      if (!t["worst_layers"].is_array()) return corrupt(tw + ": 'worst_layers' is not an array");
      for (const Json& l : t["worst_layers"]) {
        if (!l.is_object()) return corrupt(tw + ": a layer is not an object");
        ConformanceLayer cl;
        KILN_ASSIGN_OR_RETURN(cl.layer, json_dim(l, "layer", 0, tw));
        KILN_ASSIGN_OR_RETURN(cl.added_error, number_or_infinity(l, "added_error", tw));
        KILN_ASSIGN_OR_RETURN(cl.relative_error, number_or_infinity(l, "relative_error", tw));
        c.worst_layers.push_back(cl);
      }
    }
    r.texts.push_back(std::move(c));
  }
  return r;
}

}  // namespace kiln
