// What the generation loop needs of a model instance: feed tokens, get the next logits.
#pragma once

#include <atomic>
#include <span>

#include "formats/model_config.h"

namespace kiln {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Runs `tokens` at the next positions; returns the logits after the last of them.
  virtual Result<std::span<const float>> decode(std::span<const int> tokens) = 0;
  virtual int position() const = 0;
  // The most tokens one decode() runs as a single step (a longer call is several steps, and a
  // cancel is checked between them).
  virtual int max_step() const { return 1 << 30; }
  virtual int n_ctx() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual void reset() = 0;
  // Forgets the positions from `position` on (0 <= position <= position()): the cache keeps the
  // first `position` tokens, the next decode() continues there.
  virtual void rewind(int position) = 0;
  // A flag raised from another thread to stop: an instance that can (Session) also checks
  // it inside a multi-token step and fails that step with StatusCode::kCancelled, its position
  // unchanged. nullptr: none. Only between steps otherwise.
  virtual void watch_cancel(const std::atomic<bool>* flag) { (void)flag; }
};

// watch_cancel(flag) for a scope: the decoder stops watching when it ends.
class CancelWatch {
 public:
  CancelWatch(Decoder& d, const std::atomic<bool>* flag) : d_(d) { d_.watch_cancel(flag); }
  ~CancelWatch() { d_.watch_cancel(nullptr); }
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

 private:
  Decoder& d_;
};

}  // namespace kiln
