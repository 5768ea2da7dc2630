// GGUF reader and model mapping on arbitrary bytes.
#include <cstdint>
#include <vector>

#include "formats/gguf.h"
#include "reference/reference_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
  auto g = kiln::read_gguf(f);
  if (!g) return 0;
  auto m = kiln::gguf_to_model(*g);
  if (m) (void)kiln::ReferenceModel::create(std::move(m).value());
  return 0;
}
