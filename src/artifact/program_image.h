// What the compiler hands the runtime: the graph after its passes, the memory plan, and the
// weights in the layout the chosen kernels read. The .kiln file is this, serialized
// (kiln_image_writer.h, kiln_image_reader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "formats/model_config.h"
#include "formats/tokenizer_blob.h"
#include "graph/program.h"

namespace kiln {

// A program with everything it needs to run, wherever its bytes live.
struct ProgramImage {
  ModelConfig config;
  Program program;
  std::vector<std::span<const uint8_t>> weights;  // per graph weight
  std::vector<std::shared_ptr<const void>> owners;  // keep the weight bytes alive
  TokenizerBlob tokenizer;
  // The CPU features the kernels may use (the .kiln target's; ~0: whatever the machine has).
  uint64_t cpu_features = ~0ull;
};

}  // namespace kiln
