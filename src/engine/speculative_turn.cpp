#include "engine/speculative_turn.h"

namespace kiln {

Status SpeculativeTurn::begin(RuntimeSession& s, const TurnOptions& turn) {
  const SpeculativeOptions& o = turn.speculative;
  if (!turn.draft && o.lookup <= 0) return Status::ok();
  if (o.draft_max < 1 || o.draft_max > kMaxDraftTokens)
    return invalid_argument("draft_max " + std::to_string(o.draft_max) + " is outside 1.." + std::to_string(kMaxDraftTokens));
  if (o.lookup < 0) return invalid_argument("lookup n-gram size " + std::to_string(o.lookup) + " is negative");
  if (!turn.draft) {
    spec_.emplace(*s.session_, nullptr, nullptr, s.options_.sampler, o);
    return Status::ok();
  }
  if (turn.draft->runtime() != s.model_->runtime())
    return invalid_argument("the draft model was loaded by another runtime than the session's model");
  if (!s.draft_ || s.draft_->model_ != turn.draft) {
    KILN_RETURN_IF_ERROR(check_same_vocabulary(s.model_->tokenizer(), s.model_->config().vocab_size,
                                               turn.draft->tokenizer(), turn.draft->config().vocab_size));
    SessionOptions so;
    so.n_ctx = std::min(s.n_ctx_, turn.draft->config().max_seq_len);
    so.kv_dtype = s.options_.kv_dtype;
    so.priority = s.options_.priority;
    s.draft_.reset();
    KILN_ASSIGN_OR_RETURN(s.draft_, turn.draft->new_session(so));
  }
  RuntimeSession& d = *s.draft_;
  KILN_RETURN_IF_ERROR(d.enter());
  draft_ = &d;
  KILN_RETURN_IF_ERROR(d.resume());
  spec_.emplace(*s.session_, d.session_.get(), &d.cached_, s.options_.sampler, o);
  return Status::ok();
}

SpeculativeTurn::~SpeculativeTurn() {
  if (draft_ == nullptr) return;
  if (draft_->session_) {
    draft_->cached_.resize(std::min(draft_->cached_.size(), static_cast<size_t>(draft_->session_->position())));
    draft_->position_.store(static_cast<int>(draft_->cached_.size()));
  }
  draft_->exit();
}

}  // namespace kiln
