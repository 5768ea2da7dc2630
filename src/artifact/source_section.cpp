#include "artifact/source_section.h"

#include <cinttypes>
#include <cstdio>

#include "formats/json_util.h"

namespace kiln {

std::string encode_source_section(const SourceRecord& r) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, r.hash);
  return Json{{"path", r.path},
              {"size", r.size},
              {"hash", hash},
              {"scheme", r.scheme},
              {"group", r.group},
              {"symmetric", r.symmetric},
              {"strict", r.strict},
              {"quantize_classifier", r.quantize_classifier},
              {"fuse", r.fuse},
              {"max_tokens", r.max_tokens},
              {"tokenizer", r.tokenizer},
              {"overrides", r.overrides},
              {"calibrated", r.calibrated}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);  // a path that is not UTF-8 must not throw
}

Result<SourceRecord> decode_source_section(std::span<const uint8_t> bytes, const std::string& where) {
  const std::string w = where + ": source record";
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(as_text(bytes), w));
  if (!j.is_object()) return corrupt(w + ": not an object");
  SourceRecord r;
  KILN_ASSIGN_OR_RETURN(r.path, json_string(j, "path", "", w));
  if (r.path.empty()) return corrupt(w + ": 'path' is missing or empty");
  KILN_ASSIGN_OR_RETURN(int64_t size, json_int(j, "size", -1, w));
  if (size < 0) return corrupt(w + ": 'size' is missing or negative");
  r.size = static_cast<uint64_t>(size);
  KILN_ASSIGN_OR_RETURN(std::string hash, json_string(j, "hash", "", w));
  if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    return corrupt(w + ": 'hash' is not 16 lowercase hex digits");
  r.hash = std::stoull(hash, nullptr, 16);
  KILN_ASSIGN_OR_RETURN(r.scheme, json_string(j, "scheme", "", w));
  KILN_ASSIGN_OR_RETURN(r.group, json_dim(j, "group", 32, w));
  KILN_ASSIGN_OR_RETURN(r.symmetric, json_bool(j, "symmetric", true, w));
  KILN_ASSIGN_OR_RETURN(r.strict, json_bool(j, "strict", false, w));
  KILN_ASSIGN_OR_RETURN(r.quantize_classifier, json_bool(j, "quantize_classifier", false, w));
  KILN_ASSIGN_OR_RETURN(r.fuse, json_bool(j, "fuse", true, w));
  KILN_ASSIGN_OR_RETURN(r.max_tokens, json_dim(j, "max_tokens", 0, w));
  KILN_ASSIGN_OR_RETURN(r.tokenizer, json_string(j, "tokenizer", "", w));
  KILN_ASSIGN_OR_RETURN(r.overrides, json_string(j, "overrides", "", w));
  KILN_ASSIGN_OR_RETURN(r.calibrated, json_bool(j, "calibrated", false, w));
  return r;
}

}  // namespace kiln
