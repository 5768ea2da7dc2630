// JSON Schema -> GBNF: each keyword's grammar accepts the JSON texts the schema allows and refuses
// the ones it does not; what is not supported is an error naming the keyword and where it is.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace kiln {
namespace {

class Schema {
 public:
  explicit Schema(const std::string& schema) {
    auto text = json_schema_to_gbnf(schema);
    EXPECT_TRUE(text.is_ok()) << text.status().message();
    if (!text.is_ok()) return;
    gbnf_ = *text;
    auto g = parse_gbnf(gbnf_);
    EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf_;
    if (g.is_ok()) grammar_ = std::make_shared<const Grammar>(std::move(*g));
  }
  bool accepts(std::string_view json) const {
    if (!grammar_) return false;
    GrammarMatcher m(grammar_);
    return m.accept_bytes(json) && m.is_complete();
  }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  std::shared_ptr<const Grammar> grammar_;
};

std::string error_of(const std::string& schema) {
  auto text = json_schema_to_gbnf(schema);
  EXPECT_FALSE(text.is_ok()) << *text;
  return text.is_ok() ? "" : text.status().message();
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  Schema s(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                "email":{"type":"string"}},"required":["name"],"additionalProperties":false})");
  EXPECT_TRUE(s.accepts(R"({"name": "Ann"})"));
  EXPECT_TRUE(s.accepts(R"({"name": "Ann", "age": 31})"));
  EXPECT_TRUE(s.accepts(R"({"name":"Ann","age":31,"email":"a@b.c"})"));
  EXPECT_TRUE(s.accepts(R"({"name":"Ann","email":"a@b.c"})"));
  EXPECT_FALSE(s.accepts(R"({"age": 31})"));                 // name is required
  EXPECT_FALSE(s.accepts(R"({"name":"Ann","other":1})"));    // no additional properties
  EXPECT_FALSE(s.accepts(R"({"name":"Ann","age":"31"})"));   // age is an integer
  Schema none(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}}})");
  EXPECT_TRUE(none.accepts("{}"));
  EXPECT_TRUE(none.accepts(R"({"b": null})"));
  EXPECT_TRUE(none.accepts(R"({"a": true, "b": null})"));
  EXPECT_FALSE(none.accepts(R"({, "b": null})"));
}

