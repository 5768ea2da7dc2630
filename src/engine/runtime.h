// The embeddable runtime behind the C API: one thread pool (a StepExecutor) shared by every
// session, models opened through the front door and shared by their sessions, and one memory
// budget over all of them (engine/memory_budget.h: what it counts, and how it evicts: a session's
// KV cache goes to a snapshot file, restored when it is next used; a model whose sessions are all
// idle is unmapped, reopened when next used).
//
// A session's KV cache is a cache: each call takes the whole text the model should see, and the
// tokens the cache holds from earlier calls are reused where the new input starts with them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/job_threads.h"
#include "engine/memory_budget.h"
#include "engine/open_model.h"
#include "runtime/chat_format.h"
#include "runtime/generate.h"
#include "runtime/perf_mode.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "runtime/step_trace.h"

namespace kiln {

class RuntimeModel;
class RuntimeSession;
struct RuntimeCore;  // engine/runtime_core.h: what the three share, inside the engine

// What a session asks of its model (RuntimeModel provides it): the compiled model, reopened under
// the budget if it was evicted (never evicting `requester`). Caller holds the runtime's lock.
class WeightsSource {
 public:
  virtual ~WeightsSource() = default;
  virtual Result<std::shared_ptr<const Model>> acquire_locked(const Evictable* requester) = 0;
};
struct SpeculativeTurn;

struct RuntimeOptions {
  int n_threads = 0;            // 0: chosen by perf_mode
  uint64_t memory_budget = 0;   // bytes; 0: none
  PerfMode perf_mode = PerfMode::kBalanced;
};

struct RuntimeStats {
  uint64_t budget = 0, held = 0, peak_held = 0;
  int n_threads = 0, n_models = 0, n_sessions = 0, n_evictions = 0;
  uint64_t decode_steps = 0, decode_tokens = 0;  // tokens / steps: the mean decode batch
};

struct ModelLoadOptions {
  OpenOptions open;
  int priority = 0;
  bool prefault = true;  // map every weight page on the loading thread (see Model::prefault)
  // Called with 0..1 at each stage of the load; returning false cancels it (kCancelled).
  std::function<bool(double)> progress;
};

struct SessionOptions {
  int n_ctx = 0;  // 0: default_context()
  DType kv_dtype = DType::kF32;
  SamplerParams sampler;
  int priority = 0;
  // Records each call's steps (runtime/step_trace.h); profile_json() reports the last call.
  ProfileLevel profiling = ProfileLevel::kOff;
  // Each instruction's outputs scanned; the first NaN or infinity ends the call with an error.
  bool check_numerics = false;
};

struct TurnOptions {
  int max_tokens = 256;
  std::vector<std::string> stop;
  int add_bos = -1;            // generate(): -1 the model's rule, 0 no, 1 yes
  bool parse_special = false;  // generate(): special tokens' text becomes those tokens
  std::function<bool(int done, int total)> on_prefill;  // see GenerateOptions
  // Constrained output (engine/constrained_output.h); null: none. Shared, immutable: each call
  // keeps its own matching state.
  std::shared_ptr<const Grammar> grammar;
  std::string grammar_trigger;  // non-empty: the grammar holds from this text on (GenerateOptions)
  // Speculative decoding (runtime/speculative.h), off by default: a draft model of the same
  // vocabulary (the session keeps a session of it), else prompt lookup when speculative.lookup > 0.
  std::shared_ptr<RuntimeModel> draft;
  SpeculativeOptions speculative;
};

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  static std::shared_ptr<Runtime> create(const RuntimeOptions& options);
  ~Runtime();

  Result<std::shared_ptr<RuntimeModel>> load_model(const std::string& path, const ModelLoadOptions& options);
  // Evicts everything idle; returns the bytes released.
  uint64_t trim();
  RuntimeStats stats();
  const ThreadPlan& thread_plan() const;
  // The threads asynchronous calls run on (see job_threads.h).
  JobThreads& jobs() { return jobs_; }

 private:
  explicit Runtime(const RuntimeOptions& options);

  std::shared_ptr<RuntimeCore> core_;
  JobThreads jobs_;  // last: destroyed first, while what its jobs use is still there
};

