// Chat templates: the Jinja template in tokenizer_config.json (or a GGUF's
// tokenizer.chat_template) rendered exactly as Hugging Face's
// tokenizer.apply_chat_template(messages, tokenize=False, ...) renders it.
//
// The engine implements the part of Jinja2 that real chat templates use (see jinja_parser.h
// and jinja_builtins.h for the list); anything else is an error that names the template's line
// and column, never a different prompt.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "formats/tokenizer_blob.h"
#include "template/jinja_eval.h"

namespace kiln {

struct GgufFile;

namespace jinja {
struct Template;
}

// What apply_chat_template passes to the template besides the template itself.
struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{"role": ..., "content": ...}, ...]
  nlohmann::ordered_json tools;                                       // null: None
  nlohmann::ordered_json documents;                                   // null: None
  bool add_generation_prompt = false;
  // Extra template variables, apply_chat_template(**kwargs): {"enable_thinking": false, ...}.
  // They override special tokens of the same name.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // bos_token, eos_token, ... as the tokenizer defines them (unset ones are left out).
  std::vector<std::pair<std::string, std::string>> special_tokens;
  // The clock strftime_now() reads; unset: the local time now.
  std::optional<std::tm> now;
  jinja::Limits limits;
};

class ChatTemplate {
 public:
  // Parses template text; a syntax error or an unsupported construct names its line and column.
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders the prompt text. Errors (raise_exception, undefined values used in arithmetic,
  // type errors, exceeded limits) name the template line.
  Result<std::string> render(const ChatRequest& request) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> tpl_;
};

// A model's chat template and special tokens, from an HF folder (chat_template.jinja, else
// tokenizer_config.json's chat_template: a string or a list of {name, template}, "default"
// unless tools are given and "tool_use" exists) or a .gguf (tokenizer.chat_template)
// (ModelChatTemplate: formats/tokenizer_blob.h).
Result<ModelChatTemplate> load_model_chat_template(const std::string& path, bool with_tools);
// The same from a parsed GGUF file (tokenizer.chat_template; special tokens from its vocabulary).
Result<ModelChatTemplate> chat_template_from_gguf(const GgufFile& g, const std::string& where);

// The template in a parsed tokenizer_config.json (`where` names the file in messages).
Result<std::string> chat_template_from_config(const nlohmann::json& config, bool with_tools, const std::string& where);
// bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token from a
// tokenizer_config.json: strings or {"content": ...} objects; null ones are left out.
std::vector<std::pair<std::string, std::string>> special_tokens_from_config(const nlohmann::json& config);

}  // namespace kiln
