// The .kiln quantization record: each weight's scheme, group size, layout and bytes, and the
// totals the compiler counted, as JSON (what `kiln inspect` and a reader of the file see of how
// it was made; the runtime does not need it to run).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "artifact/program_image.h"

namespace kiln {

struct QuantTotals {
  int64_t source_bytes = 0;    // weights as the source stored them
  int64_t compiled_bytes = 0;  // weights as compiled
  std::map<std::string, int64_t> scheme_bytes;  // compiled bytes per scheme
  int64_t parameters = 0;
  std::vector<std::string> notes;
  // How the integer weights were rounded: "rtn", or "imatrix" (importance-weighted, from
  // calibration statistics: their source, the hash of their tokens or file, the token count).
  std::string method = "rtn";
  std::string calibration_source, calibration_hash;
  int64_t calibration_tokens = 0;
  int64_t weights_calibrated = 0;  // weights rounded with the statistics
};

std::string encode_quant_record(const ProgramImage& img, const QuantTotals& totals);

}  // namespace kiln