class RuntimeModel : public std::enable_shared_from_this<RuntimeModel>, private Evictable, private WeightsSource {
 public:
  // Opens `path` under the runtime's budget (Runtime::load_model's work).
  static Result<std::shared_ptr<RuntimeModel>> open(std::shared_ptr<Runtime> rt, std::shared_ptr<RuntimeCore> core,
                                                    const std::string& path, const ModelLoadOptions& options);
  ~RuntimeModel() override;
  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *opened_.tokenizer; }
  const OpenedModel& opened() const { return opened_; }  // .model is null: the budget holds it
  const std::shared_ptr<Runtime>& runtime() const { return rt_; }
  // The scheme most weight bytes are in, the parameters and the weight bytes (from the program).
  const std::string& main_scheme() const { return main_scheme_; }
  int64_t n_params() const { return n_params_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  bool resident();
  // The vocabulary as a grammar sees it (runtime/grammar_sampling.h), built on first use.
  std::shared_ptr<const TokenTrie> grammar_vocabulary();
  // The compiled model, reopened under the budget if it was evicted: for a tool that times a
  // Session of its own on it (kiln bench --draft/--lookup).
  Result<std::shared_ptr<const Model>> compiled();

  Result<std::shared_ptr<RuntimeSession>> new_session(const SessionOptions& options);

 private:
  RuntimeModel() = default;
  // WeightsSource. Caller holds the runtime's lock.
  Result<std::shared_ptr<const Model>> acquire_locked(const Evictable* requester) override;
  // Evictable. Caller holds the runtime's lock.
  int eviction_priority() const override { return load_.priority; }
  uint64_t last_used() const override { return last_used_; }
  bool holds_memory() const override { return compiled_ != nullptr; }
  bool try_hold(std::span<const Evictable* const> keep) override;
  uint64_t evict_held() override;
  void release_hold() override;
  void sessions(std::vector<std::shared_ptr<Evictable>>& out) override;

  std::shared_ptr<Runtime> rt_;
  std::shared_ptr<RuntimeCore> core_;
  std::string path_;
  ModelLoadOptions load_;
  OpenedModel opened_;  // tokenizer, chat template, kind; .model cleared (compiled_ holds it)
  ModelConfig config_;
  std::string main_scheme_;
  int64_t n_params_ = 0;
  uint64_t weight_bytes_ = 0;
  // Guarded by the runtime's lock:
  std::shared_ptr<const Model> compiled_;  // null while evicted
  uint64_t bytes_ = 0;                     // counted while compiled_ is set
  uint64_t last_used_ = 0;
  std::vector<std::weak_ptr<Evictable>> sessions_;
  std::vector<std::shared_ptr<Evictable>> held_sessions_;  // between try_hold and release_hold
  std::mutex vocabulary_mu_;
  std::shared_ptr<const TokenTrie> grammar_vocabulary_;  // guarded by vocabulary_mu_
};

struct SessionState {
  int n_ctx = 0;
  int position = 0;
  uint64_t reserved_bytes = 0;
  bool generating = false;
  bool evicted = false;
};

class RuntimeSession : private Evictable {
 public:
  // A session of `model` (RuntimeModel::new_session's work), its memory reserved under the budget.
  static Result<std::shared_ptr<RuntimeSession>> open(std::shared_ptr<RuntimeModel> model,
                                                      std::shared_ptr<RuntimeCore> core, WeightsSource& weights,
                                                      std::vector<std::weak_ptr<Evictable>>& model_sessions,
                                                      const SessionOptions& options);
  ~RuntimeSession() override;
  // The whole text the model should see (see the top of this file).
  Result<GenerationStats> generate(std::string_view prompt, const TurnOptions& turn, const PieceSink& sink);
  // The same from tokens the caller encoded (kiln run: a prompt's bytes as given, BOS as it chose);
  // a prompt that fills the context is taken (its one next token), one longer refused.
  Result<GenerationStats> generate_tokens(std::span<const int> prompt, const TurnOptions& turn, const PieceSink& sink);
  // The reply to a whole conversation through the model's chat template; `tools` (null: none) as
  // apply_chat_template(tools=...) passes them to it.
  Result<GenerationStats> chat(const nlohmann::ordered_json& messages, const TurnOptions& turn, const PieceSink& sink,
                               const nlohmann::ordered_json& tools = nlohmann::ordered_json());
  // The template and extra variables (apply_chat_template's **kwargs: {"enable_thinking": false})
  // of the next chat calls; until then the model's own template and none.
  Status use_chat_template(const ModelChatTemplate& tpl, const nlohmann::ordered_json& kwargs);
  // Token level: appends `ids` at the session's position and keeps the logits of the last one.
  Status decode(std::span<const int> ids);
  // The last decode()'s logits (vocabulary size); an error when there are none (see kiln.h).
  Status logits(std::span<float> out);
  int n_past();
  // Drops the positions from n_keep on.
  Status truncate(int n_keep);
  // A token from the last decode()'s logits with the session's sampler (not decoded).
  Result<int> sample();

