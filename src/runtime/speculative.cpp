#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace kiln {

namespace {
// What a verification step's extra row costs, as a share of a one-token step, until the steps'
// own times are measured (README's "Speculative decoding": from well under that to more than a
// whole step by scheme and machine).
constexpr double kRowCost = 0.25;
// How fast the acceptance and time estimates follow the recent steps.
constexpr double kAcceptanceWeight = 0.15;
constexpr double kTimeWeight = 0.2;
// Rounds without drafting (it did not pay) before drafting once again, to measure again.
constexpr int kProbeEvery = 16;
// Probes that find drafting still does not pay, after which a draft model is not tried again in
// this generation: each probe first catches the draft up on every token it skipped (a
// prefill of them), which with the 0.5B drafting for the 1.5B cost a quarter of the time when
// drafting never paid. Prompt lookup costs nothing to probe and keeps probing.
constexpr int kGiveUpAfter = 2;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
void follow(double& mean, double x) { mean = mean == 0 ? x : mean + kTimeWeight * (x - mean); }

// A token's text on one line: control bytes as \xNN.
std::string shown(const std::string& piece) {
  std::string out;
  for (const char ch : piece) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b != 0x7f) {
      out += ch;
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", b);
    out += hex;
  }
  return out;
}

float prob_of(std::span<const Sampler::Choice> d, int id) {
  for (const Sampler::Choice& c : d)
    if (c.id == id) return c.p;
  return 0.0f;
}
}  // namespace

int lookup_draft(std::span<const int> text, int ngram, int most, std::vector<int>& out) {
  const size_t len = text.size();
  if (most <= 0 || len < 2) return 0;
  for (size_t n = std::min(static_cast<size_t>(std::max(ngram, 1)), len - 1); n >= 1; --n) {
    const std::span<const int> tail = text.subspan(len - n);
    // The latest earlier occurrence (start s, s + n < len) whose continuation is in the text.
    for (size_t s = len - n; s-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), text.begin() + static_cast<std::ptrdiff_t>(s))) continue;
      const size_t from = s + n;
      const size_t take = std::min(static_cast<size_t>(most), len - from);
      out.insert(out.end(), text.begin() + static_cast<std::ptrdiff_t>(from),
                 text.begin() + static_cast<std::ptrdiff_t>(from + take));
      return static_cast<int>(take);
    }
  }
  return 0;
}

Status check_same_vocabulary(const Tokenizer& target, int target_vocab, const Tokenizer& draft, int draft_vocab) {
  if (target_vocab != draft_vocab)
    return invalid_argument("the draft model's vocabulary has " + std::to_string(draft_vocab) + " tokens, the target's " +
                            std::to_string(target_vocab) + ": a draft model needs the target's vocabulary");
  if (target.vocab_size() != draft.vocab_size())
    return invalid_argument("the draft model's tokenizer has " + std::to_string(draft.vocab_size()) +
                            " tokens, the target's " + std::to_string(target.vocab_size()) +
                            ": a draft model needs the target's vocabulary");
  for (int id = 0; id < target.vocab_size(); ++id)
    if (target.piece(id) != draft.piece(id))
      return invalid_argument("the draft model's token " + std::to_string(id) + " is '" + shown(draft.piece(id)) +
                              "', the target's '" + shown(target.piece(id)) +
                              "': a draft model needs the target's vocabulary");
  return Status::ok();
}

Speculator::Speculator(Session& target, Session* draft, std::vector<int>* draft_tokens, const SamplerParams& sampler,
                       const SpeculativeOptions& options)
    : target_(target),
      draft_(draft),
      draft_tokens_(draft_tokens),
      options_(options),
      draft_sampler_([&] {
        SamplerParams p = sampler;
        p.seed = sampler.seed ^ 0x5bd1e9955bd1e995ull;  // the draft's own stream
        return p;
      }(),
                     target.config().vocab_size),
      greedy_(sampler.temperature <= 0.0f),
      acceptance_(draft != nullptr ? 0.7 : 0.5) {
  options_.draft_max = std::clamp(options_.draft_max, 1, kMaxDraftTokens);
  if (!greedy_) q_dense_.assign(static_cast<size_t>(target.config().vocab_size), 0.0f);
  const double tb = static_cast<double>(target.model()->weight_bytes());
  draft_cost_ = draft != nullptr && tb > 0 ? static_cast<double>(draft->model()->weight_bytes()) / tb : 0.0;
}

