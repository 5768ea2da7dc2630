// A session over a compiled model: arena, scratch and KV cache reserved once; each step runs
// the program's kernels in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "runtime/model.h"
#include "runtime/decoder.h"
#include "runtime/step_trace.h"
#include "runtime/step_executor.h"

namespace kiln {

// A session's context when none is asked for: the model's maximum, but no more than
// kDefaultContext, so that a model trained for 128 k positions does not reserve a 128 k KV cache
// unless asked to, nor than LongRoPE's original context, past which the long factors (made for
// long prompts) would turn every position.
inline constexpr int kDefaultContext = 4096;
inline int default_context(const ModelConfig& c) { return std::min(c.short_rope_context(), kDefaultContext); }

class Session final : public Decoder {
 public:
  // n_ctx <= 0 takes default_context(). n_threads: the session's worker threads, the
  // caller's included (1: everything runs on the calling thread); created once, here. kv_dtype:
  // the KV cache's elements, f32 or f16.
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, int n_ctx,
                                                        int n_threads = 1, DType kv_dtype = DType::kF32);
  // The same on a runtime's executor, shared with other sessions.
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, int n_ctx,
                                                        std::shared_ptr<StepExecutor> executor, DType kv_dtype);

  // One token goes through the executor's decode queue, batched with the other sessions of the
  // same model decoding at that moment; several tokens run as prefill steps of max_tokens().
  Result<std::span<const float>> decode(std::span<const int> tokens) override;
  // Runs `tokens` and returns the logits of every one of them, [tokens.size()][vocab] (for
  // perplexity). At most max_logit_rows() at a time.
  Result<std::span<const float>> decode_all(std::span<const int> tokens);

  // Any thread (a C API stats call during generation): the tokens the cache holds, counting each
  // step's tokens as soon as the step is done.
  int position() const override { return pos_.load(std::memory_order_relaxed); }
  int n_ctx() const override { return n_ctx_; }
  int max_tokens() const { return model_->program().plan.max_tokens; }
  int max_step() const override { return max_tokens(); }
  int max_logit_rows() const { return model_->program().plan.logit_rows; }
  int n_threads() const { return executor_->n_threads(); }
  const ModelConfig& config() const override { return model_->config(); }
  const std::shared_ptr<const Model>& model() const { return model_; }
  void reset() override { pos_.store(0, std::memory_order_relaxed); }
  void rewind(int position) override {
    pos_.store(std::clamp(position, 0, pos_.load(std::memory_order_relaxed)), std::memory_order_relaxed);
  }
  void watch_cancel(const std::atomic<bool>* flag) override { cancel_ = flag; }
  DType kv_dtype() const { return kv_dtype_; }
  // Profiling and --check-numerics (step_trace.h): the session records its steps into `tracer`
  // (null: none, the default), which must outlive it or be unset first.
  void set_tracer(StepTracer* tracer) { tracer_ = tracer; }
  StepTracer* tracer() const { return tracer_; }
  size_t kv_cache_bytes() const { return keys_.size() + values_.size(); }
  size_t arena_bytes() const { return arena_.size() + row_arena_.size(); }
  size_t scratch_bytes() const { return scratch_.size(); }
  size_t reserved_bytes() const { return arena_.size() + scratch_.size() + kv_cache_bytes(); }
  // What create() would reserve for these arguments, without reserving it (for a budget).
  static size_t bytes_needed(const Model& model, int n_ctx, DType kv_dtype, int n_threads = 1);

  // The cache's rows for positions [0, n): keys then values, each [layer][n][kv_dim], as
  // kv_state_bytes(n) bytes (a session snapshot).
  size_t kv_state_bytes(int n) const;
  void copy_kv_out(int n, uint8_t* out) const;
  // The reverse: the cache holds those n positions and the session continues at n.
  Status copy_kv_in(int n, std::span<const uint8_t> bytes);

 private:
  Session() = default;
  // The first 64-byte aligned byte of an arena (allocated with 64 bytes of slack).
  static uint8_t* aligned64(std::vector<uint8_t>& v) {
    auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - p % 64) % 64);
  }
  // `held`: the caller holds the executor's mutex already.
  Result<std::span<const float>> step(std::span<const int> tokens, bool all_logits, bool held = false);
  // step()'s kernels, recorded into `t` (and checked, for check_numerics).
  Status cancel_point(int n_tokens) const;
  Status run_traced(const StepContext& ctx, StepTracer& t);
  // Checks a token this session may decode next.
  Status check_next(int token) const;
  // Runs one step for `batch` (its first request's session leads; the executor held): a batch of
  // one is the plain step; more run every row-wise node once over all rows and each node that
  // reads positions or a KV cache once per row, on that row's session (runtime/batched_decode.cpp).
  static void run_batch(std::span<DecodeRequest* const> batch);

  std::shared_ptr<const Model> model_;
  int n_ctx_ = 0;
  // Written by the thread running this session's step (its own, or the one that ran a batched
  // decode step for it); atomic so that position() may be read from any thread meanwhile.
  std::atomic<int> pos_{0};
  std::vector<uint8_t, std::allocator<uint8_t>> arena_;
  std::vector<uint8_t> scratch_;
  DType kv_dtype_ = DType::kF32;
  std::vector<uint8_t> keys_, values_;  // [layer][n_ctx][kv_dim] of kv_dtype_
  std::vector<int32_t> tokens_;
  bool logits_from_tail_ = false;  // the logits are a tail value: the last token's are in row 0
  // Batched decoding: a second arena in which a row's position-dependent nodes run, the outputs
  // of such a node for every row, and this session's logits when another session ran its step.
  std::vector<uint8_t> row_arena_;
  std::vector<float> staging_;
  std::vector<float> batch_logits_;
  std::shared_ptr<StepExecutor> executor_;
  StepTracer* tracer_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;  // watch_cancel()
};

}  // namespace kiln
