// Field by field as OpenAI's API reference shows its objects (chat.completion, chat.completion.chunk,
// text_completion); clients such as the official openai package parse exactly these.
#include "server/openai_format.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace kiln::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json timings_json(const Usage& u) {
  json t = {{"prompt_n", u.prompt_tokens},
            {"cache_n", u.cached_tokens},
            {"predicted_n", u.completion_tokens},
            {"ttft_ms", u.ttft_ms},
            {"predicted_per_second", u.tokens_per_second}};
  // llama-server's names for speculative decoding's counts, when it ran.
  if (u.drafted_tokens > 0) {
    t["draft_n"] = u.drafted_tokens;
    t["draft_n_accepted"] = u.accepted_tokens;
  }
  return t;
}

std::string new_tool_call_id() {
  static const uint64_t base = std::random_device{}() * 0xC2B2AE3D27D4EB4Full;
  static std::atomic<uint64_t> counter{0};
  char buf[40];
  std::snprintf(buf, sizeof buf, "call_%016llx", static_cast<unsigned long long>(base + counter.fetch_add(1)));
  return buf;
}

ResponseId new_response_id(bool chat, const std::string& model) {
  // Unique within a process run and unlikely to repeat across runs: a random base and a counter.
  static const uint64_t base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  static std::atomic<uint64_t> counter{0};
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(base + counter.fetch_add(1)));
  ResponseId r;
  r.id = buf;
  r.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.model = model;
  return r;
}

json completion_body(const ResponseId& id, bool chat, const std::string& text, const std::string& finish_reason,
                     const Usage& usage, const json* tool_calls) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}};
  if (chat && tool_calls != nullptr && !tool_calls->empty()) {
    choice["message"] = {{"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)},
                         {"tool_calls", *tool_calls}};
    choice["logprobs"] = nullptr;
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    choice["logprobs"] = nullptr;
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  return {{"id", id.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array({choice})},
          {"usage", usage_json(usage)},
          {"timings", timings_json(usage)}};
}

json chunk_body(const ResponseId& id, bool chat, const std::string* role, const std::string& text,
                const std::string& finish_reason) {
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (chat) {
    json delta = json::object();
    if (role != nullptr) delta["role"] = *role;
    if (!text.empty() || role != nullptr) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", id.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array({choice})}};
}

json tool_call_chunk_body(const ResponseId& id, const json& tool_call_delta) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  choice["delta"] = {{"tool_calls", json::array({tool_call_delta})}};
  return {{"id", id.id},
          {"object", "chat.completion.chunk"},
          {"created", id.created},
          {"model", id.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array({choice})}};
}

json usage_chunk_body(const ResponseId& id, bool chat, const Usage& usage) {
  return {{"id", id.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array()},
          {"usage", usage_json(usage)},
          {"timings", timings_json(usage)}};
}

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace kiln::server
