// OpenAI's request fields, read one by one: each wrong type or unsupported value is a 400 that
// names the field; fields this server does not know are ignored, as OpenAI's own server does.
#include "server/request_parser.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace kiln::server {

namespace {

using nlohmann::json;

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

// The body as a JSON object, or the error saying why not. No exceptions: a parse failure is a value.
std::variant<json, ApiError> parse_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("", "the request body is not valid JSON");
  if (!j.is_object()) return bad("", "the request body must be a JSON object");
  return j;
}

bool present(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

// A string that can go through the C API's NUL-terminated strings.
std::optional<ApiError> read_text(const json& v, const std::string& param, std::string& out) {
  if (!v.is_string()) return bad(param, "'" + param + "' must be a string");
  out = v.get<std::string>();
  if (out.find('\0') != std::string::npos) return bad(param, "'" + param + "' contains a NUL character");
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& j, const char* key, bool& out) {
  if (!present(j, key)) return std::nullopt;
  if (!j.at(key).is_boolean()) return bad(key, std::string("'") + key + "' must be true or false");
  out = j.at(key).get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_number(const json& j, const char* key, double lo, double hi, std::optional<double>& out) {
  if (!present(j, key)) return std::nullopt;
  const json& v = j.at(key);
  if (!v.is_number()) return bad(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "'%s' must be from %g to %g", key, lo, hi);
    return bad(key, msg);
  }
  out = d;
  return std::nullopt;
}

// A whole number in lo..hi; OpenAI clients send integers, and 5.0 is accepted as 5.
std::optional<ApiError> read_int(const json& v, const std::string& param, int64_t lo, int64_t hi, int64_t& out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return bad(param, "'" + param + "' must be at most " + std::to_string(hi));
      out = static_cast<int64_t>(u);
    } else {
      out = v.get<int64_t>();
    }
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
             std::fabs(v.get<double>()) < 9e15) {
    out = static_cast<int64_t>(v.get<double>());
  } else {
    return bad(param, "'" + param + "' must be a whole number");
  }
  if (out < lo) return bad(param, "'" + param + "' must be at least " + std::to_string(lo));
  if (out > hi) return bad(param, "'" + param + "' must be at most " + std::to_string(hi));
  return std::nullopt;
}

// "stop": a string or an array of strings (at most limits.max_stop, none empty).
std::optional<ApiError> read_stop(const json& j, const ParseLimits& limits, std::vector<std::string>& out) {
  if (!present(j, "stop")) return std::nullopt;
  const json& v = j.at("stop");
  std::vector<json> items;
  if (v.is_string()) items.push_back(v);
  else if (v.is_array()) items.assign(v.begin(), v.end());
  else return bad("stop", "'stop' must be a string or an array of strings");
  if (items.size() > limits.max_stop)
    return bad("stop", "'stop' holds " + std::to_string(items.size()) + " strings; at most " +
                           std::to_string(limits.max_stop) + " are allowed");
  for (const json& s : items) {
    std::string text;
    if (auto e = read_text(s, "stop", text)) return e;
    if (text.empty()) return bad("stop", "a 'stop' string is empty");
    out.push_back(std::move(text));
  }
  return std::nullopt;
}

// Fields whose meaning this server cannot give: refused by name rather than ignored.
std::optional<ApiError> refuse_unsupported(const json& j, bool chat) {
  if (present(j, "n")) {
    int64_t n = 0;
    if (auto e = read_int(j.at("n"), "n", 1, std::numeric_limits<int32_t>::max(), n)) return e;
    if (n != 1) return bad("n", "'n' must be 1: this server returns one choice per request");
  }
  if (present(j, "best_of")) {
    int64_t n = 0;
    if (auto e = read_int(j.at("best_of"), "best_of", 1, std::numeric_limits<int32_t>::max(), n)) return e;
    if (n != 1) return bad("best_of", "'best_of' must be 1: this server returns one choice per request");
  }
  // The legacy functions API; tools are read by read_tools (chat only).
  if (present(j, "functions") && !(j.at("functions").is_array() && j.at("functions").empty()))
    return bad("functions", "'functions' (the legacy API) is not supported: use 'tools'");
  if (!chat) {
    for (const char* key : {"tools", "tool_choice"})
      if (present(j, key)) return bad(key, std::string("'") + key + "' is only supported by /v1/chat/completions");
  }
  if (chat) {
    if (present(j, "logprobs") && !(j.at("logprobs").is_boolean() && !j.at("logprobs").get<bool>()))
      return bad("logprobs", "'logprobs' is not supported by this server");
  } else if (present(j, "logprobs") && !(j.at("logprobs").is_number_integer() && j.at("logprobs").get<int64_t>() == 0)) {
    return bad("logprobs", "'logprobs' is not supported by this server");
  }
  if (present(j, "top_logprobs")) return bad("top_logprobs", "'top_logprobs' is not supported by this server");
  if (present(j, "suffix")) return bad("suffix", "'suffix' (insertion) is not supported by this server");
  return std::nullopt;
}

