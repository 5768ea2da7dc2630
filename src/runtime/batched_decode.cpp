// One decode step for the next tokens of several sessions of one model (StepExecutor::decode_shared
// gathers them): every row-wise node runs once over all rows, each weight read once for all of
// them, and each node that reads a position or a KV cache once per row, on that row's session.
// Run by the leading session, whose arenas hold the step; a batch of one is the plain step.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <new>

#include "runtime/numerics_check.h"
#include "runtime/session.h"

namespace kiln {

namespace {
// Ops whose output row for a token depends on that token's row of input alone (and the
// weights): in a batched step they run once over the rows of every session. Any other op (RoPE,
// the KV store, attention, and whatever op is added later until it is listed here) reads a
// position or a session's KV cache and runs once per row.
bool row_wise(OpCode op) {
  switch (op) {
    case OpCode::kEmbed:
    case OpCode::kRmsNorm:
    case OpCode::kMatMul:
    case OpCode::kSwiGLU:
    case OpCode::kGeGLU:
    case OpCode::kSoftcap:
    case OpCode::kAdd:
    case OpCode::kHeadRmsNorm:
    case OpCode::kMatMulQKV:
    case OpCode::kGateUpSwiGLU:
    case OpCode::kMatMulAdd:
    case OpCode::kRmsNormMatMulQKV:
    case OpCode::kRmsNormGateUpSwiGLU:
      return true;
    default:
      return false;
  }
}
}  // namespace

void Session::run_batch(std::span<DecodeRequest* const> batch) {
  Session& lead = *batch[0]->session;
  auto finish = [](DecodeRequest* r, Status st, std::span<const float> logits) {
    r->status = std::move(st);
    r->logits = logits;  // `done` is set by StepExecutor::complete
  };
  if (batch.size() == 1) {
    // Alone: the plain step, the same bits as ever.
    DecodeRequest* r = batch[0];
    auto l = r->session->step(std::span<const int>(&r->token, 1), false, /*held=*/true);
    finish(r, l ? Status::ok() : l.status(), l ? *l : std::span<const float>());
    return;
  }
  const Program& p = lead.model_->program();
  const Graph& g = p.graph;
  const auto& offsets = p.plan.offsets;
  const int n = static_cast<int>(batch.size());
  const size_t vocab = static_cast<size_t>(lead.model_->config().vocab_size);
  try {
    if (lead.row_arena_.empty()) lead.row_arena_.assign(lead.arena_.size(), 0);
    for (DecodeRequest* r : batch)
      if (r->session->batch_logits_.size() != vocab) r->session->batch_logits_.assign(vocab, 0.0f);
  } catch (const std::bad_alloc&) {
    for (DecodeRequest* r : batch) finish(r, out_of_memory("no memory for a batched decode step"), {});
    return;
  }
  for (int i = 0; i < n; ++i) lead.tokens_[static_cast<size_t>(i)] = batch[static_cast<size_t>(i)]->token;
  StepContext all;
  all.arena = aligned64(lead.arena_);
  all.tokens = lead.tokens_.data();
  all.n_tokens = n;
  all.all_logits = true;  // every row is some session's last token
  all.model = &lead.model_->constants_for(lead.n_ctx_);
  all.scratch = aligned64(lead.scratch_);
  all.scratch_size = lead.scratch_.size() - 64;
  all.pool = lead.executor_->pool();
  // The batch's tracers (see step_trace.h): each records the whole step; a row whose session
  // checks numerics and meets a non-finite value fails alone (rows do not mix).
  std::array<Status, StepExecutor::kMaxBatch> row_status;
  std::array<size_t, StepExecutor::kMaxBatch> trace_step{};
  bool traced = false, checked = false, each = false;
  for (int i = 0; i < n; ++i)
    if (StepTracer* t = batch[static_cast<size_t>(i)]->session->tracer_) {
      traced = true;
      checked = checked || t->check_numerics();
      each = each || t->per_instruction();
      if (t->level() != ProfileLevel::kOff)
        trace_step[static_cast<size_t>(i)] = t->begin_step(1, batch[static_cast<size_t>(i)]->session->pos_, n, false);
    }
  auto tracer_of = [&](int i) { return batch[static_cast<size_t>(i)]->session->tracer_; };
  using Clock = std::chrono::steady_clock;
  auto record = [&](size_t k, Clock::time_point begin) {
    const Clock::time_point end = Clock::now();
    for (int i = 0; i < n; ++i)
      if (StepTracer* t = tracer_of(i); t != nullptr && t->per_instruction())
        t->instruction(static_cast<int>(k), t->at(begin), t->at(end));
  };
  // After node k ran on row `row` of `c` (every row: -1): the numerics of the rows whose session checks.
  auto check_rows = [&](size_t k, const StepContext& c, int row) {
    int from = 0;
    const int rows = row < 0 ? n : 1;
    while (auto f = scan_outputs(p, static_cast<int>(k), c, rows, 0, from)) {
      const int i = row < 0 ? f->row : row;
      from = f->row + 1;
      StepTracer* t = tracer_of(i);
      if (t == nullptr || !t->check_numerics() || !row_status[static_cast<size_t>(i)]) continue;
      f->position = batch[static_cast<size_t>(i)]->session->pos_;
      row_status[static_cast<size_t>(i)] = numerics_error(*f);
      t->set_fault(std::move(*f));
    }
  };
  // The per-row ops of all rows run at once over the pool (each row on one thread), unless a
  // tracer times or checks them instruction by instruction: then row after row, as recorded.
  ThreadPool* pool = lead.executor_->pool();
  const bool in_turn = pool == nullptr || checked || each;
  std::array<Status, StepExecutor::kMaxBatch> op_status;
  // The context of row i alone: its session's position and cache, in the row arena.
  auto row_context = [&](int i) {
    Session& s = *batch[static_cast<size_t>(i)]->session;
    StepContext c = all;
    c.arena = aligned64(lead.row_arena_);
    if (!in_turn) c.pool = nullptr;  // the row is one thread's share
    if (i > 0 && !in_turn) {
      // Another session's row runs in that session's own arena and scratch: it waits for this
      // step and uses neither until the step is done, so the rows can run at once, one per thread.
      c.arena = aligned64(s.arena_);
      c.scratch = aligned64(s.scratch_);
      c.scratch_size = s.scratch_.size() - 64;
    }
    c.tokens = &lead.tokens_[static_cast<size_t>(i)];
    c.n_tokens = 1;
    c.first_pos = s.pos_;
    c.n_ctx = s.n_ctx_;
    c.model = &s.model_->constants_for(s.n_ctx_);  // the row's own RoPE (LongRoPE: by its context)
    c.key_cache = s.keys_.data();
    c.value_cache = s.values_.data();
    c.kv_dtype = s.kv_dtype_;
    return c;
  };
  Status st;
  const auto& kernels = lead.model_->kernels();
  for (size_t k = 0; k < kernels.size() && st; ++k) {
    const Node& node = g.nodes[k];
    const Clock::time_point begin = each ? Clock::now() : Clock::time_point();
    if (row_wise(node.op)) {
      st = kernels[k]->run(all);
      if (traced) {
        if (checked && st) check_rows(k, all, -1);
        if (each) record(k, begin);
      }
      continue;
    }
    // Row by row: inputs copied to row 0 of the row's arena, outputs gathered, then written back
    // (after every row ran: an output may share memory with another row's input).
    size_t out_width = 0;
    for (int v : node.outputs) out_width += static_cast<size_t>(g.values[static_cast<size_t>(v)].width);
    lead.staging_.resize(out_width * static_cast<size_t>(n));
    auto run_row = [&](int i) {
      const StepContext c = row_context(i);
      for (int v : node.inputs) {
        const size_t w = static_cast<size_t>(g.values[static_cast<size_t>(v)].width) * sizeof(float);
        const size_t at = static_cast<size_t>(offsets[static_cast<size_t>(v)]);
        std::memcpy(c.arena + at, all.arena + at + static_cast<size_t>(i) * w, w);
      }
      Status rs = kernels[k]->run(c);
      if (checked && rs) check_rows(k, c, i);
      float* out = lead.staging_.data() + static_cast<size_t>(i) * out_width;
      for (int v : node.outputs) {
        const size_t w = static_cast<size_t>(g.values[static_cast<size_t>(v)].width);
        std::memcpy(out, c.arena + static_cast<size_t>(offsets[static_cast<size_t>(v)]), w * sizeof(float));
        out += w;
      }
      return rs;
    };
    if (in_turn) {
      for (int i = 0; i < n && st; ++i) st = run_row(i);
    } else {
      pool->parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) op_status[static_cast<size_t>(i)] = run_row(static_cast<int>(i));
      });
      for (int i = 0; i < n && st; ++i) st = std::move(op_status[static_cast<size_t>(i)]);
    }
    for (int i = 0; i < n && st; ++i) {
      const float* in = lead.staging_.data() + static_cast<size_t>(i) * out_width;
      for (int v : node.outputs) {
        const size_t w = static_cast<size_t>(g.values[static_cast<size_t>(v)].width);
        std::memcpy(all.arena + static_cast<size_t>(offsets[static_cast<size_t>(v)]) + static_cast<size_t>(i) * w * sizeof(float),
                    in, w * sizeof(float));
        in += w;
      }
    }
    if (each) record(k, begin);
  }
  if (traced)
    for (int i = 0; i < n; ++i)
      if (StepTracer* t = tracer_of(i); t != nullptr && t->level() != ProfileLevel::kOff)
        t->end_step(trace_step[static_cast<size_t>(i)]);
  const auto* logits = reinterpret_cast<const float*>(all.arena + offsets[static_cast<size_t>(g.logits_output)]);
  for (int i = 0; i < n; ++i) {
    DecodeRequest* r = batch[static_cast<size_t>(i)];
    if (!st || !row_status[static_cast<size_t>(i)]) {
      finish(r, st ? row_status[static_cast<size_t>(i)] : st, {});
      continue;
    }
    Session& s = *r->session;
    std::memcpy(s.batch_logits_.data(), logits + static_cast<size_t>(i) * vocab, vocab * sizeof(float));
    s.pos_.fetch_add(1, std::memory_order_relaxed);
    finish(r, Status::ok(), s.batch_logits_);
  }
}

}  // namespace kiln
