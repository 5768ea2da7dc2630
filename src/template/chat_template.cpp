#include "template/chat_template.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/json_util.h"
#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"
#include "template/jinja_parser.h"

namespace kiln {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

namespace {

constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

Status in_template(const Status& s) {
  if (s.is_ok()) return s;
  return {s.code(), "chat template: " + s.message()};
}

// What transformers does to each message before rendering: drop keys whose value is None,
// then copy a reasoning field to both "thinking" and "reasoning_content".
Result<OJson> normalize_messages(const OJson& messages) {
  if (!messages.is_array()) return invalid_argument("messages must be a JSON array of message objects");
  if (messages.empty())
    return invalid_argument("Cannot apply chat template to an empty conversation. Provide at least one message.");
  OJson out = OJson::array();
  for (const OJson& m : messages) {
    if (!m.is_object()) return invalid_argument("Chat messages should be dicts (JSON objects), but got " + m.dump());
    OJson kept = OJson::object();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (!it.value().is_null()) kept[it.key()] = it.value();
    const OJson* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      auto it = kept.find(key);
      if (it != kept.end()) {
        reasoning = &*it;
        break;
      }
    }
    if (reasoning) {
      OJson r = *reasoning;
      OJson aliased = OJson::object();
      aliased["thinking"] = r;
      for (auto it = kept.begin(); it != kept.end(); ++it) aliased[it.key()] = it.value();
      aliased["reasoning_content"] = r;
      kept = std::move(aliased);
    }
    out.push_back(std::move(kept));
  }
  return out;
}

std::string token_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

Result<ModelChatTemplate> from_gguf(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(std::move(file)));
  return chat_template_from_gguf(g, path);
}

}  // namespace

Result<ModelChatTemplate> chat_template_from_gguf(const GgufFile& g, const std::string& where) {
  ModelChatTemplate out;
  const GgufValue* t = g.find("tokenizer.chat_template");
  if (t == nullptr || t->as_string() == nullptr)
    return not_found(where + ": the GGUF file has no tokenizer.chat_template");
  out.source = *t->as_string();
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  const GgufArray* arr = tokens ? tokens->as_array() : nullptr;
  const std::pair<const char*, const char*> ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                     {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                     {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                                     {"sep_token", "tokenizer.ggml.seperator_token_id"},
                                                     {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : ids) {
    const GgufValue* id = g.find(key);
    if (id == nullptr || id->as_int() == nullptr || arr == nullptr) continue;
    int64_t i = *id->as_int();
    if (i >= 0 && static_cast<size_t>(i) < arr->strings.size())
      out.special_tokens.emplace_back(name, arr->strings[static_cast<size_t>(i)]);
  }
  return out;
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto tpl = jinja::parse_template(source);
  if (!tpl.is_ok()) return in_template(tpl.status());
  ChatTemplate ct;
  ct.source_ = std::string(source);
  ct.tpl_ = std::shared_ptr<const jinja::Template>(std::move(tpl).value());
  return ct;
}

Result<std::string> ChatTemplate::render(const ChatRequest& req) const {
  using jinja::Value;
  KILN_ASSIGN_OR_RETURN(OJson messages, normalize_messages(req.messages));
  if (!req.kwargs.is_null() && !req.kwargs.is_object())
    return invalid_argument("template kwargs must be a JSON object");
  jinja::Frame globals;
  jinja::add_globals(globals);
  jinja::Frame root{&globals, {}};
  for (const auto& [name, text] : req.special_tokens) root.set(name, Value::string(text));
  if (req.kwargs.is_object())
    for (auto it = req.kwargs.begin(); it != req.kwargs.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        return invalid_argument("'" + k + "' is a parameter of apply_chat_template, not an extra template variable");
      KILN_ASSIGN_OR_RETURN(Value v, jinja::from_json(it.value()));
      root.set(k, std::move(v));
    }
  KILN_ASSIGN_OR_RETURN(Value msgs, jinja::from_json(messages));
  KILN_ASSIGN_OR_RETURN(Value tools, jinja::from_json(req.tools));
  KILN_ASSIGN_OR_RETURN(Value docs, jinja::from_json(req.documents));
  root.set("messages", std::move(msgs));
  root.set("tools", std::move(tools));
  root.set("documents", std::move(docs));
  root.set("add_generation_prompt", Value::boolean(req.add_generation_prompt));
  jinja::Interpreter in(req.limits, req.now);
  auto out = in.render(*tpl_, root);
  if (!out.is_ok()) return in_template(out.status());
  return out;
}

Result<std::string> chat_template_from_config(const Json& config, bool with_tools, const std::string& where) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return not_found(where + ": no chat_template");
  if (it->is_string()) return it->get<std::string>();
  // A list of {"name", "template"} (or, as transformers keeps it, an object of name -> template).
  std::vector<std::pair<std::string, std::string>> named;
  if (it->is_array()) {
    for (const Json& e : *it) {
      if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["name"].is_string() ||
          !e["template"].is_string())
        return corrupt(where + ": chat_template entries must be {\"name\": ..., \"template\": ...}");
      named.emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
    }
  } else if (it->is_object()) {
    for (auto e = it->begin(); e != it->end(); ++e) {
      if (!e->is_string()) return corrupt(where + ": chat_template." + e.key() + " must be a string");
      named.emplace_back(e.key(), e->get<std::string>());
    }
  } else {
    return corrupt(where + ": chat_template must be a string or a list of named templates");
  }
  auto pick = [&](const char* name) -> const std::string* {
    for (const auto& [n, t] : named)
      if (n == name) return &t;
    return nullptr;
  };
  if (with_tools)
    if (const std::string* t = pick("tool_use")) return *t;
  if (const std::string* t = pick("default")) return *t;
  std::string names;
  for (const auto& [n, t] : named) names += (names.empty() ? "" : ", ") + n;
  return corrupt(where + ": the model has several chat templates and none is named 'default' (" + names + ")");
}

