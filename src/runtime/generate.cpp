#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "runtime/speculative.h"
#include "tokenizer/utf8_stream.h"

namespace kiln {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool raised(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(std::memory_order_relaxed); }

// Holds back text that may be the start of a stop string, and finds one when it is complete.
class StopStringFilter {
 public:
  explicit StopStringFilter(const std::vector<std::string>& stops) : stops_(stops) {}

  // Adds `text`; moves what can be emitted to `out`. True when a stop string was reached (then
  // `out` ends just before it and the rest is dropped).
  bool push(std::string_view text, std::string& out) {
    held_ += text;
    size_t first = std::string::npos;
    for (const std::string& s : stops_)
      if (!s.empty()) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
      out.append(held_, 0, first);
      held_.clear();
      return true;
    }
    // The longest suffix of held_ that starts some stop string stays held.
    size_t keep = 0;
    for (const std::string& s : stops_)
      for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); n > keep; --n)
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
    out.append(held_, 0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return false;
  }
  // What is still held when generation ends for another reason: it was no stop string.
  std::string flush() { return std::exchange(held_, {}); }

 private:
  const std::vector<std::string>& stops_;
  std::string held_;
};
}  // namespace

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kCancelled: return "cancelled";
    case StopReason::kCallback: return "callback";
  }
  return "unknown";
}

Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit, const GenerateOptions& options) {
  return generate(session, sampler, tokenizer, prompt, n_predict,
                  [&emit](std::string_view text, std::span<const int>) {
                    emit(text);
                    return true;
                  },
                  options);
}

Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict, const PieceSink& sink,
                                 const GenerateOptions& options) {
  if (prompt.empty()) return invalid_argument("the prompt has no tokens (and the model has no BOS to start from)");
  const size_t reused = static_cast<size_t>(std::max(options.reused, 0));
  if (reused >= prompt.size() || static_cast<int>(reused) != session.position())
    return invalid_argument("generate: the session holds " + std::to_string(session.position()) +
                            " tokens; a prompt of " + std::to_string(prompt.size()) + " cannot reuse " +
                            std::to_string(reused) + " of them");
  const ModelConfig& c = session.config();
  for (int id : prompt)
    if (id < 0 || id >= c.vocab_size)
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                              std::to_string(c.vocab_size));
  const std::span<const int> fresh = prompt.subspan(reused);
  if (static_cast<int64_t>(fresh.size()) > session.n_ctx() - session.position())
    return context_full("the prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                        std::to_string(session.n_ctx()));
  auto is_stop = [&](int id) {
    return std::find(c.stop_ids.begin(), c.stop_ids.end(), id) != c.stop_ids.end() ||
           std::find(options.extra_stop_ids.begin(), options.extra_stop_ids.end(), id) != options.extra_stop_ids.end();
  };
  GenerationStats st;
  st.prompt_tokens = static_cast<int>(fresh.size());
  std::vector<int> history(prompt.begin(), prompt.end());
  history.reserve(prompt.size() + static_cast<size_t>(std::max(n_predict, 0)));
  st.generated.reserve(static_cast<size_t>(std::max(n_predict, 0)));

  // The prefill in steps the session takes whole, so that a cancel is seen between them.
  const auto t_call = std::chrono::steady_clock::now();
  std::span<const float> logits;
  const size_t chunk = static_cast<size_t>(std::max(session.max_step(), 1));
  // The session also looks at the flag inside each step (Decoder::watch_cancel), for the duration
  // of the prefill.
  for (size_t i = 0; i < fresh.size(); i += chunk) {
    Status step;
    if (!raised(options.cancel)) {
      const CancelWatch watch(session, options.cancel);
      auto l = session.decode(fresh.subspan(i, std::min(chunk, fresh.size() - i)));
      if (l) logits = *l;
      step = l.status();
    }
    // The hook sees a chunk once it is in the cache; its "stop" is a cancel.
    const bool stopped_by_hook = step.is_ok() && !raised(options.cancel) && options.on_prefill &&
                                 !options.on_prefill(static_cast<int>(std::min(i + chunk, fresh.size())),
                                                     static_cast<int>(fresh.size()));
    if (stopped_by_hook || (raised(options.cancel) && (step.is_ok() || step.code() == StatusCode::kCancelled))) {
      session.rewind(static_cast<int>(reused));
      st.stop = StopReason::kCancelled;
      st.prompt_seconds = seconds_since(t_call);
      return st;
    }
    KILN_RETURN_IF_ERROR(step);
  }
  // A draft model reads the prompt now too, counted in the time to the first token.
  if (options.speculator && !raised(options.cancel)) KILN_RETURN_IF_ERROR(options.speculator->prefill(prompt));
  st.prompt_seconds = seconds_since(t_call);

  Utf8Stream stream;
  StopStringFilter stops(options.stop_strings);
  std::string text, out;
  std::vector<int> ids;  // sampled since the last piece the sink received
  auto deliver = [&](std::string_view piece) {
    if (piece.empty()) return true;
    const bool go_on = sink(piece, ids);
    ids.clear();
    return go_on;
  };
  const auto t0 = std::chrono::steady_clock::now();
  struct Decoding {
    std::atomic<int>* n;
    explicit Decoding(std::atomic<int>* c) : n(c) {
      if (n) n->fetch_add(1);
    }
    ~Decoding() {
      if (n) n->fetch_sub(1);
    }
  } decoding(options.decoding);
  int prev = prompt.back();
  std::optional<GrammarSampler> grammar;
  if (options.grammar) {
    if (!options.grammar_vocabulary) return invalid_argument("generate: a grammar without the vocabulary it masks");
    // A drafted token would have to be checked against the grammar before its verification: not
    // built yet, so the two are refused together rather than one silently dropped.
    if (options.speculator)
      return invalid_argument("constrained output (a grammar or JSON schema) and speculative decoding (a draft "
                              "model or prompt lookup) cannot be used in the same call yet");
  }
  std::vector<int> grammar_stops = c.stop_ids;  // where a grammar may end, the reply may stop
  grammar_stops.insert(grammar_stops.end(), options.extra_stop_ids.begin(), options.extra_stop_ids.end());
  if (options.grammar && options.grammar_trigger.empty())
    grammar.emplace(options.grammar, options.grammar_vocabulary, grammar_stops);
  // A lazy grammar: the reply's bytes (the grammar vocabulary's, exact even inside a character)
  // until its trigger shows up in them; then the grammar from the trigger's first byte.
  const bool lazy = options.grammar && !options.grammar_trigger.empty();
  std::string reply;
  auto watch_trigger = [&](int id) {
    if (!lazy || grammar || st.grammar_refused || is_stop(id)) return;
    const size_t before = reply.size();
    if (id >= 0 && id < options.grammar_vocabulary->vocab_size()) reply += options.grammar_vocabulary->bytes(id);
    const size_t from = before >= options.grammar_trigger.size() ? before - options.grammar_trigger.size() + 1 : 0;
    const size_t at = reply.find(options.grammar_trigger, from);
    if (at == std::string::npos) return;
    grammar.emplace(options.grammar, options.grammar_vocabulary, grammar_stops);
    if (grammar->accept_text(std::string_view(reply).substr(at))) {
      st.grammar_triggered = true;
    } else {
      grammar.reset();
      st.grammar_refused = true;
    }
  };
  // Speculation: tokens a verified step decided, the first `queued.in_cache` already decoded.
  Speculator* spec = options.speculator;
  const SpeculativeCounts spec_before = spec ? spec->counts() : SpeculativeCounts{};
  Speculator::Step queued;
  size_t queued_at = 0;
  while (st.generated_tokens < n_predict) {
    const bool from_queue = queued_at < queued.tokens.size();
    const bool in_cache = from_queue && queued_at < queued.in_cache;
    int next;
    if (from_queue) {
      next = queued.tokens[queued_at++];
    } else if (grammar) {
      auto pick = grammar->sample(sampler, logits, history, prompt.size());
      st.grammar = grammar->stats();
      if (!pick) return pick.status();
      next = *pick;
      if (next == GrammarSampler::kDone) {  // the grammar is complete and allows nothing more
        st.stop = StopReason::kStopToken;
        break;
      }
      KILN_RETURN_IF_ERROR(grammar->accept(next));
    } else {
      next = sampler.sample(logits, history, prompt.size());
      watch_trigger(next);
    }
    if (st.generated_tokens == 0) st.first_token_seconds = seconds_since(t_call);
    if (is_stop(next)) {
      st.stop = StopReason::kStopToken;
      break;
    }
    ++st.generated_tokens;
    history.push_back(next);
    st.generated.push_back(next);
    ids.push_back(next);
    text.clear();
    stream.push(tokenizer.decode_piece(prev, next), text);
    out.clear();
    const bool at_stop_string = stops.push(text, out);
    if (!deliver(out)) {
      st.stop = StopReason::kCallback;
      break;
    }
    if (at_stop_string) {
      st.stop = StopReason::kStopString;
      break;
    }
    prev = next;
    if (st.generated_tokens == n_predict) break;
    if (in_cache) continue;  // an accepted draft: the verification step decoded it
    if (session.position() >= session.n_ctx()) {
      st.stop = StopReason::kContextFull;
      break;
    }
    if (raised(options.cancel)) {
      st.stop = StopReason::kCancelled;
      break;
    }
    ++st.target_steps;
    if (spec != nullptr) {
      KILN_RETURN_IF_ERROR(spec->advance(history, prompt.size(), n_predict - st.generated_tokens, sampler, queued));
      queued_at = 0;
      logits = queued.logits;
    } else {
      KILN_ASSIGN_OR_RETURN(logits, session.decode(std::span<const int>(&next, 1)));
    }
  }
  if (spec != nullptr) {
    // Drafts accepted past where generation stopped leave the cache: it ends, as without
    // speculation, at most with the prompt and the generated tokens.
    session.rewind(std::min(session.position(), static_cast<int>(prompt.size()) + st.generated_tokens));
    st.drafted_tokens = spec->counts().drafted - spec_before.drafted;
    st.accepted_tokens = spec->counts().accepted - spec_before.accepted;
  }
  if (st.stop != StopReason::kStopString && st.stop != StopReason::kCallback) {
    out.clear();
    if (stops.push(stream.finish(), out)) st.stop = StopReason::kStopString;
    out += stops.flush();
    if (!out.empty() || !ids.empty()) sink(out, ids);
  }
  st.generate_seconds = seconds_since(t0);
  return st;
}

Result<GenerationStats> generate_reusing(Decoder& session, std::vector<int>& cached, Sampler& sampler,
                                         const Tokenizer& tokenizer, std::span<const int> prompt, int n_predict,
                                         const PieceSink& sink, GenerateOptions options) {
  if (prompt.empty()) return invalid_argument("the prompt has no tokens (and the model has no BOS to start from)");
  size_t reuse = 0;
  const size_t held = std::min(cached.size(), static_cast<size_t>(session.position()));
  while (reuse < held && reuse < prompt.size() && cached[reuse] == prompt[reuse]) ++reuse;
  reuse = std::min(reuse, prompt.size() - 1);
  session.rewind(static_cast<int>(reuse));
  cached.resize(reuse);
  options.reused = static_cast<int>(reuse);
  KILN_ASSIGN_OR_RETURN(GenerationStats st, generate(session, sampler, tokenizer, prompt, n_predict, sink, options));
  st.reused_tokens = static_cast<int>(reuse);
  cached.assign(prompt.begin(), prompt.end());
  cached.insert(cached.end(), st.generated.begin(), st.generated.end());
  cached.resize(std::min(cached.size(), static_cast<size_t>(session.position())));
  return st;
}

}  // namespace kiln
