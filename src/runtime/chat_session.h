// A conversation with a model: each turn renders the whole conversation with the model's chat
// template (as Hugging Face's apply_chat_template(..., add_generation_prompt=True) does), encodes
// it, and decodes only what the KV cache does not already hold.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/chat_format.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

struct ChatOptions {
  std::string system;  // the system prompt; empty: none
  // Extra template variables, apply_chat_template(**kwargs): {"enable_thinking": false, ...}.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  int n_predict = 256;  // most tokens per reply
  SamplerParams sampler;
  std::vector<std::string> stop_strings;     // see GenerateOptions
  const std::atomic<bool>* cancel = nullptr;  // see GenerateOptions
  std::function<bool(int done, int total)> on_prefill;  // see GenerateOptions
};

struct ChatTurn {
  std::string reply;      // the assistant's text, as it went into the conversation
  int prompt_tokens = 0;  // the rendered conversation, encoded
  int reused_tokens = 0;  // of them, already in the KV cache from earlier turns
  GenerationStats stats;
};

class ChatSession {
 public:
  // `decoder` and `tokenizer` must outlive the session; the decoder is reset here.
  static Result<ChatSession> create(Decoder& decoder, const Tokenizer& tokenizer, const ModelChatTemplate& tpl,
                                    ChatOptions options);

  // Adds the user's message, streams the reply to `emit` (whole UTF-8 characters) and adds it.
  Result<ChatTurn> say(std::string_view user_text, const std::function<void(std::string_view)>& emit);

  // Replies to a whole conversation (a list of {"role", "content"} messages, the system prompt
  // included when wanted), as an OpenAI-style request sends it: the part the cache holds from
  // earlier turns is reused. The conversation plus the reply becomes messages().
  Result<ChatTurn> respond(nlohmann::ordered_json conversation, const PieceSink& sink);

  // Options of the next turns (n_predict, stop strings, cancel flag; the sampler stays).
  ChatOptions& options() { return options_; }
  // The sampler, e.g. reseeded between turns.
  void set_sampler(const SamplerParams& p) { sampler_ = Sampler(p, decoder_->config().vocab_size); }

  // Forgets the conversation (the system prompt stays); the cache is reused where it still fits.
  void clear();

  // The conversation so far, as the template receives it.
  const nlohmann::ordered_json& messages() const { return messages_; }
  // Tokens that end a reply besides the model's own stop tokens: the template's end-of-turn token.
  const std::vector<int>& end_of_turn_ids() const { return format_.end_of_turn_ids(); }
  // The prompt text the next turn would decode from, for `messages` (add_generation_prompt).
  Result<std::string> render(const nlohmann::ordered_json& messages) const { return format_.render(messages); }

 private:
  ChatSession(Decoder& d, ChatFormat format, ChatOptions o);

  Decoder* decoder_;
  const Tokenizer* tokenizer_ = nullptr;
  ChatFormat format_;
  ChatOptions options_;
  Sampler sampler_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int> cached_;  // the tokens at the cache's positions 0 .. decoder.position()
};

}  // namespace kiln
