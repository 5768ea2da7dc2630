#include "runtime/chat_session.h"

namespace kiln {

using OJson = nlohmann::ordered_json;

ChatSession::ChatSession(Decoder& d, ChatFormat format, ChatOptions o)
    : decoder_(&d),
      format_(std::move(format)),
      options_(std::move(o)),
      sampler_(options_.sampler, d.config().vocab_size) {}

Result<ChatSession> ChatSession::create(Decoder& decoder, const Tokenizer& tokenizer, const ModelChatTemplate& tpl,
                                        ChatOptions options) {
  KILN_ASSIGN_OR_RETURN(ChatFormat format, ChatFormat::create(tokenizer, tpl, options.kwargs));
  ChatSession s(decoder, std::move(format), std::move(options));
  s.tokenizer_ = &tokenizer;
  decoder.reset();
  s.clear();
  return s;
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
  KILN_ASSIGN_OR_RETURN(std::vector<int> prompt, format_.encode(conversation));
  if (static_cast<int64_t>(prompt.size()) >= decoder_->n_ctx())
    return context_full("chat: the conversation is " + std::to_string(prompt.size()) +
                        " tokens, more than the context of " + std::to_string(decoder_->n_ctx()) +
                        " holds; clear it or give a longer context");
  GenerateOptions go;
  go.extra_stop_ids = format_.end_of_turn_ids();
  go.stop_strings = options_.stop_strings;
  go.cancel = options_.cancel;
  go.on_prefill = options_.on_prefill;
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
