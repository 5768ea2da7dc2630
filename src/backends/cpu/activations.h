// What a matmul kernel reads besides x (kernels.h's Activations), made once per matmul from the
// rows of x by the table's preparation functions. One function for the back end, the kernel
// tests and the kernel benchmark, so that they prepare exactly what the kernels are run with.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// Where the parts of one preparation for up to `tokens` rows of at most `cols` elements lie in
// its scratch: 64-byte aligned offsets from a 64-byte aligned base, `bytes` in all.
struct ActivationScratch {
  ActivationScratch(int64_t cols, int tokens);
  size_t q = 0, scales = 0, qsums = 0;                           // A8 rows
  size_t digits = 0, dscales = 0, dsums = 0, psums = 0;          // W8A16, one token
  size_t a16 = 0, a16_scales = 0, a16_sums = 0;                  // W4A16 rows
  size_t panels = 0;  // bf16 tiles, or f32 / int8 / a16 panels with their scales and sums
  size_t bytes = 0;
};

// Prepares what table t's kernels for p's scheme need from n rows of x (cols wide, rows cols
// apart), in the format t.activation_format gives, in `scratch`, laid out by `layout` (made for
// at least cols and n). Over the pool where one is given and there are several rows, else
// inline. The padding tokens of the last panel are written (zeros), never left over from before.
Activations prepare_activations(const KernelTable& t, const QuantParams& p, int64_t cols, const float* x, int n,
                                const ActivationScratch& layout, uint8_t* scratch, ThreadPool* pool);
// The same in a format chosen before (t.activation_format(p, n, cols)).
Activations prepare_activations(const KernelTable& t, ActivationFormat format, const QuantParams& p, int64_t cols,
                                const float* x, int n, const ActivationScratch& layout, uint8_t* scratch, ThreadPool* pool);

}  // namespace kiln::cpu
