// The JSON bodies OpenAI's API sends: errors, chat and text completions, their stream chunks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/request_parser.h"

namespace kiln::server {

// Serializes without throwing: bytes that are not UTF-8 become U+FFFD.
std::string dump(const nlohmann::json& j);

nlohmann::json error_body(const ApiError& e);

struct Usage {
  int prompt_tokens = 0, completion_tokens = 0;
  // Beyond OpenAI's fields, as llama-server's "timings": the prompt tokens found in the slot's
  // KV cache, the time to the first token, the decode speed.
  int cached_tokens = 0;
  double ttft_ms = 0, tokens_per_second = 0;
  int drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding
};
nlohmann::json usage_json(const Usage& u);
nlohmann::json timings_json(const Usage& u);

// One response's identity: "chatcmpl-..." or "cmpl-...", its creation time and model.
struct ResponseId {
  std::string id;
  int64_t created = 0;
  std::string model;
};
ResponseId new_response_id(bool chat, const std::string& model);

// finish_reason is "stop", "length" or "tool_calls". `tool_calls` (chat; null or empty: none): the
// message's calls [{"id", "type": "function", "function": {"name", "arguments"}}]; its content is
// then null when `text` is empty.
nlohmann::json completion_body(const ResponseId& id, bool chat, const std::string& text, const std::string& finish_reason,
                               const Usage& usage, const nlohmann::json* tool_calls = nullptr);
// A chat stream chunk whose delta is one tool call's part: {"index", "id", "type", "function":
// {"name", "arguments": ""}} first, then {"index", "function": {"arguments": more}}.
nlohmann::json tool_call_chunk_body(const ResponseId& id, const nlohmann::json& tool_call_delta);
// "call_" and 16 hex digits, unique within the process.
std::string new_tool_call_id();
// A stream chunk: the first chat chunk carries the role; `finish_reason` empty: null.
nlohmann::json chunk_body(const ResponseId& id, bool chat, const std::string* role, const std::string& text,
                          const std::string& finish_reason);
// The chunk stream_options.include_usage adds before [DONE]: no choices, the usage.
nlohmann::json usage_chunk_body(const ResponseId& id, bool chat, const Usage& usage);
// "data: {json}\n\n".
std::string sse_event(const nlohmann::json& j);

}  // namespace kiln::server
