#include "tokenizer/tokenizer_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/byte_reader.h"
#include "formats/gguf.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

Result<std::vector<uint8_t>> read_bytes(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  return std::vector<uint8_t>(f->bytes().begin(), f->bytes().end());
}

// A GGUF v3 file with no tensors and only the tokenizer.* keys of `g`.
std::vector<uint8_t> gguf_tokenizer_only(const GgufFile& g) {
  std::vector<uint8_t> out;
  auto raw = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  auto u32 = [&](uint32_t v) { raw(&v, 4); };
  auto u64 = [&](uint64_t v) { raw(&v, 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  };
  std::vector<const std::pair<const std::string, GgufValue>*> keys;
  for (const auto& kv : g.metadata)
    if (kv.first.rfind("tokenizer.", 0) == 0) keys.push_back(&kv);
  raw("GGUF", 4);
  u32(3);
  u64(0);
  u64(keys.size());
  // Integers are written as i64 and floats as f64: the reader widens them anyway.
  auto scalar = [&](GgufType t, const GgufValue& v) {
    if (t == GgufType::kString) {
      u32(static_cast<uint32_t>(GgufType::kString));
      str(*v.as_string());
    } else if (v.as_float()) {
      u32(static_cast<uint32_t>(GgufType::kF64));
      double d = *v.as_float();
      raw(&d, 8);
    } else if (t == GgufType::kBool) {
      u32(static_cast<uint32_t>(GgufType::kBool));
      uint8_t b = static_cast<uint8_t>(*v.as_int() != 0);
      raw(&b, 1);
    } else {
      u32(static_cast<uint32_t>(GgufType::kI64));
      int64_t i = *v.as_int();
      raw(&i, 8);
    }
  };
  for (const auto* kv : keys) {
    str(kv->first);
    const GgufValue& v = kv->second;
    if (const GgufArray* a = v.as_array()) {
      u32(static_cast<uint32_t>(GgufType::kArray));
      if (a->type == GgufType::kString) {
        u32(static_cast<uint32_t>(GgufType::kString));
        u64(a->strings.size());
        for (const auto& s : a->strings) str(s);
      } else if (!a->floats.empty() || a->type == GgufType::kF32 || a->type == GgufType::kF64) {
        u32(static_cast<uint32_t>(GgufType::kF32));
        u64(a->floats.size());
        for (double d : a->floats) {
          float f = static_cast<float>(d);
          raw(&f, 4);
        }
      } else {
        u32(static_cast<uint32_t>(GgufType::kI64));
        u64(a->ints.size());
        for (int64_t i : a->ints) raw(&i, 8);
      }
    } else {
      scalar(v.type, v);
    }
  }
  return out;
}

Result<std::string> find_llama2c_tokenizer(const std::string& model_path) {
  const fs::path dir = fs::path(model_path).parent_path().empty() ? fs::path(".") : fs::path(model_path).parent_path();
  if (fs::exists(dir / "tokenizer.bin")) return (dir / "tokenizer.bin").string();
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tok", 0) == 0 && e.path().extension() == ".bin") found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) return not_found(model_path + ": no tokenizer.bin or tok*.bin beside the model; pass --tokenizer");
  if (found.size() > 1) return invalid_argument(model_path + ": several tok*.bin files beside the model; pass --tokenizer");
  return found.front();
}

}  // namespace

Result<TokenizerBlob> tokenizer_blob_from_file(const std::string& path, int llama2c_vocab_size) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return tokenizer_blob_from_file(path + "/tokenizer.json", llama2c_vocab_size);
  KILN_ASSIGN_OR_RETURN(ModelFormat f, detect_format(path));
  TokenizerBlob b;
  b.source = path;
  if (f == ModelFormat::kGguf) {
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(std::move(file)));
    b.kind = "gguf";
    b.bytes = gguf_tokenizer_only(g);
    return b;
  }
  KILN_ASSIGN_OR_RETURN(b.bytes, read_bytes(path));
  if (fs::path(path).extension() == ".json") {
    b.kind = "hf-json";
    // The template lives beside tokenizer.json; a folder without one is fine (no chat).
    const fs::path folder = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
    auto chat = load_model_chat_template(folder.string(), /*with_tools=*/false);
    if (chat) b.chat = std::move(chat).value();
    else if (chat.status().code() != StatusCode::kNotFound) return chat.status();
    return b;
  }
  if (llama2c_vocab_size <= 0) return invalid_argument(path + ": a llama2.c tokenizer needs the vocabulary size of its model");
  b.kind = "llama2c";
  b.vocab_size = llama2c_vocab_size;
  return b;
}

