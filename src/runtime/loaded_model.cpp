#include "runtime/loaded_model.h"

#include <algorithm>
#include <filesystem>

#include "formats/import.h"

namespace kiln {

namespace fs = std::filesystem;

Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path, int llama2c_vocab_size) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_tokenizer_file(path + "/tokenizer.json", llama2c_vocab_size);
  KILN_ASSIGN_OR_RETURN(ModelFormat f, detect_format(path));
  if (f == ModelFormat::kGguf) {
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(std::move(file)));
    return tokenizer_from_gguf(g);
  }
  if (fs::path(path).extension() == ".json") {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
    return tokenizer_from_json(text, path);
  }
  if (llama2c_vocab_size <= 0)
    return invalid_argument(path + ": a llama2.c tokenizer needs the vocabulary size of its model");
  return load_llama2c_tokenizer(path, llama2c_vocab_size);
}

namespace {

// llama2.c keeps the tokenizer beside the checkpoint: tokenizer.bin, else the one tok*.bin.
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
  if (found.empty())
    return not_found(model_path + ": no tokenizer.bin or tok*.bin beside the model; pass --tokenizer");
  if (found.size() > 1)
    return invalid_argument(model_path + ": several tok*.bin files beside the model; pass --tokenizer");
  return found.front();
}

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path) {
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
  const int vocab = imp.model.config.vocab_size;
  std::unique_ptr<Tokenizer> tok;
  if (!tokenizer_path.empty()) {
    KILN_ASSIGN_OR_RETURN(tok, load_tokenizer_file(tokenizer_path, vocab));
  } else if (imp.gguf) {
    KILN_ASSIGN_OR_RETURN(tok, tokenizer_from_gguf(*imp.gguf));
  } else if (imp.model.format == "hf") {
    KILN_ASSIGN_OR_RETURN(tok, load_tokenizer_file(path + "/tokenizer.json", vocab));
  } else {
    KILN_ASSIGN_OR_RETURN(std::string tpath, find_llama2c_tokenizer(path));
    KILN_ASSIGN_OR_RETURN(tok, load_tokenizer_file(tpath, vocab));
  }
  if (tok->vocab_size() > vocab)
    return corrupt(path + ": the tokenizer has " + std::to_string(tok->vocab_size()) +
                   " tokens but the model only " + std::to_string(vocab));
  LoadedModel out;
  out.path = path;
  KILN_ASSIGN_OR_RETURN(out.model, Model::create(std::move(imp.model)));
  out.tokenizer = std::move(tok);
  return out;
}

}  // namespace kiln
