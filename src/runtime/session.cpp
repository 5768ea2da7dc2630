#include "runtime/session.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "runtime/numerics_check.h"

namespace kiln {

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, int n_ctx,
                                                              int n_threads, DType kv_dtype) {
  if (n_threads < 1 || n_threads > 256)
    return invalid_argument("thread count " + std::to_string(n_threads) + " is outside 1..256");
  return create(std::move(model), n_ctx, std::make_shared<StepExecutor>(n_threads), kv_dtype);
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, int n_ctx,
                                                              std::shared_ptr<StepExecutor> executor, DType kv_dtype) {
  if (!model || !executor) return invalid_argument("a session needs a model and an executor");
  if (kv_dtype != DType::kF32 && kv_dtype != DType::kF16)
    return invalid_argument("a KV cache holds f32 or f16, not " + std::string(dtype_name(kv_dtype)));
  const ModelConfig& c = model->config();
  if (n_ctx <= 0) n_ctx = default_context(c);
  if (n_ctx > c.max_seq_len)
    return invalid_argument("context of " + std::to_string(n_ctx) + " exceeds the model's maximum of " +
                            std::to_string(c.max_seq_len));
  std::unique_ptr<Session> s(new Session());
  const Program& p = model->program();
  size_t scratch = 0;
  for (const Backend* b : model->backends())
    scratch = std::max(scratch, b->session_scratch_bytes(p.graph, p.plan.max_tokens, n_ctx, executor->n_threads()));
  const size_t kv = static_cast<size_t>(c.n_layers) * static_cast<size_t>(n_ctx) * static_cast<size_t>(c.kv_dim()) *
                   static_cast<size_t>(dtype_info(kv_dtype).block_bytes);
  // Arena offsets are 64-byte aligned; allocate with slack so that the base can be too. A
  // failed allocation (a huge n_ctx) is a status naming the bytes, not an exception.
  try {
    s->arena_.assign(static_cast<size_t>(p.plan.arena_bytes) + 64, 0);
    s->scratch_.assign(scratch + 64, 0);
    s->keys_.assign(kv, 0);
    s->values_.assign(kv, 0);
  } catch (const std::bad_alloc&) {
    return out_of_memory("a session of " + std::to_string(n_ctx) + " positions needs " +
                         std::to_string((static_cast<size_t>(p.plan.arena_bytes) + scratch + 2 * kv) >> 20) +
                         " MiB (KV cache " + std::to_string((2 * kv) >> 20) + " MiB), which could not be allocated");
  }
  s->kv_dtype_ = kv_dtype;
  s->tokens_.assign(static_cast<size_t>(p.plan.max_tokens), 0);
  s->logits_from_tail_ = tail_values(p.graph)[static_cast<size_t>(p.graph.logits_output)];
  s->n_ctx_ = n_ctx;
  s->model_ = std::move(model);
  s->executor_ = std::move(executor);
  return s;
}

size_t Session::bytes_needed(const Model& model, int n_ctx, DType kv_dtype, int n_threads) {
  const ModelConfig& c = model.config();
  if (n_ctx <= 0) n_ctx = default_context(c);
  const Program& p = model.program();
  size_t scratch = 0;
  for (const Backend* b : model.backends())
    scratch = std::max(scratch, b->session_scratch_bytes(p.graph, p.plan.max_tokens, n_ctx, n_threads));
  const size_t kv = static_cast<size_t>(c.n_layers) * static_cast<size_t>(n_ctx) * static_cast<size_t>(c.kv_dim()) *
                   static_cast<size_t>(dtype_info(kv_dtype).block_bytes);
  return static_cast<size_t>(p.plan.arena_bytes) + 64 + scratch + 64 + 2 * kv;
}

size_t Session::kv_state_bytes(int n) const {
  const ModelConfig& c = model_->config();
  return 2 * static_cast<size_t>(c.n_layers) * static_cast<size_t>(n) * static_cast<size_t>(c.kv_dim()) *
         static_cast<size_t>(dtype_info(kv_dtype_).block_bytes);
}

