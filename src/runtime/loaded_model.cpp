#include "runtime/loaded_model.h"

#include <filesystem>

#include "formats/import.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// The file a tokenizer error must name: the tokenizer's own file, not the model's. It follows the
// lookup of tokenizer_blob_for, which has already succeeded, so the llama2.c case finds exactly
// one file. A GGUF's vocabulary is part of the model file.
std::string tokenizer_where(const Import& imp, const std::string& path, const std::string& explicit_path) {
  std::error_code ec;
  if (!explicit_path.empty())
    return fs::is_directory(explicit_path, ec) ? explicit_path + "/tokenizer.json" : explicit_path;
  if (imp.gguf) return path + ": tokenizer";
  if (imp.model.format == "hf") return imp.model.path + "/tokenizer.json";
  const fs::path dir = fs::path(imp.model.path).parent_path().empty() ? fs::path(".") : fs::path(imp.model.path).parent_path();
  if (fs::exists(dir / "tokenizer.bin", ec)) return (dir / "tokenizer.bin").string();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tok", 0) == 0 && e.path().extension() == ".bin") return e.path().string();
  }
  return path + ": tokenizer";
}

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path) {
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
  KILN_ASSIGN_OR_RETURN(TokenizerBlob blob, tokenizer_blob_for(imp, tokenizer_path));
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(blob, tokenizer_where(imp, path, tokenizer_path)));
  const int vocab = imp.model.config.vocab_size;
  if (tok->vocab_size() > vocab)
    return corrupt(path + ": the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the model only " +
                   std::to_string(vocab));
  LoadedModel out;
  out.path = path;
  KILN_ASSIGN_OR_RETURN(out.model, Model::create(std::move(imp.model)));
  out.tokenizer = std::move(tok);
  return out;
}

}  // namespace kiln
