// The hermes syntax, <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, is read as it
// comes: content up to "<tool_call>" (text that may be the start of one is held back), then the
// name once its string has closed, then the arguments' JSON as far as it has come (a scanner that
// knows strings and nesting finds where the value ends), then nothing up to "</tool_call>".
#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>
#include <string_view>

namespace kiln::server {

namespace {

using nlohmann::json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The longest end of `s` that is a start of `tag`.
size_t partial_tag(const std::string& s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag.data(), n) == 0) return n;
  return 0;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

// Reads {"name": "...", "arguments": from the start of `s`. 1: matched (`name`, `end` set),
// 0: `s` may still become that, -1: it will not.
int match_call_head(const std::string& s, std::string& name, size_t& end) {
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  // A literal: 1 matched, 0 `s` ended inside it, -1 differs.
  auto lit = [&](std::string_view t) {
    for (char c : t) {
      if (i >= s.size()) return 0;
      if (s[i] != c) return -1;
      ++i;
    }
    return 1;
  };
  int r;
  ws();
  if ((r = lit("{")) != 1) return r;
  ws();
  if ((r = lit("\"name\"")) != 1) return r;
  ws();
  if ((r = lit(":")) != 1) return r;
  ws();
  if ((r = lit("\"")) != 1) return r;
  name.clear();
  while (true) {
    if (i >= s.size()) return 0;
    const char c = s[i++];
    if (c == '"') break;
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20) return -1;  // names are plain
    name += c;
  }
  ws();
  if ((r = lit(",")) != 1) return r;
  ws();
  if ((r = lit("\"arguments\"")) != 1) return r;
  ws();
  if ((r = lit(":")) != 1) return r;
  ws();
  if (i >= s.size()) return 0;  // the value's first character decides nothing yet, but must come
  end = i;
  return 1;
}

}  // namespace

bool ToolCallParser::emit_whole_call(const std::string& text, std::vector<ToolCallEvent>& out) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j.at("name").is_string()) return false;
  const json* args = j.contains("arguments") ? &j.at("arguments") : j.contains("parameters") ? &j.at("parameters") : nullptr;
  std::string arg_text = "{}";
  if (args != nullptr && args->is_string()) arg_text = args->get<std::string>();
  else if (args != nullptr && !args->is_null()) arg_text = args->dump(-1, ' ', false, json::error_handler_t::replace);
  const int index = n_calls_++;
  out.push_back({ToolCallEvent::kCallStart, index, j.at("name").get<std::string>()});
  out.push_back({ToolCallEvent::kArguments, index, arg_text});
  return true;
}