double Speculator::verify_cost(int k) const {
  if (t_one_ > 0 && static_cast<size_t>(k) < t_verify_.size() && t_verify_[static_cast<size_t>(k)] > 0)
    return t_verify_[static_cast<size_t>(k)] / t_one_;
  return 1.0 + k * kRowCost;
}

double Speculator::draft_token_cost() const {
  if (draft_ == nullptr) return 0.0;
  return t_one_ > 0 && t_draft_ > 0 ? t_draft_ / t_one_ : draft_cost_;
}

int Speculator::choose_k(int cap) {
  if (!options_.adaptive) return cap;
  // A one-token step measured first: the unit every cost is in.
  if (t_one_ == 0) return 0;
  // A draft model given up (kGiveUpAfter) stays so: its next round would catch it up first.
  if (draft_ != nullptr && failed_probes_ >= kGiveUpAfter) return 0;
  // Tokens per step with k drafts, each accepted with probability a once the one before was:
  // 1 + a + ... + a^k; the step costs the verification and k drafted tokens.
  const double a = std::min(acceptance_, 0.99);
  int best = 0;
  double best_rate = 1.0;
  for (int k = 1; k <= cap; ++k) {
    const double tokens = (1.0 - std::pow(a, k + 1)) / (1.0 - a);
    const double cost = verify_cost(k) + k * draft_token_cost();
    if (tokens / cost > best_rate) {
      best_rate = tokens / cost;
      best = k;
    }
  }
  // Drafting that does not pay stops, but is tried again now and then (the text may change).
  if (probing_ && best == 0) ++failed_probes_;
  probing_ = false;
  if (best == 0 && ++idle_rounds_ >= kProbeEvery) {
    best = std::min(cap, 2);
    probing_ = true;
  }
  if (best > 0) idle_rounds_ = 0;
  return best;
}

Result<std::span<const float>> Speculator::catch_up(std::span<const int> tokens) {
  Session& d = *draft_;
  std::vector<int>& held = *draft_tokens_;
  size_t common = 0;
  const size_t have = std::min(held.size(), static_cast<size_t>(d.position()));
  while (common < have && common < tokens.size() && held[common] == tokens[common]) ++common;
  common = std::min(common, tokens.size() - 1);
  d.rewind(static_cast<int>(common));
  held.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(common));
  KILN_ASSIGN_OR_RETURN(std::span<const float> logits, d.decode(tokens.subspan(common)));
  held.assign(tokens.begin(), tokens.end());
  return logits;
}

Status Speculator::prefill(std::span<const int> prompt) {
  if (draft_ == nullptr || prompt.size() < 2) return Status::ok();
  return catch_up(prompt.first(prompt.size() - 1)).status();
}

Status Speculator::draft_model(std::span<const int> history, size_t n_prompt, int k) {
  Session& d = *draft_;
  std::vector<int>& held = *draft_tokens_;
  // A drafted token's cost (t_draft_) is this call's time over k where the draft was behind by
  // the one or two tokens of a round that drafted (what every drafting round costs), never after
  // rounds without drafting: catching up on their tokens is not what drafting on costs.
  const auto t0 = std::chrono::steady_clock::now();
  const size_t have = std::min(held.size(), static_cast<size_t>(d.position()));
  const bool steady = have + 2 >= history.size();
  KILN_ASSIGN_OR_RETURN(std::span<const float> logits, catch_up(history));
  hist_.assign(history.begin(), history.end());
  for (int j = 0; j < k; ++j) {
    if (q_.size() <= static_cast<size_t>(j)) q_.emplace_back();
    std::vector<Sampler::Choice>& q = q_[static_cast<size_t>(j)];
    draft_sampler_.distribution(logits, hist_, n_prompt, q);
    const int t = greedy_ ? q[0].id : draft_sampler_.draw(q);
    drafts_.push_back(t);
    hist_.push_back(t);
    if (j + 1 == k) break;
    KILN_ASSIGN_OR_RETURN(logits, d.decode(std::span<const int>(&t, 1)));
    held.push_back(t);
  }
  if (steady) follow(t_draft_, seconds_since(t0) / k);
  return Status::ok();
}

