// llama.cpp importance-matrix reader (formats/imatrix.h) on arbitrary bytes, both formats (the
// GGUF magic picks). Beyond "no crash": what it accepts is non-empty, finite and non-negative.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "formats/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.imatrix");
  auto r = kiln::read_imatrix(*f);
  if (!r) return 0;
  for (const auto& [name, v] : r->importance) {
    if (v.empty()) std::abort();
    for (float x : v)
      if (!std::isfinite(x) || x < 0) std::abort();
  }
  return 0;
}
