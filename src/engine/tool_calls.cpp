#include "engine/tool_calls.h"

#include <map>
#include <vector>

#include "grammar/json_schema.h"

namespace kiln {

ToolCallFormat tool_call_format_of(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  // Llama 3.1-3.3 ask for {"name": ..., "parameters": ...} in the ipython role's templates.
  if (has("<|python_tag|>") || (has("ipython") && has("\"parameters\""))) return ToolCallFormat::kLlama3;
  return ToolCallFormat::kNone;
}

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kNone: break;
  }
  return "";
}

namespace {

// A GBNF string literal of `s`.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Result<std::string> tool_call_gbnf(ToolCallFormat format, const nlohmann::json& tools, const std::string& only,
                                   bool parallel) {
  if (format == ToolCallFormat::kNone)
    return invalid_argument("tool calls: the model's chat template shows no tool-call syntax kiln knows");
  if (!tools.is_array() || tools.empty()) return invalid_argument("tool calls: no tools");
  // Each tool's arguments as its own rule; the converters' shared base rules (space, string, ...)
  // are defined once, and a name two tools define differently is an error.
  std::map<std::string, std::string> rules;
  std::vector<std::string> order;
  std::string calls;
  const std::string args_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& t = tools[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      return invalid_argument("tool calls: tools[" + std::to_string(i) + "] has no function name");
    const std::string name = t["function"]["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const nlohmann::json params =
        t["function"].contains("parameters") && !t["function"]["parameters"].is_null() ? t["function"]["parameters"]
                                                                                       : nlohmann::json{{"type", "object"}, {"additionalProperties", true}};
    const std::string root = "tool" + std::to_string(i) + "-args";
    auto g = json_schema_to_gbnf(params.dump(), JsonSchemaLimits{}, root);
    if (!g) return g.status().with_context("tools[" + std::to_string(i) + "] (" + name + ").function.parameters");
    size_t at = 0;
    while (at < g->size()) {
      const size_t end = std::min(g->find('\n', at), g->size());
      const std::string line = g->substr(at, end - at);
      at = end + 1;
      const size_t sep = line.find(" ::= ");
      if (sep == std::string::npos) continue;
      const std::string rule = line.substr(0, sep), body = line.substr(sep + 5);
      if (rule == "root" || rule == "call" || rule == "tool-call")
        return invalid_argument("tool calls: tools[" + std::to_string(i) + "] (" + name + "): rename its $defs entry '" +
                                rule + "' (a name the call's grammar uses)");
      auto [it, fresh] = rules.emplace(rule, body);
      if (fresh) order.push_back(rule);
      else if (it->second != body)
        return invalid_argument("tool calls: tools[" + std::to_string(i) + "] (" + name + "): its schema's rule '" +
                                rule + "' clashes with another tool's; rename its $defs");
    }
    const std::string call = literal("{\"name\": \"") + " " + literal(name) + " " +
                             literal("\", \"" + args_key + "\": ") + " " + root + " " + literal("}");
    calls += (calls.empty() ? "" : " | ") + std::string("(") + call + ")";
  }
  if (calls.empty()) return invalid_argument("tool calls: no tool is named '" + only + "'");
  std::string top;
  switch (format) {
    case ToolCallFormat::kHermes:
      top = "root ::= tool-call" + std::string(parallel ? " (\"\\n\" tool-call)*" : "") +
            "\ntool-call ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::kLlama3:
      top = "root ::= call" + std::string(parallel ? " (\"; \" call)*" : "") + "\n";
      break;
    case ToolCallFormat::kMistral:
      top = "root ::= \"[TOOL_CALLS][\" call" + std::string(parallel ? " (\", \" call)*" : "") + " \"]\"\n";
      break;
    case ToolCallFormat::kNone: break;
  }
  std::string out = top + "call ::= " + calls + "\n";
  for (const std::string& r : order) out += r + " ::= " + rules[r] + "\n";
  return out;
}

}  // namespace kiln