Status Speculator::advance(std::span<const int> history, size_t n_prompt, int most, Sampler& sampler, Step& out) {
  out.tokens.clear();
  out.in_cache = 0;
  out.logits = {};
  const int pos = target_.position();
  const int next = history.back();
  // Room: the tokens still to emit, the context, a step's logit rows, and the draft's context.
  int cap = std::min({options_.draft_max, most - 1, target_.n_ctx() - pos - 1,
                      std::min(target_.max_tokens(), target_.max_logit_rows()) - 1});
  if (draft_ != nullptr) cap = std::min(cap, draft_->n_ctx() - static_cast<int>(history.size()));
  drafts_.clear();
  const int k = cap > 0 ? choose_k(cap) : 0;
  if (k > 0) {
    if (draft_ != nullptr) {
      KILN_RETURN_IF_ERROR(draft_model(history, n_prompt, k));
    } else {
      lookup_draft(history, options_.lookup, k, drafts_);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (drafts_.empty()) {
    KILN_ASSIGN_OR_RETURN(out.logits, target_.decode(std::span<const int>(&next, 1)));
    follow(t_one_, seconds_since(t0));
    return Status::ok();
  }
  // One step over `next` and the drafts, every row's logits: row i judges draft i.
  rows_.assign(1, next);
  rows_.insert(rows_.end(), drafts_.begin(), drafts_.end());
  KILN_ASSIGN_OR_RETURN(std::span<const float> all, target_.decode_all(rows_));
  if (t_verify_.size() <= drafts_.size()) t_verify_.resize(drafts_.size() + 1, 0.0);
  follow(t_verify_[drafts_.size()], seconds_since(t0));
  const size_t vocab = static_cast<size_t>(target_.config().vocab_size);
  ++counts_.steps;
  counts_.drafted += static_cast<int>(drafts_.size());
  hist_.assign(history.begin(), history.end());
  size_t accepted = 0;
  int own = -1;  // the target's own token after the accepted drafts
  for (size_t i = 0; i < drafts_.size(); ++i) {
    const std::span<const float> row = all.subspan(i * vocab, vocab);
    const int d = drafts_[i];
    sampler.distribution(row, hist_, n_prompt, p_);
    bool keep;
    if (greedy_) {
      keep = p_[0].id == d;
      own = p_[0].id;
    } else {
      // The draft's distribution, dense (prompt lookup's: all on d).
      if (draft_ != nullptr)
        for (const Sampler::Choice& c : q_[i]) q_dense_[static_cast<size_t>(c.id)] = c.p;
      else
        q_dense_[static_cast<size_t>(d)] = 1.0f;
      const float q = q_dense_[static_cast<size_t>(d)];
      const float p = prob_of(p_, d);
      keep = q > 0.0f && sampler.uniform() * q < p;
      float sum = 0.0f;
      if (!keep)  // the residual max(0, p - q), normalised (p itself when nothing is left of it)
        for (Sampler::Choice& c : p_) {
          c.p = std::max(0.0f, c.p - q_dense_[static_cast<size_t>(c.id)]);
          sum += c.p;
        }
      if (draft_ != nullptr)
        for (const Sampler::Choice& c : q_[i]) q_dense_[static_cast<size_t>(c.id)] = 0.0f;
      else
        q_dense_[static_cast<size_t>(d)] = 0.0f;
      if (!keep) {
        if (sum > 0.0f) {
          for (Sampler::Choice& c : p_) c.p /= sum;
          own = sampler.draw(p_);
        } else {
          own = sampler.sample(row, hist_, n_prompt);
        }
      }
    }
    if (!keep) break;
    ++accepted;
    hist_.push_back(d);
  }
  if (accepted == drafts_.size())  // every draft kept: the last row gives one more token
    own = sampler.sample(all.subspan(drafts_.size() * vocab, vocab), hist_, n_prompt);
  counts_.accepted += static_cast<int>(accepted);
  for (size_t i = 0; i < accepted; ++i) acceptance_ += kAcceptanceWeight * (1.0 - acceptance_);
  if (accepted < drafts_.size()) acceptance_ -= kAcceptanceWeight * acceptance_;
  acceptance_ = std::clamp(acceptance_, 0.05, 0.99);
  // The cache keeps `next` and the accepted drafts.
  target_.rewind(pos + 1 + static_cast<int>(accepted));
  out.tokens.assign(drafts_.begin(), drafts_.begin() + static_cast<std::ptrdiff_t>(accepted));
  out.tokens.push_back(own);
  out.in_cache = accepted;
  return Status::ok();
}

}  // namespace kiln
