// safetensors reader on arbitrary bytes.
#include <cstdint>
#include <vector>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
  (void)kiln::read_safetensors(f);
  return 0;
}