TEST(JsonSchema, AdditionalPropertiesAllowedOrTyped) {
  Schema any(R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":true})");
  EXPECT_TRUE(any.accepts(R"({"id": 1, "x": [1, {"y": null}], "z": "w"})"));
  Schema typed(R"({"type":"object","additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(typed.accepts(R"({"a": 1.5, "b": -2})"));
  EXPECT_FALSE(typed.accepts(R"({"a": "x"})"));
}

TEST(JsonSchema, ArraysWithItemCounts) {
  Schema s(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(s.accepts("[1]"));
  EXPECT_TRUE(s.accepts("[1, 2]"));
  EXPECT_TRUE(s.accepts("[1,2,3]"));
  EXPECT_FALSE(s.accepts("[1,2,3,4]"));
  EXPECT_FALSE(s.accepts("[1,\"2\"]"));
  Schema any(R"({"type":"array"})");
  EXPECT_TRUE(any.accepts("[]"));
  EXPECT_TRUE(any.accepts("[1, \"a\", [null]]"));
}

TEST(JsonSchema, TuplesByPrefixItems) {
  // A point and an optional label, nothing after.
  Schema s(R"({"type":"array","prefixItems":[{"type":"number"},{"type":"number"},{"type":"string"}],"items":false,"minItems":2})");
  EXPECT_TRUE(s.accepts("[1, 2]"));
  EXPECT_TRUE(s.accepts(R"([1.5, -2, "home"])"));
  EXPECT_FALSE(s.accepts("[1]"));
  EXPECT_FALSE(s.accepts(R"([1, "2"])"));
  EXPECT_FALSE(s.accepts(R"([1, 2, "a", 3])"));
  // The rest typed by items, with bounds counting the prefix.
  Schema rest(R"({"prefixItems":[{"type":"string"}],"items":{"type":"integer"},"maxItems":3})");
  EXPECT_TRUE(rest.accepts("[]"));
  EXPECT_TRUE(rest.accepts(R"(["a"])"));
  EXPECT_TRUE(rest.accepts(R"(["a", 1, 2])"));
  EXPECT_FALSE(rest.accepts(R"(["a", 1, 2, 3])"));
  EXPECT_FALSE(rest.accepts("[1]"));
  EXPECT_FALSE(rest.accepts(R"(["a", "b"])"));
  // Without items: anything after the prefix.
  Schema open(R"({"prefixItems":[{"const":"cmd"}]})");
  EXPECT_TRUE(open.accepts(R"(["cmd", {"x": 1}, null])"));
  EXPECT_FALSE(open.accepts(R"(["other"])"));
  // uniqueItems false asks nothing.
  Schema unique(R"({"type":"array","items":{"type":"integer"},"uniqueItems":false})");
  EXPECT_TRUE(unique.accepts("[1, 1]"));
}

TEST(JsonSchema, AllOfMergesObjectSchemas) {
  // A base object by reference, extended: llama.cpp's converter merges allOf the same way.
  Schema s(R"({"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},
               "allOf":[{"$ref":"#/$defs/base"},{"properties":{"tag":{"enum":["a","b"]}},"required":["tag"]}],
               "additionalProperties":false})");
  EXPECT_TRUE(s.accepts(R"({"id": 1, "tag": "a"})"));
  EXPECT_FALSE(s.accepts(R"({"id": 1})"));
  EXPECT_FALSE(s.accepts(R"({"tag": "a"})"));
  EXPECT_FALSE(s.accepts(R"({"id": 1, "tag": "c"})"));
  EXPECT_FALSE(s.accepts(R"({"id": 1, "tag": "a", "x": 0})"));
  // One subschema alone is itself, whatever its type.
  Schema one(R"({"allOf":[{"type":"string","maxLength":2}]})");
  EXPECT_TRUE(one.accepts(R"("ab")"));
  EXPECT_FALSE(one.accepts(R"("abc")"));
}

TEST(JsonSchema, EnumConstAndTypeLists) {
  Schema e(R"({"enum":["red","green",3,null]})");
  EXPECT_TRUE(e.accepts("\"red\""));
  EXPECT_TRUE(e.accepts("3"));
  EXPECT_TRUE(e.accepts("null"));
  EXPECT_FALSE(e.accepts("\"blue\""));
  Schema c(R"({"type":"string","const":"v1"})");
  EXPECT_TRUE(c.accepts("\"v1\""));
  EXPECT_FALSE(c.accepts("\"v2\""));
  Schema t(R"({"type":["string","null"]})");
  EXPECT_TRUE(t.accepts("\"x\""));
  EXPECT_TRUE(t.accepts("null"));
  EXPECT_FALSE(t.accepts("1"));
}

