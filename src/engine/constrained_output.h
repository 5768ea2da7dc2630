// What a reply must look like, from the front ends' three forms: GBNF text, a JSON Schema (its
// text), or any JSON object (OpenAI's json_object mode). The CLI, the C API and the server come in
// here; the grammar goes into TurnOptions::grammar.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kiln {

// A parse error names the line and column ("gbnf: line 3, column 7: ...").
Result<std::shared_ptr<const Grammar>> grammar_from_gbnf(std::string_view gbnf);
// An unsupported keyword is an error naming it and where it is.
Result<std::shared_ptr<const Grammar>> grammar_from_json_schema(std::string_view schema);
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace kiln