void ToolCallParser::feed_hermes(std::vector<ToolCallEvent>& out, bool at_end) {
  auto content = [&](std::string text) {
    // Between and after calls only the calls count: blank lines there are not content.
    if (n_calls_ > 0 && trim(text).empty()) return;
    if (!text.empty()) out.push_back({ToolCallEvent::kContent, 0, std::move(text)});
  };
  while (true) {
    if (!in_call_ && !decided_ && n_calls_ == 0) {
      size_t lead = 0;
      while (lead < buf_.size() && is_space(buf_[lead])) ++lead;
      if (lead == buf_.size() && !at_end) return;  // only blank so far: nothing told yet
      // A Markdown fence first (```json, as Qwen2.5-Coder-1.5B writes its call): its line is skipped.
      if (buf_.compare(lead, 3, "```") == 0 || (buf_.size() - lead < 3 && std::string_view("```").substr(0, buf_.size() - lead) == std::string_view(buf_).substr(lead))) {
        const size_t eol = buf_.find('\n', lead);
        if (eol == std::string::npos && !at_end) return;
        if (eol != std::string::npos) {
          size_t after = eol + 1;
          while (after < buf_.size() && is_space(buf_[after])) ++after;
          if (after == buf_.size() && !at_end) return;
          std::string name;
          size_t end = 0;
          const int m = after < buf_.size() && buf_[after] == '{' ? match_call_head(buf_.substr(after), name, end) : -1;
          if (m == 0 && !at_end) return;
          if (m == 1) lead = after;
        }
      }
      std::string name;
      size_t end = 0;
      const int m = lead < buf_.size() && buf_[lead] == '{' ? match_call_head(buf_.substr(lead), name, end) : -1;
      if (m == 0 && !at_end) return;
      decided_ = true;  // (a fenced call's fence is dropped with the blank before it)
      if (m == 1) {
        buf_.erase(0, lead);
        in_call_ = bare_ = true;
        started_ = args_done_ = in_string_ = escape_ = false;
        depth_ = 0;
        continue;
      }
    }
    if (!in_call_) {
      decided_ = true;
      const size_t at = buf_.find(kOpen);
      if (at != std::string::npos) {
        content(buf_.substr(0, at));
        buf_.erase(0, at + kOpen.size());
        in_call_ = true;
        bare_ = started_ = args_done_ = in_string_ = escape_ = false;
        depth_ = 0;
        continue;
      }
      const size_t keep = at_end ? 0 : partial_tag(buf_, kOpen);
      content(buf_.substr(0, buf_.size() - keep));
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    if (!started_) {
      std::string name;
      size_t end = 0;
      const int m = match_call_head(buf_, name, end);
      if (m == 1) {
        out.push_back({ToolCallEvent::kCallStart, n_calls_, name});
        started_ = true;
        buf_.erase(0, end);
        continue;
      }
      // Not the usual shape (or cut short): the whole call once it has closed.
      const size_t close = bare_ ? std::string::npos : buf_.find(kClose);
      if (m == 0 && close == std::string::npos && !at_end) return;
      if (m == -1 && close == std::string::npos && !at_end) return;
      const std::string body = buf_.substr(0, close);
      if (!emit_whole_call(trim(body), out))
        out.push_back({ToolCallEvent::kContent, 0,
                       (bare_ ? std::string() : std::string(kOpen)) + body +
                           (close == std::string::npos ? "" : std::string(kClose))});
      buf_.erase(0, close == std::string::npos ? buf_.size() : close + kClose.size());
      in_call_ = false;
      if (at_end && buf_.empty()) return;
      continue;
    }
    if (!args_done_) {
      // The value ends where its brackets close (inclusive), or a scalar at a ',' or '}' (exclusive).
      size_t i = 0, end = std::string::npos;
      for (; i < buf_.size(); ++i) {
        const char c = buf_[i];
        if (in_string_) {
          if (escape_) escape_ = false;
          else if (c == '\\') escape_ = true;
          else if (c == '"') in_string_ = false;
          continue;
        }
        if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if (c == '}' || c == ']') {
          if (depth_ == 0) {
            end = i;
            break;
          }
          if (--depth_ == 0) {
            end = i + 1;
            break;
          }
        } else if (c == ',' && depth_ == 0) {
          end = i;
          break;
        }
      }
      const size_t n = end == std::string::npos ? buf_.size() : end;
      std::string piece = buf_.substr(0, n);
      if (end != std::string::npos) {
        while (!piece.empty() && is_space(piece.back())) piece.pop_back();
        args_done_ = true;
      }
      if (!piece.empty()) out.push_back({ToolCallEvent::kArguments, n_calls_, std::move(piece)});
      buf_.erase(0, n);
      if (!args_done_) {
        if (at_end) {
          ++n_calls_;
          in_call_ = false;
        }
        return;
      }
    }
    // After the arguments: nothing counts up to the close (a bare call's: the reply's end; a
    // tagged call may follow it).
    if (bare_ && !at_end) {
      const size_t at = buf_.find(kOpen);
      if (at == std::string::npos) {
        buf_.erase(0, buf_.size() - partial_tag(buf_, kOpen));
        return;
      }
      ++n_calls_;
      in_call_ = bare_ = false;
      buf_.erase(0, at);
      continue;
    }
    const size_t close = bare_ ? std::string::npos : buf_.find(kClose);
    if (close == std::string::npos && !at_end) {
      // Keep only what may hold the close tag.
      const size_t keep = partial_tag(buf_, kClose);
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    ++n_calls_;
    in_call_ = false;
    buf_.erase(0, close == std::string::npos ? buf_.size() : close + kClose.size());
    if (at_end && buf_.empty()) return;
  }
}

void ToolCallParser::parse_whole(std::vector<ToolCallEvent>& out) {
  std::string t = trim(buf_);
  std::vector<ToolCallEvent> calls;
  const int before = n_calls_;
  bool ok = false;
  std::string lead;
  if (format_ == "llama3") {
    constexpr std::string_view tag = "<|python_tag|>";
    if (t.compare(0, tag.size(), tag) == 0) t = trim(t.substr(tag.size()));
    ok = !t.empty() && t[0] == '{' && emit_whole_call(t, calls);
  } else if (format_ == "mistral") {
    const size_t at = t.find("[TOOL_CALLS]");
    if (at != std::string::npos) {
      lead = trim(t.substr(0, at));
      const json arr = json::parse(t.substr(at + 12), nullptr, false);
      ok = !arr.is_discarded() && arr.is_array() && !arr.empty();
      for (size_t i = 0; ok && i < arr.size(); ++i) ok = emit_whole_call(arr[i].dump(), calls);
    }
  }
  if (!ok) {
    n_calls_ = before;
    if (!buf_.empty()) out.push_back({ToolCallEvent::kContent, 0, buf_});
  } else {
    if (!lead.empty()) out.push_back({ToolCallEvent::kContent, 0, lead});
    out.insert(out.end(), calls.begin(), calls.end());
  }
  buf_.clear();
}

std::vector<ToolCallEvent> ToolCallParser::feed(const std::string& text) {
  std::vector<ToolCallEvent> out;
  if (format_ == "hermes") {
    buf_ += text;
    feed_hermes(out, false);
  } else if (format_ == "llama3" || format_ == "mistral") {
    buf_ += text;  // read whole at the end
  } else if (!text.empty()) {
    out.push_back({ToolCallEvent::kContent, 0, text});
  }
  return out;
}

std::vector<ToolCallEvent> ToolCallParser::finish() {
  std::vector<ToolCallEvent> out;
  if (format_ == "hermes") feed_hermes(out, true);
  else if (format_ == "llama3" || format_ == "mistral") parse_whole(out);
  return out;
}

}  // namespace kiln::server
