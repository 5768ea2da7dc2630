// Tool calling's model side: which syntax a chat template asks its model to write a call in (read
// from the template's text), and the GBNF that makes the model write a call in that syntax whose
// arguments are valid against the tool's parameter schema (OpenAI's tool_choice "required" or a
// named function). The server parses the calls back out of the text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

enum class ToolCallFormat {
  kNone,     // the template shows no tool-call syntax
  kHermes,   // Qwen2.5/Qwen3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  kLlama3,   // Llama 3.1-3.3: {"name": ..., "parameters": {...}}
  kMistral,  // Mistral v3+: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
};

ToolCallFormat tool_call_format_of(std::string_view template_source);
// "hermes", "llama3", "mistral", "" for kNone.
const char* tool_call_format_name(ToolCallFormat f);

// GBNF for one call (or, when `parallel`, one or more) to one of `tools` (OpenAI's tools array:
// [{"type": "function", "function": {"name", "parameters"}}]), or only to the one named `only`
// when not empty. A tool without parameters takes any JSON object; an unsupported schema keyword
// is an error naming the tool and the keyword.
Result<std::string> tool_call_gbnf(ToolCallFormat format, const nlohmann::json& tools, const std::string& only,
                                   bool parallel);

}  // namespace kiln
