#include "artifact/tokenizer_section.h"

#include <cstring>

#include "formats/json_util.h"

namespace kiln {

std::vector<uint8_t> encode_tokenizer_section(const TokenizerBlob& blob) {
  Json h{{"kind", blob.kind}, {"vocab_size", blob.vocab_size}};
  if (blob.chat) {
    h["chat_template"] = blob.chat->source;
    Json specials = Json::array();
    for (const auto& [name, text] : blob.chat->special_tokens) specials.push_back({name, text});
    h["special_tokens"] = std::move(specials);
  }
  const std::string header = h.dump();
  std::vector<uint8_t> out(4);
  const auto n = static_cast<uint32_t>(header.size());
  std::memcpy(out.data(), &n, 4);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), blob.bytes.begin(), blob.bytes.end());
  return out;
}

Result<TokenizerBlob> decode_tokenizer_section(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() < 4) return corrupt(where + ": tokenizer section is truncated");
  uint32_t n;
  std::memcpy(&n, bytes.data(), 4);
  if (n > bytes.size() - 4) return corrupt(where + ": tokenizer header runs past the section");
  KILN_ASSIGN_OR_RETURN(Json h, parse_json(as_text(bytes.subspan(4, n)), where + ": tokenizer header"));
  TokenizerBlob b;
  KILN_ASSIGN_OR_RETURN(b.kind, json_string(h, "kind", "", where));
  KILN_ASSIGN_OR_RETURN(b.vocab_size, json_dim(h, "vocab_size", 0, where));
  if (h.contains("chat_template")) {
    ModelChatTemplate chat;
    KILN_ASSIGN_OR_RETURN(chat.source, json_string(h, "chat_template", "", where));
    auto it = h.find("special_tokens");
    if (it != h.end()) {
      if (!it->is_array()) return corrupt(where + ": tokenizer header: special_tokens must be an array");
      for (const Json& e : *it) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string())
          return corrupt(where + ": tokenizer header: each special token must be [name, text]");
        chat.special_tokens.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      }
    }
    b.chat = std::move(chat);
  }
  auto rest = bytes.subspan(4 + n);
  b.bytes.assign(rest.begin(), rest.end());
  return b;
}

}  // namespace kiln
