// A reply's tool calls, read from the model's text as it streams, in the syntax its chat template
// asks for (kiln_model_info.tool_call_format): "hermes" calls are handed out as they come (the
// call's name first, then its arguments piece by piece, as OpenAI streams them); "llama3" and
// "mistral" replies are read whole at the end. Text that is not a well-formed call stays content.
// As llama.cpp's hermes parser does, a reply that starts with {"name": ..., "arguments": ...}
// without the tags (small Qwen2.5-Coder models write that), or in a ```json fence, is a call too.
#pragma once

#include <string>
#include <vector>

namespace kiln::server {

struct ToolCallEvent {
  enum Kind { kContent, kCallStart, kArguments } kind = kContent;
  int index = 0;     // kCallStart, kArguments: which call
  std::string text;  // kContent: text; kCallStart: the function's name; kArguments: more of its JSON
};

class ToolCallParser {
 public:
  explicit ToolCallParser(std::string format) : format_(std::move(format)) {}
  // More of the reply; what can be told already comes out.
  std::vector<ToolCallEvent> feed(const std::string& text);
  // The reply has ended: the rest.
  std::vector<ToolCallEvent> finish();
  int calls() const { return n_calls_; }

 private:
  void feed_hermes(std::vector<ToolCallEvent>& out, bool at_end);
  // A whole call's JSON text {"name", "arguments"|"parameters"}: a start and its arguments.
  bool emit_whole_call(const std::string& json_text, std::vector<ToolCallEvent>& out);
  // A whole reply in the llama3 or mistral syntax.
  void parse_whole(std::vector<ToolCallEvent>& out);

  std::string format_;
  std::string buf_;          // text not yet handed out
  bool in_call_ = false;     // hermes: inside <tool_call>
  bool bare_ = false;        // hermes: a call without its tags ({"name": ... first in the reply)
  bool decided_ = false;     // hermes: whether the reply starts with a bare call is known
  bool started_ = false;     // hermes: this call's start was handed out
  bool args_done_ = false;   // hermes: its arguments' value has ended
  size_t scan_ = 0;          // hermes: how far the arguments were scanned in buf_
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  int n_calls_ = 0;
};

}  // namespace kiln::server