// A JSON value as text for the C API (valid UTF-8: the parser refused anything else).
std::string json_text(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// response_format {"type": "text" | "json_object" | "json_schema", ...} and llama-server's
// top-level "grammar" (GBNF text); at most one of the two constrains the reply.
std::optional<ApiError> read_format(const json& j, GenerationRequest& r) {
  if (present(j, "response_format")) {
    const json& rf = j.at("response_format");
    if (!rf.is_object() || !rf.contains("type") || !rf.at("type").is_string())
      return bad("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = rf.at("type").get<std::string>();
    if (type == "json_object") {
      r.format = ReplyFormat::kJsonObject;
      // llama-server's extension: {"type": "json_object", "schema": {...}}.
      if (present(rf, "schema")) {
        if (!rf.at("schema").is_object() && !rf.at("schema").is_boolean())
          return bad("response_format.schema", "'response_format.schema' must be a JSON Schema (an object)");
        r.format = ReplyFormat::kJsonSchema;
        r.format_text = json_text(rf.at("schema"));
      }
    } else if (type == "json_schema") {
      if (!present(rf, "json_schema") || !rf.at("json_schema").is_object())
        return bad("response_format.json_schema", "'response_format.json_schema' must be an object {name, schema, strict}");
      const json& js = rf.at("json_schema");
      if (present(js, "name") && !js.at("name").is_string())
        return bad("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
      if (present(js, "strict") && !js.at("strict").is_boolean())
        return bad("response_format.json_schema.strict", "'response_format.json_schema.strict' must be true or false");
      if (!present(js, "schema")) {
        r.format = ReplyFormat::kJsonObject;  // OpenAI's schema is optional: any JSON object then
      } else {
        if (!js.at("schema").is_object() && !js.at("schema").is_boolean())
          return bad("response_format.json_schema.schema",
                     "'response_format.json_schema.schema' must be a JSON Schema (an object)");
        r.format = ReplyFormat::kJsonSchema;
        r.format_text = json_text(js.at("schema"));
      }
    } else if (type != "text") {
      return bad("response_format.type",
                 "'response_format.type' must be 'text', 'json_object' or 'json_schema', not '" + type + "'");
    }
  }
  if (present(j, "grammar")) {
    if (r.format != ReplyFormat::kText)
      return bad("grammar", "give 'grammar' or a JSON 'response_format', not both");
    if (auto e = read_text(j.at("grammar"), "grammar", r.format_text)) return e;
    r.format = ReplyFormat::kGrammar;
  }
  return std::nullopt;
}

// llama-server's speculative fields and kiln's per-request prompt lookup.
std::optional<ApiError> read_speculative(const json& j, GenerationRequest& r) {
  int64_t n = 0;
  if (present(j, "lookup")) {
    if (auto e = read_int(j.at("lookup"), "lookup", 0, 16, n)) return e;
    r.lookup = static_cast<int>(n);
  }
  if (present(j, "speculative.n_max")) {
    if (auto e = read_int(j.at("speculative.n_max"), "speculative.n_max", 0, 64, n)) return e;
    r.draft_max = static_cast<int>(n);
  }
  return std::nullopt;
}

// The fields chat and text completions share.
std::optional<ApiError> read_common(const json& j, bool chat, const ParseLimits& limits, GenerationRequest& r) {
  r.chat = chat;
  if (!present(j, "model")) return bad("model", "'model' is required");
  if (auto e = read_text(j.at("model"), "model", r.model)) return e;
  if (auto e = refuse_unsupported(j, chat)) return e;
  if (auto e = read_bool(j, "stream", r.stream)) return e;
  if (present(j, "stream_options")) {
    const json& so = j.at("stream_options");
    if (!so.is_object()) return bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) return bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (auto e = read_bool(so, "include_usage", r.include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  // max_completion_tokens is the newer name; both mean the new tokens at most.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!present(j, key)) continue;
    int64_t n = 0;
    if (auto e = read_int(j.at(key), key, 1, std::numeric_limits<int32_t>::max(), n)) return e;
    if (n > limits.max_tokens)
      return bad(key, std::string("'") + key + "' is " + std::to_string(n) + "; this server allows at most " +
                          std::to_string(limits.max_tokens) + " (kiln serve --max-tokens)");
    r.max_tokens = static_cast<int>(n);
    r.max_tokens_field = key;
  }
  if (auto e = read_number(j, "temperature", 0, 2, r.temperature)) return e;
  if (auto e = read_number(j, "top_p", 0, 1, r.top_p)) return e;
  // OpenAI's penalties over the tokens this request samples, and llama.cpp server's repetition
  // penalty over the last repeat_last_n tokens (prompt included).
  if (auto e = read_number(j, "frequency_penalty", -2, 2, r.frequency_penalty)) return e;
  if (auto e = read_number(j, "presence_penalty", -2, 2, r.presence_penalty)) return e;
  if (present(j, "repeat_penalty")) {
    const json& v = j.at("repeat_penalty");
    const double d = v.is_number() ? v.get<double>() : 0.0;
    if (!v.is_number() || !(d > 0 && d <= std::numeric_limits<float>::max()))
      return bad("repeat_penalty", "'repeat_penalty' must be a number more than 0 (1 is off)");
    r.repeat_penalty = d;
  }
  if (present(j, "repeat_last_n")) {
    int64_t n = 0;
    if (auto e = read_int(j.at("repeat_last_n"), "repeat_last_n", -1, std::numeric_limits<int32_t>::max(), n)) return e;
    r.repeat_last_n = static_cast<int>(n);
  }
  if (present(j, "seed")) {
    int64_t s = 0;
    if (auto e = read_int(j.at("seed"), "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), s))
      return e;
    r.seed = static_cast<uint64_t>(s);
  }
  if (auto e = read_stop(j, limits, r.stop)) return e;
  if (auto e = read_format(j, r)) return e;
  if (auto e = read_speculative(j, r)) return e;
  if (present(j, "user")) {
    std::string user;
    if (auto e = read_text(j.at("user"), "user", user)) return e;
  }
  return std::nullopt;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts joined.
std::optional<ApiError> read_content(const json& v, const std::string& param, std::string& out) {
  if (v.is_string()) return read_text(v, param, out);
  if (!v.is_array()) return bad(param, "'" + param + "' must be a string or an array of text parts");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = param + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object() || !part.contains("type") || part.at("type") != "text")
      return bad(at, "'" + at + "': only parts of type 'text' are supported");
    if (!part.contains("text")) return bad(at + ".text", "'" + at + ".text' is required");
    std::string text;
    if (auto e = read_text(part.at("text"), at + ".text", text)) return e;
    out += text;
  }
  return std::nullopt;
}

// OpenAI's function names: letters, digits, '_' and '-', at most 64.
bool valid_function_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

// "tools": [{"type": "function", "function": {"name", "description", "parameters", "strict"}}],
// "tool_choice", "parallel_tool_calls".
std::optional<ApiError> read_tools(const json& j, GenerationRequest& r) {
  json tools = json::array();
  if (present(j, "tools")) {
    const json& ts = j.at("tools");
    if (!ts.is_array()) return bad("tools", "'tools' must be an array");
    if (ts.size() > 128) return bad("tools", "'tools' holds " + std::to_string(ts.size()) + " tools; at most 128 are allowed");
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      const json& t = ts[i];
      if (!t.is_object() || !t.contains("type") || t.at("type") != "function")
        return bad(at + ".type", "'" + at + ".type' must be 'function'");
      if (!present(t, "function") || !t.at("function").is_object())
        return bad(at + ".function", "'" + at + ".function' must be an object");
      const json& f = t.at("function");
      if (!present(f, "name") || !f.at("name").is_string() || !valid_function_name(f.at("name").get<std::string>()))
        return bad(at + ".function.name",
                   "'" + at + ".function.name' must be 1 to 64 letters, digits, underscores or dashes");
      const std::string name = f.at("name").get<std::string>();
      for (const std::string& n : r.tool_names)
        if (n == name) return bad(at + ".function.name", "the function '" + name + "' is given twice");
      if (present(f, "description") && !f.at("description").is_string())
        return bad(at + ".function.description", "'" + at + ".function.description' must be a string");
      if (present(f, "parameters") && !f.at("parameters").is_object())
        return bad(at + ".function.parameters", "'" + at + ".function.parameters' must be a JSON Schema (an object)");
      if (present(f, "strict") && !f.at("strict").is_boolean())
        return bad(at + ".function.strict", "'" + at + ".function.strict' must be true or false");
      r.tool_names.push_back(name);
      json fn = {{"name", name}};
      if (present(f, "description")) fn["description"] = f.at("description");
      if (present(f, "parameters")) fn["parameters"] = f.at("parameters");
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    if (!tools.empty()) r.tools_json = json_text(tools);
  }
  if (present(j, "tool_choice")) {
    const json& tc = j.at("tool_choice");
    if (tc.is_string()) {
      const std::string c = tc.get<std::string>();
      if (c == "auto") r.tool_choice = ToolChoice::kAuto;
      else if (c == "none") r.tool_choice = ToolChoice::kNone;
      else if (c == "required") r.tool_choice = ToolChoice::kRequired;
      else return bad("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", ...}");
    } else if (tc.is_object() && tc.contains("type") && tc.at("type") == "function" && present(tc, "function") &&
               tc.at("function").is_object() && present(tc.at("function"), "name") &&
               tc.at("function").at("name").is_string()) {
      r.tool_choice = ToolChoice::kFunction;
      r.tool_choice_name = tc.at("function").at("name").get<std::string>();
      bool known = false;
      for (const std::string& n : r.tool_names) known = known || n == r.tool_choice_name;
      if (!known)
        return bad("tool_choice", "'tool_choice' names the function '" + r.tool_choice_name + "', which 'tools' does not hold");
    } else {
      return bad("tool_choice",
                 "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (r.tool_choice != ToolChoice::kNone && r.tool_choice != ToolChoice::kAuto && r.tools_json.empty())
      return bad("tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
  }
  if (auto e = read_bool(j, "parallel_tool_calls", r.parallel_tool_calls)) return e;
  return std::nullopt;
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments"}}]; arguments as OpenAI sends them, JSON text (an object is taken as well).
std::optional<ApiError> read_tool_calls(const json& v, const std::string& at, json& out) {
  if (!v.is_array()) return bad(at, "'" + at + "' must be an array");
  out = json::array();
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string cat = at + "[" + std::to_string(k) + "]";
    const json& c = v[k];
    if (!c.is_object() || !present(c, "function") || !c.at("function").is_object())
      return bad(cat + ".function", "'" + cat + ".function' must be an object");
    const json& f = c.at("function");
    if (!present(f, "name") || !f.at("name").is_string()) return bad(cat + ".function.name", "'" + cat + ".function.name' must be a string");
    json args = json::object();
    if (present(f, "arguments")) {
      if (f.at("arguments").is_string()) {
        const std::string& text = f.at("arguments").get_ref<const std::string&>();
        args = json::parse(text, nullptr, false);
        if (args.is_discarded())
          return bad(cat + ".function.arguments", "'" + cat + ".function.arguments' is not JSON text");
      } else if (f.at("arguments").is_object()) {
        args = f.at("arguments");
      } else {
        return bad(cat + ".function.arguments", "'" + cat + ".function.arguments' must be a string of JSON");
      }
    }
    json call = {{"type", "function"}, {"function", {{"name", f.at("name")}, {"arguments", json_text(args)}}}};
    if (present(c, "id")) {
      if (!c.at("id").is_string()) return bad(cat + ".id", "'" + cat + ".id' must be a string");
      call["id"] = c.at("id");
    }
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

}  // namespace

std::variant<GenerationRequest, ApiError> parse_chat_request(std::string_view body, const ParseLimits& limits) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  GenerationRequest r;
  if (auto e = read_common(j, true, limits, r)) return *e;
  if (!present(j, "messages")) return bad("messages", "'messages' is required");
  const json& ms = j.at("messages");
  if (!ms.is_array() || ms.empty()) return bad("messages", "'messages' must be a non-empty array");
  if (auto e = read_tools(j, r)) return *e;
  json conv = json::array();  // the messages for kiln_session_chat_json
  bool tool_turns = false;
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) return bad(at, "'" + at + "' must be an object");
    if (!m.contains("role") || !m.at("role").is_string()) return bad(at + ".role", "'" + at + ".role' must be a string");
    ChatMessage cm;
    cm.role = m.at("role").get<std::string>();
    // "developer" is OpenAI's newer name for the system role.
    if (cm.role == "developer") cm.role = "system";
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool")
      return bad(at + ".role", "'" + at + ".role' must be 'system', 'developer', 'user', 'assistant' or 'tool'");
    json out = {{"role", cm.role}};
    json calls;
    if (present(m, "tool_calls")) {
      if (cm.role != "assistant") return bad(at + ".tool_calls", "only an assistant message has 'tool_calls'");
      if (auto e = read_tool_calls(m.at("tool_calls"), at + ".tool_calls", calls)) return *e;
      if (!calls.empty()) {
        out["tool_calls"] = calls;
        cm.tool_calls = json_text(calls);
        tool_turns = true;
      }
    }
    if (cm.role == "tool") {
      tool_turns = true;
      if (present(m, "tool_call_id")) {
        std::string id;
        if (auto e = read_text(m.at("tool_call_id"), at + ".tool_call_id", id)) return *e;
        out["tool_call_id"] = id;
      }
    }
    if (present(m, "name")) {
      std::string name;
      if (auto e = read_text(m.at("name"), at + ".name", name)) return *e;
      out["name"] = name;
    }
    // An assistant's message that calls tools may have no content.
    if (!present(m, "content")) {
      if (cm.tool_calls.empty()) return bad(at + ".content", "'" + at + ".content' is required");
    } else if (auto e = read_content(m.at("content"), at + ".content", cm.content)) {
      return *e;
    }
    out["content"] = cm.content;
    conv.push_back(std::move(out));
    r.messages.push_back(std::move(cm));
  }
  if (!r.tools_json.empty() || tool_turns) {
    json req = {{"messages", conv}};
    // tool_choice none too: the template still shows the tools (the conversation may hold calls
    // to them); the reply is then not read for calls.
    if (!r.tools_json.empty()) req["tools"] = json::parse(r.tools_json);
    r.chat_json = json_text(req);
  }
  return r;
}

std::variant<GenerationRequest, ApiError> parse_completion_request(std::string_view body, const ParseLimits& limits) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  GenerationRequest r;
  if (auto e = read_common(j, false, limits, r)) return *e;
  if (!present(j, "prompt")) return bad("prompt", "'prompt' is required");
  const json& p = j.at("prompt");
  // One prompt: a string, or an array holding one string (more would be several choices).
  if (p.is_array()) {
    if (p.size() != 1 || !p[0].is_string())
      return bad("prompt", "'prompt' must be a string or an array of one string (token arrays and batches are not supported)");
    if (auto e = read_text(p[0], "prompt", r.prompt)) return *e;
  } else if (auto e = read_text(p, "prompt", r.prompt)) {
    return *e;
  }
  if (auto e = read_bool(j, "echo", r.echo)) return *e;
  return r;
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  TokenizeRequest r;
  if (present(j, "model"))
    if (auto e = read_text(j.at("model"), "model", r.model)) return *e;
  if (!present(j, "content")) return bad("content", "'content' is required");
  if (auto e = read_text(j.at("content"), "content", r.content)) return *e;
  if (auto e = read_bool(j, "add_special", r.add_special)) return *e;
  if (auto e = read_bool(j, "parse_special", r.parse_special)) return *e;
  if (auto e = read_bool(j, "with_pieces", r.with_pieces)) return *e;
  return r;
}

std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  DetokenizeRequest r;
  if (present(j, "model"))
    if (auto e = read_text(j.at("model"), "model", r.model)) return *e;
  if (!present(j, "tokens") || !j.at("tokens").is_array()) return bad("tokens", "'tokens' must be an array of token ids");
  for (size_t i = 0; i < j.at("tokens").size(); ++i) {
    int64_t id = 0;
    if (auto e = read_int(j.at("tokens")[i], "tokens[" + std::to_string(i) + "]", 0, std::numeric_limits<int32_t>::max(), id))
      return *e;
    r.tokens.push_back(static_cast<int32_t>(id));
  }
  return r;
}

}  // namespace kiln::server
