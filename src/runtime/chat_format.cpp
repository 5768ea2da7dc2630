#include "runtime/chat_format.h"

#include <algorithm>

namespace kiln {

using OJson = nlohmann::ordered_json;

ChatFormat::ChatFormat(const Tokenizer& t, ChatTemplate tpl, std::vector<std::pair<std::string, std::string>> special,
                       OJson kwargs)
    : tokenizer_(&t), template_(std::move(tpl)), special_tokens_(std::move(special)), kwargs_(std::move(kwargs)) {}

Result<ChatFormat> ChatFormat::create(const Tokenizer& tokenizer, const ModelChatTemplate& tpl, OJson kwargs) {
  KILN_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::parse(tpl.source));
  if (!kwargs.is_object()) return invalid_argument("chat: template variables must be a JSON object");
  ChatFormat f(tokenizer, std::move(parsed), tpl.special_tokens, std::move(kwargs));
  KILN_ASSIGN_OR_RETURN(f.end_of_turn_, f.find_end_of_turn());
  if (tokenizer.eos_id() >= 0 &&
      std::find(f.end_of_turn_.begin(), f.end_of_turn_.end(), tokenizer.eos_id()) == f.end_of_turn_.end())
    f.end_of_turn_.push_back(tokenizer.eos_id());
  return f;
}

Result<std::string> ChatFormat::render(const OJson& messages, const OJson& tools) const {
  ChatRequest req;
  req.messages = messages;
  if (!tools.is_null() && !tools.empty()) req.tools = tools;
  req.add_generation_prompt = true;
  req.kwargs = kwargs_;
  req.special_tokens = special_tokens_;
  return template_.render(req);
}

Result<std::vector<int>> ChatFormat::encode(const OJson& messages, const OJson& tools) const {
  if (!messages.is_array()) return invalid_argument("chat: the conversation must be a list of messages");
  KILN_ASSIGN_OR_RETURN(std::string text, render(messages, tools));
  EncodeOptions eo;
  KILN_ASSIGN_OR_RETURN(eo.plain_ranges, plain_content_ranges(messages, tools, text));
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_->encode(text, eo));
  if (ids.empty()) return invalid_argument("chat: the template rendered an empty prompt");
  return ids;
}

namespace {

// Whose words a message holds: the template's special tokens typed there are text.
bool is_outside_text(const OJson& m) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return false;
  const std::string& role = m["role"].get_ref<const std::string&>();
  return role == "user" || role == "system" || role == "tool";
}

// Control characters that are not whitespace (Python counts \x1c..\x1f as whitespace), so that
// trim leaves a placeholder whole.
constexpr std::string_view kPlaceholder = "\x02kiln-content-";

std::string placeholder(size_t k) { return std::string(kPlaceholder) + std::to_string(k) + "\x03"; }

// How a template may have written a content: as is, or stripped (Jinja's trim, Python's strip).
std::vector<std::string> content_forms(const std::string& c) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t b = c.find_first_not_of(ws);
  const size_t e = c.find_last_not_of(ws);
  std::vector<std::string> forms = {c};
  auto add = [&](std::string f) {
    if (std::find(forms.begin(), forms.end(), f) == forms.end()) forms.push_back(std::move(f));
  };
  if (b == std::string::npos) {
    add("");
  } else {
    add(c.substr(b, e + 1 - b));
    add(c.substr(b));
    add(c.substr(0, e + 1));
  }
  return forms;
}

}  // namespace

