#include "engine/conversation.h"

#include <utility>

namespace kiln {

using OJson = nlohmann::ordered_json;

Conversation::Conversation(std::shared_ptr<RuntimeSession> session, std::string system)
    : session_(std::move(session)), system_(std::move(system)) {
  clear();
}

void Conversation::clear() {
  messages_ = OJson::array();
  if (!system_.empty()) messages_.push_back({{"role", "system"}, {"content", system_}});
}

Result<ChatTurn> Conversation::say(std::string_view user_text, const TurnOptions& turn, const PieceSink& sink) {
  OJson next = messages_;
  next.push_back({{"role", "user"}, {"content", std::string(user_text)}});
  ChatTurn t;
  KILN_ASSIGN_OR_RETURN(t.stats, session_->chat(next, turn, [&](std::string_view piece, std::span<const int> ids) {
    t.reply += piece;
    return sink(piece, ids);
  }));
  // The whole conversation was encoded: the part the cache held plus the part decoded now.
  t.reused_tokens = t.stats.reused_tokens;
  t.prompt_tokens = t.stats.prompt_tokens + t.stats.reused_tokens;
  next.push_back({{"role", "assistant"}, {"content", t.reply}});
  messages_ = std::move(next);
  return t;
}

}  // namespace kiln
