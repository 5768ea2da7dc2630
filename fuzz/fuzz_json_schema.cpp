// JSON Schema -> GBNF on arbitrary text. Beyond "no crash": every schema the converter accepts
// must give a grammar the GBNF parser accepts, and a matcher over it must start.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto gbnf = kiln::json_schema_to_gbnf(text);
  if (!gbnf.is_ok()) {
    if (gbnf.status().message().empty()) std::abort();
    return 0;
  }
  auto g = kiln::parse_gbnf(*gbnf);
  if (!g.is_ok()) std::abort();  // the converter wrote a grammar its own parser refuses
  kiln::GrammarMatcher m(std::make_shared<const kiln::Grammar>(std::move(*g)));
  (void)m.accept_bytes("{\"a\": [1, \"x\"], \"b\": null}");
  return 0;
}