// Where the user's, system's and tool's words lie in the rendered prompt, for the messages that
// hold special-token text (others need no range: their text encodes the same either way). The
// prompt is rendered again with a placeholder for each such content; the pieces of that
// rendering between the placeholders must then be the template's own text around each content in
// `text`, which places the content exactly. A template that changes content beyond stripping it,
// or branches on it, cannot be followed: that is an error, never a silent turn marker.
Result<std::vector<std::pair<size_t, size_t>>> ChatFormat::plain_content_ranges(const OJson& messages,
                                                                                 const OJson& tools,
                                                                                 const std::string& text) const {
  std::vector<std::pair<size_t, size_t>> ranges;
  OJson marked = messages;
  std::vector<std::string> contents;
  std::vector<size_t> which;  // message index of each placeholder
  for (size_t i = 0; i < messages.size(); ++i) {
    const OJson& m = messages[i];
    if (!is_outside_text(m) || !m.contains("content")) continue;
    const OJson& c = m["content"];
    if (!c.is_string()) continue;
    const std::string& content = c.get_ref<const std::string&>();
    KILN_ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_->encode(content, EncodeOptions{}));
    if (std::none_of(ids.begin(), ids.end(), [&](int id) { return tokenizer_->is_special(id); })) continue;
    if (content.find(kPlaceholder) != std::string::npos)
      return invalid_argument("chat: message " + std::to_string(i) + " holds kiln's content placeholder");
    marked[i]["content"] = placeholder(contents.size());
    contents.push_back(content);
    which.push_back(i);
  }
  if (contents.empty()) return ranges;
  auto cannot_follow = [&](size_t k) {
    return invalid_argument("chat: message " + std::to_string(which[k]) +
                            " holds the text of a special token, and the chat template changes or branches on "
                            "content in a way kiln cannot follow, so it cannot keep that text from acting as a token");
  };
  KILN_ASSIGN_OR_RETURN(std::string skeleton, render(marked, tools));
  // The template's text: before the first placeholder, between each two, after the last.
  std::vector<std::string_view> pieces;
  size_t from = 0;
  for (size_t k = 0; k < contents.size(); ++k) {
    const std::string p = placeholder(k);
    const size_t at = skeleton.find(p, from);
    if (at == std::string::npos || skeleton.find(p, at + p.size()) != std::string::npos) return cannot_follow(k);
    pieces.push_back(std::string_view(skeleton).substr(from, at - from));
    from = at + p.size();
  }
  pieces.push_back(std::string_view(skeleton).substr(from));
  const std::string_view t(text);
  if (t.substr(0, pieces[0].size()) != pieces[0]) return cannot_follow(0);
  size_t pos = pieces[0].size();
  for (size_t k = 0; k < contents.size(); ++k) {
    const std::string_view next = pieces[k + 1];
    const bool last = k + 1 == contents.size();
    bool placed = false;
    for (const std::string& form : content_forms(contents[k])) {
      if (t.substr(pos, form.size()) != form) continue;
      const size_t after = pos + form.size();
      if (t.substr(after, next.size()) != next || (last && after + next.size() != t.size())) continue;
      if (!form.empty()) ranges.emplace_back(pos, after);
      pos = after + next.size();
      placed = true;
      break;
    }
    if (!placed) return cannot_follow(k);
  }
  return ranges;
}

// The end-of-turn token is whatever special token the template writes right after an assistant
// message's text (<|im_end|>, <|eot_id|>, <end_of_turn>, </s>, <|end|>): found by rendering a
// marker, so that no family needs a table here.
Result<std::vector<int>> ChatFormat::find_end_of_turn() const {
  static constexpr std::string_view kMarker = "kiln-end-of-turn-probe";
  OJson probe = OJson::array();
  probe.push_back({{"role", "user"}, {"content", "hi"}});
  probe.push_back({{"role", "assistant"}, {"content", std::string(kMarker)}});
  ChatRequest req;
  req.messages = probe;
  req.kwargs = kwargs_;
  req.special_tokens = special_tokens_;
  auto text = template_.render(req);
  if (!text) return std::vector<int>{};  // a template that refuses this shape still chats
  const size_t at = text->rfind(kMarker);
  if (at == std::string::npos) return std::vector<int>{};
  const std::string after = text->substr(at + kMarker.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_->encode(after, EncodeOptions{}));
  if (!ids.empty() && tokenizer_->is_special(ids.front())) return std::vector<int>{ids.front()};
  return std::vector<int>{};
}

}  // namespace kiln
