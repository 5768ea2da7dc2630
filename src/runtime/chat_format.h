// How a model's chat template turns a conversation into prompt tokens, and which token ends a
// reply: stateless, used by the engine's chat loop (RuntimeSession::chat) for every front end.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

class ChatFormat {
 public:
  // `tokenizer` must outlive the format. `kwargs`: extra template variables
  // (apply_chat_template(**kwargs), e.g. {"enable_thinking": false}).
  static Result<ChatFormat> create(const Tokenizer& tokenizer, const ModelChatTemplate& tpl,
                                   nlohmann::ordered_json kwargs = nlohmann::ordered_json::object());

  // The prompt text for `messages`, ending with the assistant's turn opened
  // (add_generation_prompt), as Hugging Face's apply_chat_template renders it; `tools` (null:
  // none) as apply_chat_template(tools=...) passes them.
  Result<std::string> render(const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& tools = nlohmann::ordered_json()) const;
  // The same, encoded as apply_chat_template(tokenize=True) does (the template writes BOS itself),
  // except that special-token text typed in user, system or tool content is text, not a token
  // (so that a user cannot close a turn or open a system one).
  Result<std::vector<int>> encode(const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& tools = nlohmann::ordered_json()) const;
  // Tokens that end a reply besides the model's own stop tokens: the template's end-of-turn token
  // and the tokenizer's EOS.
  const std::vector<int>& end_of_turn_ids() const { return end_of_turn_; }

 private:
  ChatFormat(const Tokenizer& t, ChatTemplate tpl, std::vector<std::pair<std::string, std::string>> special,
             nlohmann::ordered_json kwargs);
  Result<std::vector<int>> find_end_of_turn() const;
  Result<std::vector<std::pair<size_t, size_t>>> plain_content_ranges(const nlohmann::ordered_json& messages,
                                                                      const nlohmann::ordered_json& tools,
                                                                      const std::string& text) const;

  const Tokenizer* tokenizer_;
  ChatTemplate template_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;  // bos_token, eos_token, ...
  nlohmann::ordered_json kwargs_;
  std::vector<int> end_of_turn_;
};

}  // namespace kiln
