// OpenAI's request fields, read one by one: each wrong type or unsupported value is a 400 that
// names the field; fields this server does not know are ignored, as OpenAI's own server does.
#include "server/request_parser.h"

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
  for (const char* key : {"tools", "functions"}) {
    if (present(j, key) && !(j.at(key).is_array() && j.at(key).empty()))
      return bad(key, std::string("'") + key + "' is not supported: this server does not implement tool calling");
  }
  if (present(j, "tool_choice") && !(j.at("tool_choice").is_string() && j.at("tool_choice") == "none"))
    return bad("tool_choice", "'tool_choice' is not supported: this server does not implement tool calling");
  if (present(j, "response_format")) {
    const json& rf = j.at("response_format");
    if (!rf.is_object() || !rf.contains("type") || !rf.at("type").is_string())
      return bad("response_format", "'response_format' must be an object with a 'type'");
    if (rf.at("type") != "text")
      return bad("response_format", "'response_format' of type '" + rf.at("type").get<std::string>() +
                                        "' is not supported: this server does not implement constrained decoding");
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
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) return bad(at, "'" + at + "' must be an object");
    if (!m.contains("role") || !m.at("role").is_string()) return bad(at + ".role", "'" + at + ".role' must be a string");
    ChatMessage cm;
    cm.role = m.at("role").get<std::string>();
    // "developer" is OpenAI's newer name for the system role.
    if (cm.role == "developer") cm.role = "system";
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
      return bad(at + ".role", "'" + at + ".role' must be 'system', 'developer', 'user' or 'assistant'" +
                                   (cm.role == "tool" ? " (tool calling is not implemented)" : ""));
    if (present(m, "tool_calls")) return bad(at + ".tool_calls", "tool calling is not implemented");
    if (!present(m, "content")) return bad(at + ".content", "'" + at + ".content' is required");
    if (auto e = read_content(m.at("content"), at + ".content", cm.content)) return *e;
    r.messages.push_back(std::move(cm));
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
