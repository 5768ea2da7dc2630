// libFuzzer target: the chat-template engine. Input: template text. What parses is rendered
// with a fixed small conversation (tools, a tool call, kwargs, special tokens, a pinned clock)
// under tight limits, with and without add_generation_prompt. Errors must carry a message;
// output must be valid UTF-8 and within the limit. Seeds: fuzz/corpus/template (real templates).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "template/chat_template.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

const kiln::ChatRequest& request() {
  static const kiln::ChatRequest req = [] {
    kiln::ChatRequest r;
    r.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "  Hello — 你好 😀 <|im_start|>  "},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHi.", "tool_calls": [
        {"type": "function", "id": "call0a1b2", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call0a1b2"},
      {"role": "user", "content": "Thanks!"}])");
    r.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
      "required": ["city"]}}}])");
    r.kwargs = nlohmann::ordered_json::parse(R"({"enable_thinking": false, "date_string": "15 Mar 2025", "n": 3})");
    r.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
    std::tm tm{};
    tm.tm_year = 125;
    tm.tm_mon = 2;
    tm.tm_mday = 15;
    tm.tm_wday = 6;
    tm.tm_yday = 73;
    r.now = tm;
    r.limits.max_output_bytes = size_t{1} << 20;
    r.limits.max_steps = 200'000;
    r.limits.max_alloc_bytes = uint64_t{64} << 20;
    r.limits.max_call_depth = 20;
    return r;
  }();
  return req;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tpl = kiln::ChatTemplate::parse(text);
  if (!tpl.is_ok()) {
    check(!tpl.status().message().empty());
    return 0;
  }
  kiln::ChatRequest req = request();
  for (bool gen : {false, true}) {
    req.add_generation_prompt = gen;
    auto out = tpl->render(req);
    if (!out.is_ok()) {
      check(!out.status().message().empty());
      continue;
    }
    check(out->size() <= req.limits.max_output_bytes);
    check(kiln::is_valid_utf8(*out));
  }
  return 0;
}
