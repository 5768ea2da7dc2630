// The .kiln source record decoder on arbitrary bytes. Beyond "no crash": a record it
// accepts encodes to a section that decodes to the same record.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "artifact/source_section.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = kiln::decode_source_section({data, size}, "fuzz.kiln");
  if (!r) return 0;
  const std::string once = kiln::encode_source_section(*r);
  auto again = kiln::decode_source_section({reinterpret_cast<const uint8_t*>(once.data()), once.size()}, "again");
  if (!again || kiln::encode_source_section(*again) != once) std::abort();
  return 0;
}
