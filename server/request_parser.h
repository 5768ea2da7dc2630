// The request parser: an HTTP body (JSON) to a validated request, or an OpenAI-style error that
// names the field. It only reads the body; the server checks what needs a model (its name, the
// prompt's length in tokens). The fuzz target fuzz/fuzz_serve_request.cpp calls it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::server {

// An OpenAI error object: {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::string tool_calls;  // an assistant's calls as JSON text (for the slot's cache key); empty: none
};

// What the reply must be: free text, any JSON object (response_format json_object), JSON valid
// against a schema (json_schema, or json_object with llama-server's "schema"), or text a GBNF
// grammar allows (llama-server's "grammar" field).
enum class ReplyFormat { kText, kJsonObject, kJsonSchema, kGrammar };

// tool_choice: "auto" (the model chooses), "none", "required" (a call to some tool), or a named
// function ("function", tool_choice_name).
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

// POST /v1/chat/completions (messages) or POST /v1/completions (prompt).
struct GenerationRequest {
  bool chat = true;
  std::string model;
  std::vector<ChatMessage> messages;
  std::string prompt;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  int max_tokens = 0;                 // 0: not given (the server's default)
  std::string max_tokens_field;       // which name gave it: "max_tokens" or "max_completion_tokens"
  std::optional<double> temperature;  // not given: the runtime's default sampler
  std::optional<double> top_p;
  std::optional<uint64_t> seed;
  std::optional<double> frequency_penalty;  // OpenAI's, -2..2
  std::optional<double> presence_penalty;   // OpenAI's, -2..2
  std::optional<double> repeat_penalty;     // llama.cpp server's: > 0, 1 is off
  std::optional<int> repeat_last_n;         // llama.cpp server's: -1 every token, 0 off
  std::vector<std::string> stop;
  bool echo = false;                  // /v1/completions: the prompt first
  ReplyFormat format = ReplyFormat::kText;
  std::string format_text;            // the schema's JSON text or the GBNF text
  // Tool calling (chat): the tools array's JSON text (empty: no tools), their names, the choice.
  std::string tools_json;
  std::vector<std::string> tool_names;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;
  bool parallel_tool_calls = true;
  // The conversation for kiln_session_chat_json when it holds tools, tool calls or tool turns:
  // {"messages": [...], "tools": [...]}; empty: the plain messages above are enough.
  std::string chat_json;
  // Speculative decoding per request: prompt lookup's n-gram (0: off; kiln's "lookup") and the
  // most tokens drafted per step (llama-server's "speculative.n_max"; 0: the default).
  int lookup = 0;
  int draft_max = 0;
};

// POST /tokenize {"content", "add_special", "parse_special", "with_pieces"} (llama-server's shape).
struct TokenizeRequest {
  std::string model;  // empty: the first model
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

// POST /detokenize {"tokens": [...]}.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

struct ParseLimits {
  int max_tokens = 4096;  // a larger max_tokens is refused, naming this cap
  size_t max_stop = 4;    // OpenAI's limit on stop strings
};

std::variant<GenerationRequest, ApiError> parse_chat_request(std::string_view body, const ParseLimits& limits);
std::variant<GenerationRequest, ApiError> parse_completion_request(std::string_view body, const ParseLimits& limits);
std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body);
std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(std::string_view body);

}  // namespace kiln::server