void Session::copy_kv_out(int n, uint8_t* out) const {
  const ModelConfig& c = model_->config();
  const size_t row = static_cast<size_t>(c.kv_dim()) * static_cast<size_t>(dtype_info(kv_dtype_).block_bytes);
  const size_t layer = static_cast<size_t>(n_ctx_) * row;
  for (const auto* cache : {&keys_, &values_})
    for (int l = 0; l < c.n_layers; ++l) {
      std::memcpy(out, cache->data() + static_cast<size_t>(l) * layer, static_cast<size_t>(n) * row);
      out += static_cast<size_t>(n) * row;
    }
}

Status Session::copy_kv_in(int n, std::span<const uint8_t> bytes) {
  if (n < 0 || n > n_ctx_) return invalid_argument("a snapshot of " + std::to_string(n) + " positions does not fit a context of " + std::to_string(n_ctx_));
  if (bytes.size() != kv_state_bytes(n)) return corrupt("the snapshot's KV cache has " + std::to_string(bytes.size()) + " bytes, " + std::to_string(kv_state_bytes(n)) + " expected");
  const ModelConfig& c = model_->config();
  const size_t row = static_cast<size_t>(c.kv_dim()) * static_cast<size_t>(dtype_info(kv_dtype_).block_bytes);
  const size_t layer = static_cast<size_t>(n_ctx_) * row;
  const uint8_t* in = bytes.data();
  for (auto* cache : {&keys_, &values_})
    for (int l = 0; l < c.n_layers; ++l) {
      std::memcpy(cache->data() + static_cast<size_t>(l) * layer, in, static_cast<size_t>(n) * row);
      in += static_cast<size_t>(n) * row;
    }
  pos_.store(n, std::memory_order_relaxed);
  return Status::ok();
}

// A multi-token step is long (a 128-token W4A16 step of TinyLlama takes ~1 s on 2 cores): a cancel
// is seen between its instructions. The cache rows it wrote past pos_ are then never read (pos_
// does not move). A one-token step may be serving other sessions' rows too: it runs to its end.
Status Session::cancel_point(int n_tokens) const {
  if (n_tokens > 1 && cancel_ != nullptr && cancel_->load(std::memory_order_relaxed))
    return cancelled("cancelled during a " + std::to_string(n_tokens) + "-token step");
  return Status::ok();
}

Result<std::span<const float>> Session::step(std::span<const int> tokens, bool all_logits, bool held) {
  const int n = static_cast<int>(tokens.size());
  const ModelConfig& c = model_->config();
  if (n == 0 || n > max_tokens()) return invalid_argument("a step takes 1 to " + std::to_string(max_tokens()) + " tokens");
  if (all_logits && n > max_logit_rows())
    return invalid_argument("a step that returns every token's logits takes 1 to " + std::to_string(max_logit_rows()) + " tokens");
  if (pos_ + n > n_ctx_) return context_full("the context of " + std::to_string(n_ctx_) + " tokens is full");
  for (int i = 0; i < n; ++i) {
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= c.vocab_size)
      return invalid_argument("token id " + std::to_string(tokens[static_cast<size_t>(i)]) + " is outside the vocabulary");
    tokens_[static_cast<size_t>(i)] = tokens[static_cast<size_t>(i)];
  }
  StepContext ctx;
  ctx.arena = aligned64(arena_);
  ctx.tokens = tokens_.data();
  ctx.n_tokens = n;
  ctx.first_pos = pos_;
  ctx.all_logits = all_logits;
  ctx.n_ctx = n_ctx_;
  ctx.key_cache = keys_.data();
  ctx.value_cache = values_.data();
  ctx.kv_dtype = kv_dtype_;
  ctx.model = &model_->constants_for(n_ctx_);
  ctx.scratch = aligned64(scratch_);
  ctx.scratch_size = scratch_.size() - 64;
  {
    std::unique_lock<StepExecutor::StepLock> hold(executor_->step_lock(), std::defer_lock);
    if (!held) hold.lock();
    ctx.pool = executor_->pool();
    if (tracer_ != nullptr) {
      KILN_RETURN_IF_ERROR(run_traced(ctx, *tracer_));
    } else {
      for (const auto& k : model_->kernels()) {
        KILN_RETURN_IF_ERROR(cancel_point(n));
        KILN_RETURN_IF_ERROR(k->run(ctx));
      }
    }
  }
  pos_.fetch_add(n, std::memory_order_relaxed);
  const Program& p = model_->program();
  const auto* logits = reinterpret_cast<const float*>(ctx.arena + p.plan.offsets[static_cast<size_t>(p.graph.logits_output)]);
  const size_t v = static_cast<size_t>(c.vocab_size);
  if (all_logits) return std::span<const float>(logits, v * static_cast<size_t>(n));
  // The tail ran on the last token alone and wrote its logits to row 0 (in a graph without a
  // tail, every row was computed).
  const size_t row = logits_from_tail_ ? 0 : static_cast<size_t>(n - 1);
  return std::span<const float>(logits + v * row, v);
}

