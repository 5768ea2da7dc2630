// llama2.c checkpoint reader on arbitrary bytes; an accepted file is also turned into a Model.
#include <cstdint>
#include <vector>

#include "formats/llama2c.h"
#include "reference/reference_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.bin");
  auto m = kiln::read_llama2c(f);
  if (m) (void)kiln::ReferenceModel::create(std::move(m).value());
  return 0;
}
