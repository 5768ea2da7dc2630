#include "tools/tokenizer_arg.h"

#include "runtime/kiln_image.h"
#include "tokenizer/tokenizer_source.h"
#include "tools/model_open.h"

namespace kiln::cli {

Result<std::unique_ptr<Tokenizer>> open_tokenizer_arg(const std::string& path, int vocab_size) {
  if (is_kiln_file(path)) {
    KILN_ASSIGN_OR_RETURN(auto file, open_kiln(path));
    if (!file->has_section(KilnSection::kTokenizer)) return corrupt(path + ": no tokenizer section");
    KILN_ASSIGN_OR_RETURN(TokenizerBlob blob, decode_tokenizer_section(file->section(KilnSection::kTokenizer), path));
    return tokenizer_from_blob(blob, path + ": tokenizer");
  }
  return load_tokenizer(path, vocab_size);
}

}  // namespace kiln::cli