Status Session::run_traced(const StepContext& ctx, StepTracer& t) {
  const bool steps = t.level() != ProfileLevel::kOff;
  const bool each = t.per_instruction();
  const size_t step = steps ? t.begin_step(ctx.n_tokens, ctx.first_pos, ctx.n_tokens, ctx.all_logits) : 0;
  const Program& p = model_->program();
  const auto& kernels = model_->kernels();
  Status st;
  // One clock read per instruction: an instruction's end is the next one's begin (a read costs
  // ~25 ns, a tenth of a tiny model's instruction), unless work that is not an instruction's
  // (a hook, the numerics scan) ran in between.
  uint64_t begin = each ? t.now_ns() : 0;
  for (size_t k = 0; k < kernels.size() && st; ++k) {
    if (st = cancel_point(ctx.n_tokens); !st) break;
    st = kernels[k]->run(ctx);
    if (each) {
      const uint64_t end = t.now_ns();
      t.instruction(static_cast<int>(k), begin, end);
      begin = end;
    }
    if (!st) break;
    const int rows = output_rows(p.graph.nodes[k], ctx);
    if (t.after_instruction) t.after_instruction(static_cast<int>(k), ctx, rows);
    if (t.check_numerics())
      if (auto f = scan_outputs(p, static_cast<int>(k), ctx, rows, ctx.first_pos)) {
        st = numerics_error(*f);
        t.set_fault(std::move(*f));
      }
    if (each && (t.after_instruction || t.check_numerics())) begin = t.now_ns();
  }
  if (steps) t.end_step(step);
  return st;
}

Status Session::check_next(int token) const {
  if (token < 0 || token >= model_->config().vocab_size)
    return invalid_argument("token id " + std::to_string(token) + " is outside the vocabulary");
  if (pos_ + 1 > n_ctx_) return context_full("the context of " + std::to_string(n_ctx_) + " tokens is full");
  return Status::ok();
}

Result<std::span<const float>> Session::decode(std::span<const int> tokens) {
  if (tokens.empty()) return invalid_argument("decode: no tokens");
  if (tokens.size() > 1) {
    std::span<const float> logits;
    for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(max_tokens())) {
      const size_t n = std::min(tokens.size() - i, static_cast<size_t>(max_tokens()));
      KILN_ASSIGN_OR_RETURN(logits, step(tokens.subspan(i, n), false));
    }
    return logits;
  }
  KILN_RETURN_IF_ERROR(check_next(tokens[0]));
  DecodeRequest req;
  req.session = this;
  req.token = tokens[0];
  const size_t most = static_cast<size_t>(std::min(max_tokens(), max_logit_rows()));
  executor_->decode_shared(
      req, most, [&](const DecodeRequest& r) { return r.session->model_ == model_; },
      [](std::span<DecodeRequest* const> batch) { run_batch(batch); });
  if (!req.status) return req.status;
  return req.logits;
}

Result<std::span<const float>> Session::decode_all(std::span<const int> tokens) { return step(tokens, true); }

}  // namespace kiln
