// JSON Schema -> GBNF text (gbnf_parser.h compiles it), for OpenAI's response_format json_schema
// and `kiln run --json-schema`. Supported: type (one or a list), properties / required /
// additionalProperties, items / minItems / maxItems, enum, const, minLength / maxLength, pattern (a
// regular-expression subset: literals, . \d \w \s, classes, groups, |, * + ? {m,n}, ^ $ at the
// ends), format date / time / date-time / uuid, integer bounds (minimum, maximum, exclusive ones),
// number bounds when whole and not negative, anyOf / oneOf, local $ref into $defs / definitions,
// prefixItems (tuples; items after them, or items: false), allOf over object schemas (merged),
// uniqueItems: false. Annotations (title, description, default, examples, ...) are ignored; any other keyword is an
// error naming it and where it is, never silently dropped.
//
// The output is canonical compact-ish JSON: properties in the schema's order (required and the
// optional ones present), no properties beyond the schema's unless additionalProperties allows
// them, whitespace limited as llama.cpp's json.gbnf does.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

struct JsonSchemaLimits {
  size_t max_bytes = 1u << 20;  // the schema's text
  int max_depth = 64;           // nesting of the schema's JSON and of subschemas
  int max_properties = 256;     // properties of one object
  int max_count = 1000;         // minItems / maxItems / minLength / maxLength
};

// `root_rule` names the rule of the whole value (another name lets a caller embed the grammar in
// its own: a tool call's arguments inside the model's call syntax); the others are named after
// the schema's paths and the base rules (value, object, string, ...).
Result<std::string> json_schema_to_gbnf(std::string_view schema_json, const JsonSchemaLimits& limits = JsonSchemaLimits{},
                                        std::string_view root_rule = "root");

// Any JSON value (OpenAI's json_object mode: an object at the top).
std::string json_object_gbnf();

}  // namespace kiln
