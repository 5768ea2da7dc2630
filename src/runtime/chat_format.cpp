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

Result<std::string> ChatFormat::render(const OJson& messages) const {
  ChatRequest req;
  req.messages = messages;
  req.add_generation_prompt = true;
  req.kwargs = kwargs_;
  req.special_tokens = special_tokens_;
  return template_.render(req);
}

Result<std::vector<int>> ChatFormat::encode(const OJson& messages) const {
  if (!messages.is_array()) return invalid_argument("chat: the conversation must be a list of messages");
  KILN_ASSIGN_OR_RETURN(std::string text, render(messages));
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_->encode(text, EncodeOptions{}));
  if (ids.empty()) return invalid_argument("chat: the template rendered an empty prompt");
  return ids;
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
