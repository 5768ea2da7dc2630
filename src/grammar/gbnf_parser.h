// llama.cpp's GBNF grammar text -> a compiled Grammar (grammar.h). Errors name the line and
// column and what was expected; a left-recursive rule, an undefined rule, a missing `root` and a
// grammar past the limits are refused.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kiln {

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = GrammarLimits{});

}  // namespace kiln
