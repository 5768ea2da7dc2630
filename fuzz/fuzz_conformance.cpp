// The .kiln conformance section's decoder on arbitrary bytes. Beyond "no crash": a report it
// accepts encodes to a section that decodes to the same report.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "artifact/conformance_section.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = kiln::decode_conformance_section({data, size}, "fuzz.kiln");
  if (!r) return 0;
  const std::string once = kiln::encode_conformance_section(*r);
  auto again = kiln::decode_conformance_section({reinterpret_cast<const uint8_t*>(once.data()), once.size()}, "again");
  if (!again || kiln::encode_conformance_section(*again) != once) std::abort();
  return 0;
}
