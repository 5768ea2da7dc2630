// A conversation kept on one engine session: the messages so far (the system prompt first), each
// user message added, the whole conversation sent through RuntimeSession::chat — the one chat
// loop — and the reply added as the assistant's turn. The session's cache keeps what the turns
// share, so a turn decodes only the new message and what the template wraps it in.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/runtime.h"

namespace kiln {

struct ChatTurn {
  std::string reply;      // the assistant's text, as it went into the conversation
  int prompt_tokens = 0;  // the rendered conversation, encoded
  int reused_tokens = 0;  // of them, already in the KV cache from earlier turns
  GenerationStats stats;
};

class Conversation {
 public:
  // `system`: the system prompt; empty: none.
  Conversation(std::shared_ptr<RuntimeSession> session, std::string system);

  // Adds the user's message, streams the reply to `sink` (whole UTF-8 characters) and adds it.
  // A turn that fails leaves the conversation as it was.
  Result<ChatTurn> say(std::string_view user_text, const TurnOptions& turn, const PieceSink& sink);
  // Forgets the conversation (the system prompt stays); the cache is reused where it still fits.
  void clear();

  // The conversation so far, as the template receives it.
  const nlohmann::ordered_json& messages() const { return messages_; }

 private:
  std::shared_ptr<RuntimeSession> session_;
  std::string system_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

}  // namespace kiln
