// What a compiled program's weights weigh: every byte, what one decoded token reads of them (the
// decode roofline's numerator, with the KV cache), the scheme most matmul bytes are in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

class Model;

// One storage scheme's part of the weights: `scheme` is describe() of the layout ("w5a16 g32
// sym", "w6a16", "w8a16 g32", "f32"), so GGML's Q5_0 and Q5_K, both w5a16, are told apart.
struct SchemeShare {
  std::string scheme;
  uint64_t bytes = 0;           // of the program's weights
  uint64_t read_per_token = 0;  // what one decoded token reads of them
};

struct WeightSummary {
  uint64_t weight_bytes = 0;    // every weight of the program
  uint64_t read_per_token = 0;  // what one decoded token reads of them
  std::string scheme;           // of most of the matmul bytes
  int group = 0;
  uint64_t parameters = 0;
  std::vector<SchemeShare> mix;  // every weight by its layout, most bytes first
};

// The SchemeShare::scheme of a weight.
std::string weight_scheme_label(const WeightDesc& w);

// Decode reads every weight once per token, except an embedding table read by nothing else,
// of which it gathers one row.
WeightSummary summarize_weights(const Model& m);

}  // namespace kiln