Result<TokenizerBlob> tokenizer_blob_for(const Import& imp, const std::string& explicit_path) {
  const int vocab = imp.model.config.vocab_size;
  if (!explicit_path.empty()) return tokenizer_blob_from_file(explicit_path, vocab);
  if (imp.gguf) {
    TokenizerBlob b;
    b.kind = "gguf";
    b.bytes = gguf_tokenizer_only(*imp.gguf);
    return b;
  }
  if (imp.model.format == "hf") return tokenizer_blob_from_file(imp.model.path + "/tokenizer.json", vocab);
  KILN_ASSIGN_OR_RETURN(std::string path, find_llama2c_tokenizer(imp.model.path));
  return tokenizer_blob_from_file(path, vocab);
}

std::string tokenizer_where(const TokenizerBlob& blob, const std::string& model_path) {
  return blob.source.empty() ? model_path + ": tokenizer" : blob.source;
}

Result<std::unique_ptr<Tokenizer>> tokenizer_from_blob(const TokenizerBlob& blob, const std::string& where) {
  if (blob.kind == "llama2c") return load_llama2c_tokenizer_bytes(blob.bytes, where, blob.vocab_size);
  if (blob.kind == "hf-json")
    return tokenizer_from_json({reinterpret_cast<const char*>(blob.bytes.data()), blob.bytes.size()}, where);
  if (blob.kind == "gguf") {
    KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(MappedFile::from_bytes(blob.bytes, where)));
    return tokenizer_from_gguf(g);
  }
  if (blob.kind == "none") return not_found(where + ": the model was compiled without a tokenizer");
  return corrupt(where + ": unknown tokenizer kind '" + blob.kind + "'");
}

Result<std::optional<ModelChatTemplate>> chat_template_of_blob(const TokenizerBlob& blob, const std::string& where) {
  if (blob.chat) return blob.chat;
  if (blob.kind != "gguf") return std::optional<ModelChatTemplate>();
  KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(MappedFile::from_bytes(blob.bytes, where)));
  auto chat = chat_template_from_gguf(g, where);
  if (chat) return std::optional<ModelChatTemplate>(std::move(chat).value());
  if (chat.status().code() == StatusCode::kNotFound) return std::optional<ModelChatTemplate>();
  return chat.status();
}

Result<int> llama2c_token_count(std::span<const uint8_t> bytes, const std::string& name) {
  ByteReader r(bytes, name);
  KILN_ASSIGN_OR_RETURN(int32_t max_len, r.read<int32_t>("max_token_length"));
  if (max_len < 0) return r.error_at(0, "max_token_length is negative; is this a llama2.c tokenizer .bin?");
  int count = 0;
  while (r.remaining() > 0) {
    const std::string tok = "token " + std::to_string(count);
    KILN_ASSIGN_OR_RETURN(float score, r.read<float>(tok + " score"));
    (void)score;
    const size_t len_at = r.offset();
    KILN_ASSIGN_OR_RETURN(int32_t len, r.read<int32_t>(tok + " length"));
    if (len < 0 || len > max_len)
      return r.error_at(len_at, tok + " has length " + std::to_string(len) +
                                    ", outside 0..max_token_length; is this a llama2.c tokenizer .bin?");
    KILN_ASSIGN_OR_RETURN(auto text, r.read_bytes(static_cast<uint64_t>(len), tok + " text"));
    (void)text;
    if (count == INT32_MAX) return r.error("too many tokens");
    ++count;
  }
  return count;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path, int llama2c_vocab_size) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string json = (fs::path(path) / "tokenizer.json").string();
    if (!fs::exists(json, ec)) return not_found(path + ": the folder has no tokenizer.json");
    return load_tokenizer(json, llama2c_vocab_size);
  }
  if (!fs::exists(path, ec)) return not_found(path + ": no such file");
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const auto bytes = file->bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) {
    KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(std::move(file)));
    return tokenizer_from_gguf(g);
  }
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".json" || (ext != ".bin" && !bytes.empty() && bytes[0] == '{'))
    return tokenizer_from_json({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path);
  int vocab = llama2c_vocab_size;
  if (vocab <= 0) {
    KILN_ASSIGN_OR_RETURN(vocab, llama2c_token_count(bytes, path));
  }
  return load_llama2c_tokenizer_bytes(bytes, path, vocab);
}

}  // namespace kiln
