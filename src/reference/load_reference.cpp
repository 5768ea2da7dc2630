#include "reference/load_reference.h"

#include "formats/import.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

Result<LoadedReference> load_reference(const std::string& path, const std::string& tokenizer_path) {
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
  KILN_ASSIGN_OR_RETURN(TokenizerBlob blob, tokenizer_blob_for(imp, tokenizer_path));
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(blob, tokenizer_where(blob, path)));
  const int vocab = imp.model.config.vocab_size;
  if (tok->vocab_size() > vocab)
    return corrupt(path + ": the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the model only " +
                   std::to_string(vocab));
  LoadedReference out;
  out.path = path;
  KILN_ASSIGN_OR_RETURN(out.model, ReferenceModel::create(std::move(imp.model)));
  out.tokenizer = std::move(tok);
  return out;
}

}  // namespace kiln
