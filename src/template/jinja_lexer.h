// Splits a Jinja template into tokens the way Jinja2's lexer does with Hugging Face's settings
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off): template text, tag delimiters
// with their whitespace control already applied, and the tokens inside tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::jinja {

enum class Tok : uint8_t {
  kData,        // template text, whitespace control applied
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOp,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ; ( ) [ ] { }
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
  int col = 1;
};

// Errors name the line and column ("line 3, column 7: ...").
Result<std::vector<Token>> lex_template(std::string_view source);

// "line L, column C" for messages.
std::string where(int line, int col);

}  // namespace kiln::jinja