  // Any thread: the running call stops before its next step.
  void cancel() { cancel_.store(true); }
  Status reset();
  // The sampler of the next calls (a server's per-request temperature and seed); the cache stays.
  Status set_sampler(const SamplerParams& p);
  Status save(const std::string& path);
  Status restore(const std::string& path);
  SessionState state();
  // The profile of the last generate or chat call (perf/profile_json.h), as JSON text; an error
  // when the session was made without profiling.
  Result<std::string> profile_json();
  int n_ctx() const { return n_ctx_; }
  const std::shared_ptr<RuntimeModel>& model() const { return model_; }

 private:
  friend struct SpeculativeTurn;  // engine/speculative_turn.h: a call's draft session and speculator
  RuntimeSession() = default;
  // Evictable. Caller holds the runtime's lock.
  int eviction_priority() const override { return options_.priority; }
  uint64_t last_used() const override { return last_used_; }
  bool holds_memory() const override { return session_ != nullptr; }
  bool try_hold(std::span<const Evictable* const> keep) override;
  uint64_t evict_held() override;
  void release_hold() override { mu_.unlock(); }
  // Enters a call: refuses one from inside this session's own callback; holds mu_ until exit().
  Status enter();
  void exit();
  // exit() when the call returns, whichever way.
  struct Held {
    RuntimeSession* s;
    ~Held() { s->exit(); }
  };
  // Makes the session resident (reopening the model, restoring the snapshot). Caller holds mu_.
  Status resume();
  Result<GenerationStats> run(std::span<const int> prompt, const TurnOptions& turn, const std::vector<int>& stop_ids,
                              const PieceSink& sink);
  // Moves the KV cache to a snapshot file and frees the session's memory. Caller holds mu_ and
  // the runtime's lock. Returns the bytes released.
  uint64_t evict_locked();
  void touch();  // last_used_ from the runtime's clock

  std::shared_ptr<RuntimeModel> model_;
  std::shared_ptr<RuntimeCore> core_;
  WeightsSource* weights_ = nullptr;  // model_'s
  SessionOptions options_;
  int n_ctx_ = 0;
  std::mutex mu_;                          // held by the call running on this session
  std::atomic<std::thread::id> owner_{};   // the thread inside a call, for reentrancy
  std::atomic<bool> cancel_{false};
  std::atomic<bool> generating_{false};
  std::atomic<int> position_{0};           // cached_.size() after the last call; state() reads the
                                           // session's live position during one
  std::unique_ptr<Session> session_;  // null while evicted; set and reset under the runtime's lock
  uint64_t bytes_ = 0;                       // counted while session_ is set
  std::string snapshot_;                     // the eviction snapshot, while evicted
  std::vector<int> cached_;                  // the tokens at the cache's positions
  std::optional<Sampler> sampler_;
  std::optional<ChatFormat> chat_;
  uint64_t last_used_ = 0;
  std::unique_ptr<StepTracer> tracer_;  // profiling or check_numerics; set on session_
  // Token level: the last decode()'s logits (empty: none to read), how many tokens at the end of
  // cached_ came from sample() (the frequency and presence penalties count those), the token the
  // last sample() gave, and whether the session counts itself in the executor's decoding().
  std::vector<float> logits_;
  size_t sampled_tail_ = 0;
  int last_sampled_ = -1;
  bool counted_decoding_ = false;
  void stop_counting_decoding();
  std::string profile_;                 // the last call's profile, JSON
  // Speculative decoding with a draft model: a session of it, made by the first call that names
  // it (engine/speculative_turn.cpp), and the model it was made for.
  std::shared_ptr<RuntimeSession> draft_;
};

}  // namespace kiln
