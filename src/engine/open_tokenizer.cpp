#include "engine/open_tokenizer.h"

#include "artifact/tokenizer_section.h"
#include "engine/open_model.h"
#include "artifact/kiln_image_reader.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& path, int vocab_size) {
  if (is_kiln_file(path)) {
    KILN_ASSIGN_OR_RETURN(auto file, open_kiln(path));
    if (!file->has_section(KilnSection::kTokenizer)) return corrupt(path + ": no tokenizer section");
    KILN_ASSIGN_OR_RETURN(TokenizerBlob blob, decode_tokenizer_section(file->section(KilnSection::kTokenizer), path));
    return tokenizer_from_blob(blob, path + ": tokenizer");
  }
  return load_tokenizer(path, vocab_size);
}

}  // namespace kiln
