// The embeddable runtime behind the C API: one thread pool (a StepExecutor) shared by every
// session, models opened through the front door and shared by their sessions, and one memory
// budget over all of them. What the budget counts is what is really held: a .kiln's mapped
// bytes (or a source model's compiled weights), and each session's KV cache, arena and scratch.
//
// When a load or a session would pass the budget, what is idle (no call running) and of the same
// or lower priority is evicted first, lowest priority and least recently used first: a session's
// KV cache goes to a snapshot file (restored when it is next used), a model whose sessions are
// all idle is unmapped (reopened when next used). Nothing running is touched; what cannot be made
// to fit is a kBudget status naming what was needed and what is held.
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
  const ThreadPlan& thread_plan() const { return plan_; }
  const StepExecutor& executor() const { return *executor_; }
  // The threads asynchronous calls run on (see job_threads.h).
  JobThreads& jobs() { return jobs_; }

 private:
  friend class RuntimeModel;
  friend class RuntimeSession;
  explicit Runtime(const RuntimeOptions& options);
  // Counts `bytes` as held for `what`, evicting idle things of priority <= `priority` first
  // (never `keep_model` or `keep_session`). Caller holds mu_.
  Status reserve_locked(uint64_t bytes, int priority, const std::string& what, const RuntimeModel* keep_model,
                        const RuntimeSession* keep_session);
  void release_locked(uint64_t bytes);
  uint64_t touch() { return ++clock_; }

  std::recursive_mutex mu_;  // the budget, the model and session lists, every model's weights pointer
  RuntimeOptions options_;
  ThreadPlan plan_;
  std::shared_ptr<StepExecutor> executor_;
  std::vector<std::weak_ptr<RuntimeModel>> models_;
  uint64_t held_ = 0, peak_ = 0;
  int evictions_ = 0;
  std::atomic<uint64_t> clock_{0};
  JobThreads jobs_;  // last: destroyed first, while what its jobs use is still there
};

class RuntimeModel : public std::enable_shared_from_this<RuntimeModel> {
 public:
  ~RuntimeModel();
  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *opened_.tokenizer; }
  const OpenedModel& opened() const { return opened_; }  // .model is null: see weights()
  const std::shared_ptr<Runtime>& runtime() const { return rt_; }
  // The scheme most weight bytes are in, the parameters and the weight bytes (from the program).
  const std::string& main_scheme() const { return main_scheme_; }
  int64_t n_params() const { return n_params_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  bool resident();
  // The compiled model, reopened under the budget if it was evicted: for a tool that times a
  // Session of its own on it (kiln bench --draft/--lookup).
  Result<std::shared_ptr<const Model>> compiled();

  Result<std::shared_ptr<RuntimeSession>> new_session(const SessionOptions& options);

 private:
  friend class Runtime;
  friend class RuntimeSession;
  RuntimeModel() = default;
  // The compiled model, reopened (under the budget) if it was evicted. Caller holds rt_->mu_.
  Result<std::shared_ptr<const Model>> acquire_locked(const RuntimeSession* requester);
  uint64_t evict_locked();  // the model's sessions must be evicted already

  std::shared_ptr<Runtime> rt_;
  std::string path_;
  ModelLoadOptions load_;
  OpenedModel opened_;  // tokenizer, chat template, kind; .model cleared (compiled_ holds it)
  ModelConfig config_;
  std::string main_scheme_;
  int64_t n_params_ = 0;
  uint64_t weight_bytes_ = 0;
  std::shared_ptr<const Model> compiled_;  // null while evicted; guarded by rt_->mu_
  uint64_t bytes_ = 0;                             // counted while compiled_ is set
  uint64_t last_used_ = 0;
  std::vector<std::weak_ptr<RuntimeSession>> sessions_;  // guarded by rt_->mu_
};

struct SessionState {
  int n_ctx = 0;
  int position = 0;
  uint64_t reserved_bytes = 0;
  bool generating = false;
  bool evicted = false;
};

class RuntimeSession {
 public:
  ~RuntimeSession();
  // The whole text the model should see (see the top of this file).
  Result<GenerationStats> generate(std::string_view prompt, const TurnOptions& turn, const PieceSink& sink);
  // The same from tokens the caller encoded (kiln run: a prompt's bytes as given, BOS as it chose);
  // a prompt that fills the context is taken (its one next token), one longer refused.
  Result<GenerationStats> generate_tokens(std::span<const int> prompt, const TurnOptions& turn, const PieceSink& sink);
  // The reply to a whole conversation through the model's chat template.
  Result<GenerationStats> chat(const nlohmann::ordered_json& messages, const TurnOptions& turn, const PieceSink& sink);
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
  friend class Runtime;
  friend class RuntimeModel;
  friend struct SpeculativeTurn;
  RuntimeSession() = default;
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
  // rt->mu_. Returns the bytes released.
  uint64_t evict_locked();

  std::shared_ptr<RuntimeModel> model_;
  SessionOptions options_;
  int n_ctx_ = 0;
  std::mutex mu_;                          // held by the call running on this session
  std::atomic<std::thread::id> owner_{};   // the thread inside a call, for reentrancy
  std::atomic<bool> cancel_{false};
  std::atomic<bool> generating_{false};
  std::atomic<int> position_{0};           // cached_.size() after the last call; state() reads the
                                           // session's live position during one
  std::unique_ptr<Session> session_;  // null while evicted
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
