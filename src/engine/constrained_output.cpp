#include "engine/constrained_output.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"

namespace kiln {

Result<std::shared_ptr<const Grammar>> grammar_from_gbnf(std::string_view gbnf) {
  KILN_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(gbnf));
  return std::make_shared<const Grammar>(std::move(g));
}

Result<std::shared_ptr<const Grammar>> grammar_from_json_schema(std::string_view schema) {
  KILN_ASSIGN_OR_RETURN(std::string gbnf, json_schema_to_gbnf(schema));
  auto g = parse_gbnf(gbnf);
  // The converter writes only grammars its parser takes (fuzz_json_schema checks that).
  if (!g.is_ok()) return Status(StatusCode::kInternal, "json schema: the grammar it became does not parse: " + g.status().message());
  return std::make_shared<const Grammar>(std::move(*g));
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> g = [] {
    auto parsed = parse_gbnf(json_object_gbnf());
    return parsed.is_ok() ? std::make_shared<const Grammar>(std::move(*parsed)) : nullptr;
  }();
  return g;
}

}  // namespace kiln
