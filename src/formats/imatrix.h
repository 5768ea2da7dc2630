// llama.cpp's importance matrices, as `llama-imatrix` writes them: per weight, the mean square
// of each input column's activation over its calibration text (what quant/importance_quantizer.h
// rounds with). Two formats, told apart by the GGUF magic:
//   - GGUF: per weight NAME, an f32 tensor "NAME.in_sum2" [n_mat][n_val] (sums of squares) and
//     "NAME.counts" [n_mat][1] (the rows summed); kiln has no expert matrices, so n_mat is 1;
//   - the legacy .dat: i32 entry count; per entry i32 name length, the name, i32 ncall, i32 n_val,
//     n_val f32 (the mean times ncall); then i32 chunk count, i32 length and the dataset's name.
// Names are GGUF tensor names ("blk.0.attn_q.weight"), which are kiln's weight names.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kiln {

struct ImatrixFile {
  std::map<std::string, std::vector<float>> importance;  // per weight: one mean square per input column
  std::string format;   // "gguf" or "dat"
  std::string dataset;  // the calibration text llama-imatrix ran on, when the file names it
  int64_t chunks = 0;   // its chunks, when the file says
  int64_t chunk_size = 0;  // tokens a chunk, when the file says (the GGUF form)
};

// Every value finite and non-negative, every entry non-empty; errors name the file and the place.
Result<ImatrixFile> read_imatrix(const MappedFile& file);
Result<ImatrixFile> read_imatrix_file(const std::string& path);

}  // namespace kiln
