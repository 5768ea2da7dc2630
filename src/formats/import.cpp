#include "formats/import.h"

#include <algorithm>
#include <cstdio>
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

// detect_format, and for a file that is neither GGUF nor a llama2.c .bin: refused when its start is
// no llama2.c header (a text file, a damaged .kiln), instead of reporting a nonsense header.
Result<ModelFormat> detect_model_format(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(ModelFormat f, detect_format(path));
  if (f != ModelFormat::kLlama2c) return f;
  std::ifstream in(path, std::ios::binary);
  unsigned char head[28] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const auto got = static_cast<size_t>(in.gcount());
  const std::string ext = std::filesystem::path(path).extension().string();
  if (got == 0) return corrupt(path + ": the file is empty: not a model file");
  auto first_bytes = [&] {
    std::string s;
    char b[4];
    for (size_t i = 0; i < std::min<size_t>(got, 8); ++i) {
      std::snprintf(b, sizeof b, "%02x", head[i]);
      s += (i ? " " : "") + std::string(b);
    }
    return s;
  };
  if (ext == ".kiln")
    return corrupt(path + ": not a .kiln file: it starts with " + first_bytes() +
                   ", not the KILN magic (damaged, or not written by kiln compile)");
  // A llama2.c checkpoint has no magic: its .bin name, or a header of seven plausible sizes
  // (dim, hidden_dim, n_layers, n_heads, n_kv_heads, +-vocab_size, seq_len), says it is one.
  if (ext != ".bin") {
    int32_t h[7] = {};
    if (got == sizeof head) std::memcpy(h, head, sizeof h);
    const bool plausible = got == sizeof head && h[0] > 0 && h[0] <= (1 << 16) && h[1] > 0 && h[1] <= (1 << 20) &&
                           h[2] > 0 && h[2] <= 1024 && h[3] > 0 && h[3] <= 1024 && h[4] > 0 && h[4] <= h[3] &&
                           h[5] != 0 && h[5] > -(1 << 24) && h[5] < (1 << 24) && h[6] > 0 && h[6] <= (1 << 24) &&
                           h[0] % h[3] == 0;
    if (!plausible)
      return unsupported(path + ": not a model file: unknown format (it starts with " + first_bytes() +
                         "); kiln reads a .kiln, a .gguf, a llama2.c .bin or a Hugging Face folder");
  }
  return f;
}

Result<Import> import_model(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(ModelFormat f, detect_model_format(path));
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