TEST(JsonSchema, StringLengthsPatternsAndFormats) {
  Schema len(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(len.accepts("\"a\""));
  EXPECT_TRUE(len.accepts("\"ab\""));
  EXPECT_TRUE(len.accepts("\"a\\nb\""));  // an escape is one character
  EXPECT_FALSE(len.accepts("\"abcd\""));
  Schema pat(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}(x|yz)?$"})");
  EXPECT_TRUE(pat.accepts("\"AB-123\""));
  EXPECT_TRUE(pat.accepts("\"AB-1234yz\""));
  EXPECT_FALSE(pat.accepts("\"AB-12\""));
  EXPECT_FALSE(pat.accepts("\"ab-123\""));
  Schema unanchored(R"({"type":"string","pattern":"b+"})");
  EXPECT_TRUE(unanchored.accepts("\"abbc\""));
  EXPECT_FALSE(unanchored.accepts("\"ac\""));
  Schema date(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(date.accepts("\"2024-02-29\""));
  EXPECT_FALSE(date.accepts("\"2024-13-01\""));
  Schema time(R"({"type":"string","format":"time"})");
  EXPECT_TRUE(time.accepts("\"23:59:60Z\"") == false);
  EXPECT_TRUE(time.accepts("\"23:59:59+02:00\""));
  Schema dt(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(dt.accepts("\"2024-01-02T03:04:05.123Z\""));
  Schema uuid(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(uuid.accepts("\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_FALSE(uuid.accepts("\"123e4567-e89b-12d3-a456-42661417400\""));
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  const std::vector<std::pair<std::string, std::pair<int, int>>> cases = {
      {R"({"type":"integer","minimum":0,"maximum":150})", {0, 150}},
      {R"({"type":"integer","minimum":-37,"maximum":1234})", {-37, 1234}},
      {R"({"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":-1})", {-4, -2}},
      {R"({"type":"integer","minimum":95,"maximum":105})", {95, 105}},
  };
  for (const auto& [schema, bounds] : cases) {
    Schema s(schema);
    for (int v = -1300; v <= 1300; ++v)
      ASSERT_EQ(s.accepts(std::to_string(v)), v >= bounds.first && v <= bounds.second) << schema << " " << v;
    EXPECT_FALSE(s.accepts("01"));
  }
  Schema open(R"({"type":"integer","minimum":42})");
  EXPECT_FALSE(open.accepts("41"));
  EXPECT_TRUE(open.accepts("42"));
  EXPECT_TRUE(open.accepts("99"));
  EXPECT_TRUE(open.accepts("100"));
  EXPECT_TRUE(open.accepts("123456789"));
  EXPECT_FALSE(open.accepts("-50"));
  Schema upper(R"({"type":"integer","maximum":-10})");
  EXPECT_TRUE(upper.accepts("-10"));
  EXPECT_TRUE(upper.accepts("-1000"));
  EXPECT_FALSE(upper.accepts("-9"));
  EXPECT_FALSE(upper.accepts("5"));
}

TEST(JsonSchema, NumberBounds) {
  Schema s(R"({"type":"number","minimum":0,"maximum":1})");
  EXPECT_TRUE(s.accepts("0"));
  EXPECT_TRUE(s.accepts("0.75"));
  EXPECT_TRUE(s.accepts("1"));
  EXPECT_TRUE(s.accepts("1.0"));
  EXPECT_FALSE(s.accepts("1.5"));
  EXPECT_FALSE(s.accepts("-0.5"));
  EXPECT_FALSE(s.accepts("2"));
  Schema plain(R"({"type":"number"})");
  EXPECT_TRUE(plain.accepts("-1.5e10"));
}

TEST(JsonSchema, AnyOfOneOfAndLocalRefs) {
  Schema s(R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},
                "required":["x","y"]},
               "node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                "required":["v","next"]}},
              "type":"object","properties":{"a":{"$ref":"#/$defs/pt"},"b":{"oneOf":[{"type":"string"},{"type":"integer"}]},
              "list":{"$ref":"#/$defs/node"}},"required":["a","b","list"]})");
  EXPECT_TRUE(s.accepts(R"({"a": {"x": 1, "y": 2.5}, "b": "s", "list": {"v": 1, "next": {"v": 2, "next": null}}})"));
  EXPECT_TRUE(s.accepts(R"({"a": {"x": 1, "y": 2}, "b": 7, "list": {"v": 1, "next": null}})"));
  EXPECT_FALSE(s.accepts(R"({"a": {"x": 1}, "b": 7, "list": {"v": 1, "next": null}})"));
  EXPECT_FALSE(s.accepts(R"({"a": {"x": 1, "y": 2}, "b": true, "list": {"v": 1, "next": null}})"));
}

TEST(JsonSchema, AnyJsonValueForJsonObjectMode) {
  auto g = parse_gbnf(json_object_gbnf());
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto grammar = std::make_shared<const Grammar>(std::move(*g));
  GrammarMatcher m(grammar);
  EXPECT_TRUE(m.accept_bytes(R"({"a": [1, 2.5, "x\u00e9", {"b": null}], "c": false})"));
  EXPECT_TRUE(m.is_complete());
  GrammarMatcher top(grammar);
  EXPECT_FALSE(top.accept_bytes("[1]"));  // json_object: an object at the top
}

