// GGUF reader, model mapping and the embedded vocabulary on arbitrary bytes.
// Seeds: fuzz/corpus/gguf/ (models' heads, quantized blocks, a Gemma-style vocabulary read as
// tokenizer.ggml.pre "gemma4").
#include <cstdint>
#include <vector>

#include "formats/gguf.h"
#include "reference/reference_model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
  auto g = kiln::read_gguf(f);
  if (!g) return 0;
  if (auto t = kiln::tokenizer_from_gguf(*g)) {
    for (const char* text : {"Hello world 12345,  x\n\n<bos>y", "\xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9 We'll"}) {
      auto ids = (*t)->encode(text, {});
      if (!ids) continue;
      for (int id : *ids)
        if (id < 0 || id >= (*t)->vocab_size()) __builtin_trap();
      (void)(*t)->decode(*ids, {});
    }
  }
  auto m = kiln::gguf_to_model(*g);
  if (m) (void)kiln::ReferenceModel::create(std::move(m).value());
  return 0;
}
