// kiln serve's request parser (server/request_parser.h): any body gives a request or an error
// object, never a crash; a request that parses holds what the server relies on. The same bytes,
// read as a model's reply, go through the tool-call parser (server/tool_call_parser.h) of each
// syntax, fed in pieces: never a crash, and every call's parts name a call already started.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/request_parser.h"
#include "server/tool_call_parser.h"

namespace {

void check(const kiln::server::ApiError& e) {
  if (e.status < 400 || e.status > 599 || e.message.empty()) std::abort();
}

bool is_json(const std::string& s) { return !nlohmann::json::parse(s, nullptr, false).is_discarded(); }

void check_reply(std::string_view text) {
  using kiln::server::ToolCallEvent;
  for (const char* format : {"hermes", "llama3", "mistral", ""}) {
    kiln::server::ToolCallParser p(format);
    int started = 0;
    std::string content;
    auto take = [&](const std::vector<ToolCallEvent>& events) {
      for (const ToolCallEvent& e : events) {
        if (e.kind == ToolCallEvent::kCallStart && e.index != started++) std::abort();
        if (e.kind == ToolCallEvent::kArguments && e.index >= started) std::abort();
        if (e.kind == ToolCallEvent::kContent) content += e.text;
      }
    };
    // Pieces of 1, 2, 3, ... bytes, as a stream's tokens come.
    for (size_t at = 0, n = 1; at < text.size(); at += n, ++n) take(p.feed(std::string(text.substr(at, n))));
    take(p.finish());
    if (p.calls() != started) std::abort();
    if (started == 0 && content != text && std::string(format) != "llama3" && std::string(format) != "mistral") {
      // Text with no call is handed out whole (blank text between calls only is dropped).
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::server;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ParseLimits limits;
  limits.max_tokens = 512;
  for (bool chat : {true, false}) {
    auto r = chat ? parse_chat_request(body, limits) : parse_completion_request(body, limits);
    if (auto* e = std::get_if<ApiError>(&r)) {
      check(*e);
      continue;
    }
    const GenerationRequest& g = std::get<GenerationRequest>(r);
    if (g.max_tokens < 0 || g.max_tokens > limits.max_tokens) std::abort();
    if (g.stop.size() > limits.max_stop) std::abort();
    if (chat && g.messages.empty()) std::abort();
    for (const ChatMessage& m : g.messages)
      if (m.content.find('\0') != std::string::npos) std::abort();
    if (g.temperature && (*g.temperature < 0 || *g.temperature > 2)) std::abort();
    if (!g.tools_json.empty() && !is_json(g.tools_json)) std::abort();
    if (!g.chat_json.empty() && !is_json(g.chat_json)) std::abort();
    if ((g.format == ReplyFormat::kJsonSchema) != is_json(g.format_text) && g.format != ReplyFormat::kGrammar) std::abort();
    if (g.tool_choice == ToolChoice::kFunction && g.tools_json.empty()) std::abort();
  }
  check_reply(body);
  auto t = parse_tokenize_request(body);
  if (auto* e = std::get_if<ApiError>(&t)) check(*e);
  auto d = parse_detokenize_request(body);
  if (auto* e = std::get_if<ApiError>(&d)) check(*e);
  return 0;
}
