#include "formats/import.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/hf_folder.h"
#include "formats/llama2c.h"

namespace kiln {

Result<ModelFormat> detect_format(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return not_found(path + ": no such file or folder");
  if (std::filesystem::is_directory(st)) return ModelFormat::kHfFolder;
  // A .gguf goes to the GGUF reader whatever it starts with, so that a bad magic is reported as
  // such rather than as a nonsense llama2.c header.
  if (std::filesystem::path(path).extension() == ".gguf") return ModelFormat::kGguf;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return ModelFormat::kGguf;
  return ModelFormat::kLlama2c;
}

Result<Import> import_model(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(ModelFormat f, detect_format(path));
  Import out;
  switch (f) {
    case ModelFormat::kHfFolder: {
      KILN_ASSIGN_OR_RETURN(out.model, read_hf_folder(path));
      break;
    }
    case ModelFormat::kGguf: {
      KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
      KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(std::move(file)));
      auto shared = std::make_shared<const GgufFile>(std::move(g));
      KILN_ASSIGN_OR_RETURN(out.model, gguf_to_model(*shared));
      out.gguf = std::move(shared);
      break;
    }
    case ModelFormat::kLlama2c: {
      KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
      KILN_ASSIGN_OR_RETURN(out.model, read_llama2c(std::move(file)));
      break;
    }
  }
  return out;
}

}  // namespace kiln
