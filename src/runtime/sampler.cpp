#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace kiln {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float Rng::uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }

Sampler::Sampler(const SamplerParams& params, int vocab_size)
    : params_(params),
      rng_(params.seed),
      cand_(static_cast<size_t>(vocab_size)),
      probs_(static_cast<size_t>(vocab_size)),
      penalized_(static_cast<size_t>(vocab_size), 0),
      counted_(static_cast<size_t>(vocab_size), 0),
      count_(static_cast<size_t>(vocab_size), 0) {}

template <typename LogitAt>
void Sampler::penalize(size_t n_vocab, std::span<const int> history, size_t n_prompt, LogitAt&& logit_at) {
  n_prompt = std::min(n_prompt, history.size());
  const bool repeat = params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0;
  const bool additive =
      (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) && n_prompt < history.size();
  if (!repeat && !additive) return;
  if (++epoch_ == 0) {  // the stamps wrapped: none may look current
    std::fill(penalized_.begin(), penalized_.end(), 0u);
    std::fill(counted_.begin(), counted_.end(), 0u);
    epoch_ = 1;
  }
  auto in_vocab = [n_vocab](int t) { return t >= 0 && static_cast<size_t>(t) < n_vocab; };

  if (repeat) {
    const size_t window = params_.repeat_last_n < 0 ? history.size()
                                                    : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    for (size_t i = history.size() - window; i < history.size(); ++i) {
      const int t = history[i];
      if (!in_vocab(t) || penalized_[static_cast<size_t>(t)] == epoch_) continue;
      penalized_[static_cast<size_t>(t)] = epoch_;
      float& l = logit_at(t);
      l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    }
  }

  if (additive) {
    // Count each sampled token, then take each one's penalty off once.
    const std::span<const int> sampled = history.subspan(n_prompt);
    for (const int t : sampled) {
      if (!in_vocab(t)) continue;
      const auto u = static_cast<size_t>(t);
      if (counted_[u] != epoch_) {
        counted_[u] = epoch_;
        count_[u] = 0;
      }
      ++count_[u];
    }
    for (const int t : sampled) {
      if (!in_vocab(t)) continue;
      uint32_t& c = count_[static_cast<size_t>(t)];
      if (c == 0) continue;
      logit_at(t) -= static_cast<float>(c) * params_.frequency_penalty + params_.presence_penalty;
      c = 0;
    }
  }
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int> history, size_t n_prompt) {
  penalize(std::min(logits.size(), cand_.size()), history, n_prompt,
           [&](int t) -> float& { return logits[static_cast<size_t>(t)]; });
}

size_t Sampler::prepare(std::span<const float> logits, std::span<const int> history, size_t n_prompt) {
  const size_t n_vocab = std::min(logits.size(), cand_.size());
  for (size_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int>(i), logits[i]};
  size_t n = n_vocab;

  penalize(n_vocab, history, n_prompt, [&](int t) -> float& { return cand_[static_cast<size_t>(t)].logit; });

  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (params_.temperature <= 0.0f) {
    std::iter_swap(cand_.begin(), std::min_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n), by_logit));
    probs_[0] = 1.0f;
    return 1;
  }

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + params_.top_k, cand_.begin() + static_cast<std::ptrdiff_t>(n), by_logit);
    n = static_cast<size_t>(params_.top_k);
  } else {
    std::sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n), by_logit);
  }

  // Probabilities of what is left, at temperature 1 (top-p and min-p are judged before temperature).
  auto softmax = [&](float temp) {
    const float mx = cand_[0].logit;
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      probs_[i] = std::exp((cand_[i].logit - mx) / temp);
      sum += probs_[i];
    }
    for (size_t i = 0; i < n; ++i) probs_[i] /= sum;
  };
  if (params_.top_p < 1.0f) {
    softmax(1.0f);
    float cum = 0.0f;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs_[i];
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (params_.min_p > 0.0f) {
    softmax(1.0f);
    const float threshold = params_.min_p * probs_[0];
    size_t keep = 1;
    while (keep < n && probs_[keep] >= threshold) ++keep;
    n = keep;
  }
  softmax(params_.temperature);
  return n;
}

int Sampler::sample(std::span<const float> logits, std::span<const int> history, size_t n_prompt) {
  const size_t n = prepare(logits, history, n_prompt);
  if (params_.temperature <= 0.0f) return cand_[0].id;
  const float r = rng_.uniform();
  float cum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    cum += probs_[i];
    if (r < cum) return cand_[i].id;
  }
  return cand_[n - 1].id;
}

void Sampler::distribution(std::span<const float> logits, std::span<const int> history, size_t n_prompt,
                           std::vector<Choice>& out) {
  const size_t n = prepare(logits, history, n_prompt);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = {cand_[i].id, probs_[i]};
}

int Sampler::draw(std::span<const Choice> dist) {
  if (dist.empty()) return 0;
  const float r = rng_.uniform();
  float cum = 0.0f;
  for (const Choice& c : dist) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return dist.back().id;
}

}  // namespace kiln