TEST(JsonSchema, UnsupportedKeywordsAndBadSchemasAreErrors) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})"),
            "json schema: at /properties/a: 'uniqueItems': true is not supported (a grammar cannot remember the items before)");
  EXPECT_EQ(error_of(R"({"allOf":[{"type":"string"},{"maxLength":3}]})"),
            "json schema: at /allOf/0: 'allOf' is supported over object schemas only ('type' \"string\")");
  EXPECT_EQ(error_of(R"({"allOf":[{"properties":{"a":{}}},{"properties":{"a":{"type":"string"}}}]})"),
            "json schema: at /allOf/1: property 'a' is in two parts of 'allOf' (merging them is not supported)");
  EXPECT_EQ(error_of(R"({"type":"array","items":[{"type":"string"}]})"),
            "json schema: at the top: 'items' as an array (draft 7's tuple) is not supported: write it as 'prefixItems'");
  EXPECT_EQ(error_of(R"({"prefixItems":[{"type":"string"}],"items":false,"minItems":2})"),
            "json schema: at the top: 'minItems' 2 is more than the 1 prefixItems 'items': false allows");
  EXPECT_EQ(error_of(R"({"type":"object","patternProperties":{"^x":{}}})"),
            "json schema: at the top: 'patternProperties' is not supported");
  EXPECT_EQ(error_of(R"({"type":"string","format":"email"})"),
            "json schema: at the top: 'format' email is not supported (date, time, date-time and uuid are)");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^(?=a)b$"})"),
            "json schema: at the top: 'pattern' ^(?=a)b$: at offset 2: lookarounds and named groups are not supported");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"a+?"})"),
            "json schema: at the top: 'pattern' a+?: at offset 2: lazy and possessive quantifiers are not supported");
  EXPECT_EQ(error_of(R"({"$ref":"https://example.com/s.json"})"),
            "json schema: at the top: '$ref' https://example.com/s.json: only local references (#/...) are supported");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"), "json schema: at the top: '$ref' #/$defs/missing points at nothing in this schema");
  EXPECT_EQ(error_of(R"({"type":"object","anyOf":[{"required":["a"]}]})"),
            "json schema: at the top: 'anyOf' beside other keywords is not supported");
  EXPECT_EQ(error_of(R"({"type":"number","minimum":-1.5})"),
            "json schema: at the top: 'minimum' on a number (not an integer) is supported only as a whole number >= 0");
  EXPECT_EQ(error_of(R"({"type":"widget"})"), "json schema: at the top: 'type' widget is not a JSON Schema type");
  EXPECT_EQ(error_of(R"({"type":"object","required":["a"]})"), "json schema: at the top: required property 'a' is not in 'properties'");
  EXPECT_EQ(error_of(R"({"type":"array","maxItems":100000})"),
            "json schema: at the top: 'maxItems' must be a whole number from 0 to 1000");
  EXPECT_EQ(error_of("{\"type\": "), "json schema: the text is not JSON");
  EXPECT_EQ(error_of("false"), "json schema: at the top: the schema false allows no value");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 100; ++i) deep += "}";
  std::string path;
  for (int i = 0; i < 65; ++i) path += "/items";
  EXPECT_EQ(error_of(deep), "json schema: at " + path + ": subschemas nest deeper than 64 — the limit");
}

TEST(JsonSchema, AnnotationsAreIgnoredAndOutputParsesAsJson) {
  Schema s(R"({"title":"T","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema",
              "type":"object","properties":{"q":{"type":"string","title":"Q","default":"x","examples":["y"]}},"required":["q"]})");
  EXPECT_TRUE(s.accepts(R"({"q": "hi"})"));
  EXPECT_TRUE(nlohmann::json::accept(R"({"q": "hi"})"));
}

}  // namespace
}  // namespace kiln
