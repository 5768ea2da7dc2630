// What a compiled program's weights weigh: every byte, what one decoded token reads of them (the
// decode roofline's numerator, with the KV cache), the scheme most matmul bytes are in.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

class Model;

struct WeightSummary {
  uint64_t weight_bytes = 0;    // every weight of the program
  uint64_t read_per_token = 0;  // what one decoded token reads of them
  std::string scheme;           // of most of the matmul bytes
  int group = 0;
  uint64_t parameters = 0;
};

// Decode reads every weight once per token, except an embedding table read by nothing else,
// of which it gathers one row.
WeightSummary summarize_weights(const Model& m);

}  // namespace kiln
