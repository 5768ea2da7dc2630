// A compiled program bound to its back ends and weights: immutable, shared by many sessions.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/api/backend.h"
#include "artifact/program_image.h"
#include "graph/program.h"

namespace kiln {

class Model {
 public:
  // Binds every node to its back end (by the name the compiler recorded) and prepares its kernel.
  // `extra` back ends are searched before the registered ones (tests plug limited ones in).
  static Result<std::shared_ptr<const Model>> create(ProgramImage image,
                                                             std::span<const Backend* const> extra = {});

  const ModelConfig& config() const { return image_.config; }
  const Program& program() const { return image_.program; }
  const ProgramImage& image() const { return image_; }
  const ModelConstants& constants() const { return constants_; }
  // Those of a session of n_ctx positions: LongRoPE's long factors past the original context.
  const ModelConstants& constants_for(int n_ctx) const {
    return config().rope_scaling.long_factors_for(n_ctx) ? constants_long_ : constants_;
  }
  std::span<const std::unique_ptr<Kernel>> kernels() const { return kernels_; }
  std::span<const Backend* const> backends() const { return backends_; }  // those the program uses
  // The kernels each back end runs here and why not faster ones: "cpu: avx2 (not avx512: ...)".
  std::string kernel_choice() const;
  // A fingerprint of the program and every weight byte (a session snapshot is bound to it);
  // computed on first use, as it reads every page of the weights.
  uint64_t identity() const;
  // The weights' bytes as stored (mapped or in memory).
  uint64_t weight_bytes() const;
  // Maps every page of the weights into this process now (MADV_POPULATE_READ, else a read per
  // page), so that the first step does not take a page fault per 4 KiB of a mapped .kiln: a
  // loader calls it on its own thread to move that cost out of the time to the first token.
  void prefault() const;

 private:
  Model() = default;
  ProgramImage image_;
  ModelConstants constants_;
  ModelConstants constants_long_;  // constants_ with rope_inv_freq_long (LongRoPE), else unused
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<const Backend*> backends_;
  mutable std::once_flag identity_once_;
  mutable uint64_t identity_ = 0;
};

}  // namespace kiln
