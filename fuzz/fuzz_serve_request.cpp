// kiln serve's request parser (server/request_parser.h): any body gives a request or an error
// object, never a crash; a request that parses holds what the server relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_parser.h"

namespace {

void check(const kiln::server::ApiError& e) {
  if (e.status < 400 || e.status > 599 || e.message.empty()) std::abort();
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
  }
  auto t = parse_tokenize_request(body);
  if (auto* e = std::get_if<ApiError>(&t)) check(*e);
  auto d = parse_detokenize_request(body);
  if (auto* e = std::get_if<ApiError>(&d)) check(*e);
  return 0;
}
