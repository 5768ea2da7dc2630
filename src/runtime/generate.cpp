#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "tokenizer/utf8_stream.h"

namespace kiln {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit) {
  return generate(session, sampler, tokenizer, prompt, n_predict, emit, GenerateOptions{});
}

Result<GenerationStats> generate(Decoder& session, Sampler& sampler, const Tokenizer& tokenizer,
                                 std::span<const int> prompt, int n_predict,
                                 const std::function<void(std::string_view)>& emit, const GenerateOptions& options) {
  if (prompt.empty()) return invalid_argument("the prompt has no tokens (and the model has no BOS to start from)");
  const size_t reused = static_cast<size_t>(std::max(options.reused, 0));
  if (reused >= prompt.size() || static_cast<int>(reused) != session.position())
    return invalid_argument("generate: the session holds " + std::to_string(session.position()) +
                            " tokens; a prompt of " + std::to_string(prompt.size()) + " cannot reuse " +
                            std::to_string(reused) + " of them");
  const ModelConfig& c = session.config();
  const std::span<const int> fresh = prompt.subspan(reused);
  if (static_cast<int64_t>(fresh.size()) > session.n_ctx() - session.position())
    return invalid_argument("the prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
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

  auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::span<const float> logits, session.decode(fresh));
  st.prompt_seconds = seconds_since(t0);

  Utf8Stream stream;
  t0 = std::chrono::steady_clock::now();
  int prev = prompt.back();
  while (st.generated_tokens < n_predict) {
    const int next = sampler.sample(logits, history);
    if (is_stop(next)) {
      st.stop = StopReason::kStopToken;
      break;
    }
    ++st.generated_tokens;
    history.push_back(next);
    st.generated.push_back(next);
    const std::string text = stream.push(tokenizer.decode_piece(prev, next));
    if (!text.empty()) emit(text);
    prev = next;
    if (st.generated_tokens == n_predict) break;
    if (session.position() >= session.n_ctx()) {
      st.stop = StopReason::kContextFull;
      break;
    }
    KILN_ASSIGN_OR_RETURN(logits, session.decode(std::span<const int>(&next, 1)));
  }
  const std::string rest = stream.finish();
  if (!rest.empty()) emit(rest);
  st.generate_seconds = seconds_since(t0);
  return st;
}

}  // namespace kiln
