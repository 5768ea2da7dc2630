#include "runtime/chat_session.h"

#include <algorithm>

namespace kiln {

using OJson = nlohmann::ordered_json;

ChatSession::ChatSession(Decoder& d, const Tokenizer& t, ChatTemplate tpl,
                         std::vector<std::pair<std::string, std::string>> special_tokens, ChatOptions o)
    : decoder_(&d),
      tokenizer_(&t),
      template_(std::move(tpl)),
      special_tokens_(std::move(special_tokens)),
      options_(std::move(o)),
      sampler_(options_.sampler, d.config().vocab_size) {}

Result<ChatSession> ChatSession::create(Decoder& decoder, const Tokenizer& tokenizer, const ModelChatTemplate& tpl,
                                        ChatOptions options) {
  KILN_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::parse(tpl.source));
  if (!options.kwargs.is_object()) return invalid_argument("chat: template variables must be a JSON object");
  ChatSession s(decoder, tokenizer, std::move(parsed), tpl.special_tokens, std::move(options));
  decoder.reset();
  s.clear();
  KILN_ASSIGN_OR_RETURN(s.end_of_turn_, s.find_end_of_turn());
  if (tokenizer.eos_id() >= 0 && std::find(s.end_of_turn_.begin(), s.end_of_turn_.end(), tokenizer.eos_id()) ==
                                     s.end_of_turn_.end())
    s.end_of_turn_.push_back(tokenizer.eos_id());
  return s;
}

Result<std::string> ChatSession::render(const OJson& messages) const {
  ChatRequest req;
  req.messages = messages;
  req.add_generation_prompt = true;
  req.kwargs = options_.kwargs;
  req.special_tokens = special_tokens_;
  return template_.render(req);
}

// The end-of-turn token is whatever special token the template writes right after an assistant
// message's text (<|im_end|>, <|eot_id|>, <end_of_turn>, </s>, <|end|>): found by rendering a
// marker, so that no family needs a table here.
Result<std::vector<int>> ChatSession::find_end_of_turn() const {
  static constexpr std::string_view kMarker = "kiln-end-of-turn-probe";
  OJson probe = OJson::array();
  probe.push_back({{"role", "user"}, {"content", "hi"}});
  probe.push_back({{"role", "assistant"}, {"content", std::string(kMarker)}});
  ChatRequest req;
  req.messages = probe;
  req.kwargs = options_.kwargs;
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

void ChatSession::clear() {
  messages_ = OJson::array();
  if (!options_.system.empty()) messages_.push_back({{"role", "system"}, {"content", options_.system}});
}

Result<ChatTurn> ChatSession::say(std::string_view user_text, const std::function<void(std::string_view)>& emit) {
  OJson next = messages_;
  next.push_back({{"role", "user"}, {"content", std::string(user_text)}});
  return respond(std::move(next), [&emit](std::string_view piece, std::span<const int>) {
    emit(piece);
    return true;
  });
}

Result<ChatTurn> ChatSession::respond(OJson conversation, const PieceSink& sink) {
  if (!conversation.is_array()) return invalid_argument("chat: the conversation must be a list of messages");
  KILN_ASSIGN_OR_RETURN(std::string prompt_text, render(conversation));
  // As apply_chat_template(tokenize=True): the template writes BOS itself, nothing is added.
  KILN_ASSIGN_OR_RETURN(std::vector<int> prompt, tokenizer_->encode(prompt_text, EncodeOptions{}));
  if (prompt.empty()) return invalid_argument("chat: the template rendered an empty prompt");
  if (static_cast<int64_t>(prompt.size()) >= decoder_->n_ctx())
    return context_full("chat: the conversation is " + std::to_string(prompt.size()) +
                        " tokens, more than the context of " + std::to_string(decoder_->n_ctx()) +
                        " holds; clear it or give a longer context");

  GenerateOptions go;
  go.extra_stop_ids = end_of_turn_;
  go.stop_strings = options_.stop_strings;
  go.cancel = options_.cancel;
  ChatTurn turn;
  turn.prompt_tokens = static_cast<int>(prompt.size());
  KILN_ASSIGN_OR_RETURN(turn.stats, generate_reusing(*decoder_, cached_, sampler_, *tokenizer_, prompt, options_.n_predict,
                                                     [&](std::string_view piece, std::span<const int> ids) {
                                                       turn.reply += piece;
                                                       return sink(piece, ids);
                                                     },
                                                     go));
  turn.reused_tokens = turn.stats.reused_tokens;
  conversation.push_back({{"role", "assistant"}, {"content", turn.reply}});
  messages_ = std::move(conversation);
  return turn;
}

}  // namespace kiln