std::vector<std::pair<std::string, std::string>> special_tokens_from_config(const Json& config) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!config.is_object()) return out;
  for (const char* name : kSpecialTokenNames) {
    auto it = config.find(name);
    if (it == config.end() || it->is_null()) continue;
    std::string text = token_text(*it);
    if (it->is_string() || !text.empty()) out.emplace_back(name, text);
  }
  return out;
}

Result<ModelChatTemplate> load_model_chat_template(const std::string& path, bool with_tools) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return from_gguf(path);
    return invalid_argument(path + ": expected a Hugging Face model folder or a .gguf file");
  }
  const std::string cfg_path = (fs::path(path) / "tokenizer_config.json").string();
  Json cfg = Json::object();
  if (fs::exists(cfg_path, ec)) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(cfg_path));
    KILN_ASSIGN_OR_RETURN(cfg, parse_json(text, cfg_path));
    if (!cfg.is_object()) return corrupt(cfg_path + ": expected a JSON object");
  }
  ModelChatTemplate out;
  const std::string jinja_path = (fs::path(path) / "chat_template.jinja").string();
  if (fs::exists(jinja_path, ec)) {
    KILN_ASSIGN_OR_RETURN(out.source, read_text_file(jinja_path));
  } else {
    if (!fs::exists(cfg_path, ec)) return not_found(path + ": no tokenizer_config.json or chat_template.jinja");
    KILN_ASSIGN_OR_RETURN(out.source, chat_template_from_config(cfg, with_tools, cfg_path));
  }
  out.special_tokens = special_tokens_from_config(cfg);
  // Legacy folders keep the special tokens in special_tokens_map.json.
  const std::string map_path = (fs::path(path) / "special_tokens_map.json").string();
  if (fs::exists(map_path, ec)) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(map_path));
    KILN_ASSIGN_OR_RETURN(Json map, parse_json(text, map_path));
    for (auto& [name, value] : special_tokens_from_config(map)) {
      bool have = false;
      for (const auto& kv : out.special_tokens) have = have || (kv.first == name && !kv.second.empty());
      if (!have) out.special_tokens.emplace_back(name, value);
    }
  }
  return out;
}

}  // namespace kiln
