#include "engine/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "perf/profile.h"
#include "perf/profile_json.h"
#include "engine/speculative_turn.h"
#include "runtime/session_snapshot.h"

namespace kiln {

namespace {
std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

std::string snapshot_path() {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  return (dir / ("kiln-session-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".snapshot")).string();
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Runtime

Runtime::Runtime(const RuntimeOptions& o) : options_(o), plan_(plan_threads(o.perf_mode, o.n_threads)) {
  executor_ = std::make_shared<StepExecutor>(plan_.n_threads, plan_.pool);
}

Runtime::~Runtime() = default;

std::shared_ptr<Runtime> Runtime::create(const RuntimeOptions& options) {
  return std::shared_ptr<Runtime>(new Runtime(options));
}

void Runtime::release_locked(uint64_t bytes) { held_ -= std::min(held_, bytes); }

Status Runtime::reserve_locked(uint64_t bytes, int priority, const std::string& what, const RuntimeModel* keep_model,
                               const RuntimeSession* keep_session) {
  const uint64_t budget = options_.memory_budget;
  if (budget != 0 && held_ + bytes > budget) {
    // Idle things of this priority or lower, lowest priority and least recently used first.
    struct Candidate {
      int priority;
      uint64_t used;
      std::shared_ptr<RuntimeModel> model;
      std::shared_ptr<RuntimeSession> session;  // null: the model itself
    };
    std::vector<Candidate> cands;
    const auto me = std::this_thread::get_id();
    for (const auto& wm : models_) {
      auto m = wm.lock();
      if (!m) continue;
      for (const auto& ws : m->sessions_) {
        auto s = ws.lock();
        if (s && s.get() != keep_session && s->session_ && s->options_.priority <= priority) cands.push_back({s->options_.priority, s->last_used_, m, s});
      }
      if (m.get() != keep_model && m->compiled_ && m->load_.priority <= priority) cands.push_back({m->load_.priority, m->last_used_, m, nullptr});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return a.priority != b.priority ? a.priority < b.priority : a.used < b.used;
    });
    for (Candidate& c : cands) {
      if (held_ + bytes <= budget) break;
      if (c.session) {
        if (c.session->owner_.load() == me || !c.session->mu_.try_lock()) continue;  // in use
        held_ -= std::min(held_, c.session->evict_locked());
        c.session->mu_.unlock();
        ++evictions_;
        continue;
      }
      // A model goes only when every one of its sessions is idle (and then they go first).
      std::vector<std::shared_ptr<RuntimeSession>> locked;
      bool idle = true;
      for (const auto& ws : c.model->sessions_) {
        auto s = ws.lock();
        if (!s) continue;
        if (s.get() == keep_session || s->owner_.load() == me || !s->mu_.try_lock()) {
          idle = false;
          break;
        }
        locked.push_back(std::move(s));
      }
      if (idle) {
        for (auto& s : locked)
          if (s->session_) held_ -= std::min(held_, s->evict_locked());
        held_ -= std::min(held_, c.model->evict_locked());
        ++evictions_;
      }
      for (auto& s : locked) s->mu_.unlock();
    }
    if (held_ + bytes > budget)
      return over_budget(what + " needs " + mib(bytes) + ", but the memory budget is " + mib(budget) + " and " +
                         mib(held_) + " of it is held by models and sessions in use or of higher priority");
  }
  held_ += bytes;
  peak_ = std::max(peak_, held_);
  return Status::ok();
}

Result<std::shared_ptr<RuntimeModel>> Runtime::load_model(const std::string& path, const ModelLoadOptions& options) {
  auto step = [&](double f) { return !options.progress || options.progress(f); };
  if (!step(0)) return cancelled(path + ": load cancelled");
  std::shared_ptr<RuntimeModel> m(new RuntimeModel());
  m->rt_ = shared_from_this();
  m->path_ = path;
  m->load_ = options;
  std::lock_guard<std::recursive_mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(auto compiled, m->acquire_locked(nullptr));
  if (!step(0.9)) {
    compiled.reset();
    release_locked(m->evict_locked());
    return cancelled(path + ": load cancelled");
  }
  // What does not change while the model is evicted: config, tokenizer, sizes.
  m->config_ = compiled->config();
  std::map<std::string, uint64_t> by_scheme;
  const Graph& g = compiled->program().graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : g.weights[i].shape) n *= d;
    m->n_params_ += n;
    by_scheme[std::string(scheme_name(g.weights[i].scheme))] += compiled->image().weights[i].size();
  }
  for (const auto& [scheme, bytes] : by_scheme)
    if (m->main_scheme_.empty() || bytes > by_scheme[m->main_scheme_]) m->main_scheme_ = scheme;
  m->weight_bytes_ = compiled->weight_bytes();
  models_.push_back(m);
  step(1);
  return m;
}

uint64_t Runtime::trim() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const uint64_t before = held_;
  const uint64_t budget = options_.memory_budget;
  // Everything idle goes: a reservation that cannot fit under a budget of one byte.
  options_.memory_budget = 1;
  (void)reserve_locked(before + 1, std::numeric_limits<int>::max(), "trim", nullptr, nullptr);
  options_.memory_budget = budget;
  return before - std::min(before, held_);
}

RuntimeStats Runtime::stats() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  RuntimeStats s;
  s.budget = options_.memory_budget;
  s.held = held_;
  s.peak_held = peak_;
  s.n_threads = executor_->n_threads();
  s.n_evictions = evictions_;
  s.decode_steps = executor_->decode_steps();
  s.decode_tokens = executor_->decode_tokens();
  for (const auto& wm : models_)
    if (auto m = wm.lock()) {
      ++s.n_models;
      for (const auto& ws : m->sessions_) s.n_sessions += ws.expired() ? 0 : 1;
    }
  return s;
}

// ---------------------------------------------------------------------------------------------
// RuntimeModel

RuntimeModel::~RuntimeModel() {
  if (!rt_) return;
  std::lock_guard<std::recursive_mutex> lock(rt_->mu_);
  rt_->release_locked(bytes_);
}

bool RuntimeModel::resident() {
  std::lock_guard<std::recursive_mutex> lock(rt_->mu_);
  return compiled_ != nullptr;
}

Result<std::shared_ptr<const Model>> RuntimeModel::compiled() {
  std::lock_guard<std::recursive_mutex> lock(rt_->mu_);
  return acquire_locked(nullptr);
}

Result<std::shared_ptr<const Model>> RuntimeModel::acquire_locked(const RuntimeSession* requester) {
  last_used_ = rt_->touch();
  if (compiled_) return compiled_;
  // A .kiln is counted before it is mapped (its size is known); a source model once compiled.
  const bool kiln = is_kiln_file(path_);
  const uint64_t estimate = kiln ? file_bytes(path_) : 0;
  const std::string what = "model " + path_;
  KILN_RETURN_IF_ERROR(rt_->reserve_locked(estimate, load_.priority, what, this, requester));
  auto opened = open_model(path_, load_.open);
  if (!opened) {
    rt_->release_locked(estimate);
    return opened.status();
  }
  uint64_t bytes = estimate;
  if (!kiln) {
    bytes = opened->model->weight_bytes();
    KILN_RETURN_IF_ERROR(rt_->reserve_locked(bytes, load_.priority, what, this, requester));
  }
  compiled_ = std::move(opened->model);
  if (load_.prefault) compiled_->prefault();
  bytes_ = bytes;
  if (!opened_.tokenizer) opened_ = std::move(*opened);
  return compiled_;
}

uint64_t RuntimeModel::evict_locked() {
  compiled_.reset();
  return std::exchange(bytes_, 0);
}

Result<std::shared_ptr<RuntimeSession>> RuntimeModel::new_session(const SessionOptions& o) {
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : default_context(config_);
  if (o.n_ctx < 0) return invalid_argument("n_ctx " + std::to_string(o.n_ctx) + " is negative (0 takes the default)");
  if (n_ctx > config_.max_seq_len)
    return invalid_argument("n_ctx " + std::to_string(n_ctx) + " exceeds the model's maximum of " +
                            std::to_string(config_.max_seq_len));
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16)
    return invalid_argument("a KV cache holds f32 or f16, not " + std::string(dtype_name(o.kv_dtype)));
  std::shared_ptr<RuntimeSession> s(new RuntimeSession());
  s->model_ = shared_from_this();
  s->options_ = o;
  s->n_ctx_ = n_ctx;
  s->sampler_.emplace(o.sampler, config_.vocab_size);
  if (o.profiling != ProfileLevel::kOff || o.check_numerics)
    s->tracer_ = std::make_unique<StepTracer>(o.profiling, o.check_numerics);
  {
    std::lock_guard<std::recursive_mutex> lock(rt_->mu_);
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(), [](const auto& w) { return w.expired(); }),
                    sessions_.end());
    sessions_.push_back(s);
  }
  // Reserved now, so that a session the budget cannot hold is refused here and not mid-reply.
  std::lock_guard<std::mutex> hold(s->mu_);
  KILN_RETURN_IF_ERROR(s->resume());
  return s;
}

// ---------------------------------------------------------------------------------------------
// RuntimeSession

RuntimeSession::~RuntimeSession() {
  stop_counting_decoding();
  if (!snapshot_.empty()) ::unlink(snapshot_.c_str());
  session_.reset();
  std::lock_guard<std::recursive_mutex> lock(model_->rt_->mu_);
  model_->rt_->release_locked(bytes_);
}

Status RuntimeSession::enter() {
  if (owner_.load() == std::this_thread::get_id())
    return reentrant("the session was called from inside its own callback; return from the callback first "
                     "(or use another session)");
  mu_.lock();
  owner_.store(std::this_thread::get_id());
  return Status::ok();
}

void RuntimeSession::exit() {
  owner_.store(std::thread::id());
  mu_.unlock();
}

Status RuntimeSession::resume() {
  Runtime& rt = *model_->rt_;
  std::lock_guard<std::recursive_mutex> lock(rt.mu_);
  last_used_ = rt.touch();
  KILN_ASSIGN_OR_RETURN(auto compiled, model_->acquire_locked(this));
  if (session_) return Status::ok();
  const uint64_t need = Session::bytes_needed(*compiled, n_ctx_, options_.kv_dtype, rt.executor_->n_threads());
  KILN_RETURN_IF_ERROR(rt.reserve_locked(need, options_.priority,
                                         "a session of " + std::to_string(n_ctx_) + " positions", model_.get(), this));
  auto s = Session::create(compiled, n_ctx_, rt.executor_, options_.kv_dtype);
  if (!s) {
    rt.release_locked(need);
    return s.status();
  }
  session_ = std::move(*s);
  session_->set_tracer(tracer_.get());
  bytes_ = need;
  if (!snapshot_.empty()) {
    // The cache is only a cache: a snapshot that cannot be read costs a longer prefill, no more.
    auto tokens = load_session_snapshot(*session_, snapshot_);
    cached_ = tokens ? std::move(*tokens) : std::vector<int>{};
    if (!tokens) session_->reset();
    position_.store(static_cast<int>(cached_.size()));
    ::unlink(snapshot_.c_str());
    snapshot_.clear();
  }
  return Status::ok();
}

uint64_t RuntimeSession::evict_locked() {
  if (!session_) return 0;
  stop_counting_decoding();
  const int n = std::min(static_cast<int>(cached_.size()), session_->position());
  if (n > 0) {
    const std::string path = snapshot_path();
    if (save_session_snapshot(*session_, std::span<const int>(cached_).first(static_cast<size_t>(n)), path)) snapshot_ = path;
    else cached_.clear();  // no room for the snapshot: the next call decodes its prompt in full
  }
  session_.reset();
  return std::exchange(bytes_, 0);
}

Result<GenerationStats> RuntimeSession::run(std::span<const int> prompt, const TurnOptions& turn,
                                            const std::vector<int>& stop_ids, const PieceSink& sink) {
  if (turn.max_tokens < 0) return invalid_argument("max_tokens " + std::to_string(turn.max_tokens) + " is negative");
  for (const std::string& s : turn.stop)
    if (!is_valid_utf8(s)) return invalid_argument("a stop string is not valid UTF-8");
  KILN_RETURN_IF_ERROR(resume());
  stop_counting_decoding();  // generate() counts itself while it decodes
  logits_.clear();
  sampled_tail_ = 0;
  GenerateOptions go;
  go.extra_stop_ids = stop_ids;
  go.stop_strings = turn.stop;
  go.cancel = &cancel_;
  go.on_prefill = turn.on_prefill;
  go.decoding = &model_->rt_->executor_->decoding();
  SpeculativeTurn spec;
  KILN_RETURN_IF_ERROR(spec.begin(*this, turn));
  go.speculator = spec.speculator();
  if (tracer_) tracer_->clear();
  generating_.store(true);
  auto st = generate_reusing(*session_, cached_, *sampler_, model_->tokenizer(), prompt, turn.max_tokens, sink, go);
  position_.store(static_cast<int>(cached_.size()));  // before the live count stops being read
  generating_.store(false);
  if (tracer_ && tracer_->level() != ProfileLevel::kOff) {
    Profile p = build_profile(*session_->model(), *tracer_, options_.kv_dtype, session_->n_threads(),
                              memory_parts(*session_), Ceilings{}, st ? st->prompt_tokens : -1);
    p.model = model_->path();
    profile_ = profile_to_json(p).dump();
  }
  {
    std::lock_guard<std::recursive_mutex> lock(model_->rt_->mu_);
    last_used_ = model_->rt_->touch();
  }
  return st;
}

Result<GenerationStats> RuntimeSession::generate(std::string_view prompt, const TurnOptions& turn, const PieceSink& sink) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cancel_.store(false);
  if (!is_valid_utf8(prompt)) return invalid_argument("the prompt is not valid UTF-8");
  const Tokenizer& tok = model_->tokenizer();
  EncodeOptions eo;
  eo.plain = !turn.parse_special;
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, tok.encode(prompt, eo));
  const bool bos = turn.add_bos < 0 ? tok.bos_id() >= 0 : turn.add_bos > 0;
  if (bos && tok.bos_id() >= 0) ids.insert(ids.begin(), tok.bos_id());
  if (ids.empty()) return invalid_argument("the prompt is empty and the model has no BOS token to start from");
  if (static_cast<int64_t>(ids.size()) >= n_ctx_)
    return context_full("the prompt is " + std::to_string(ids.size()) + " tokens; the session's context of " +
                        std::to_string(n_ctx_) + " holds at most " + std::to_string(n_ctx_ - 1) +
                        " with room for a reply");
  return run(ids, turn, {}, sink);
}

Result<GenerationStats> RuntimeSession::generate_tokens(std::span<const int> prompt, const TurnOptions& turn,
                                                        const PieceSink& sink) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cancel_.store(false);
  // No room kept for a reply: a prompt that fills the context gives its one token (kiln run's rule);
  // the generation loop refuses one longer than the context.
  return run(prompt, turn, {}, sink);
}

Result<GenerationStats> RuntimeSession::chat(const nlohmann::ordered_json& messages, const TurnOptions& turn,
                                             const PieceSink& sink) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cancel_.store(false);
  if (!chat_) {
    KILN_ASSIGN_OR_RETURN(ModelChatTemplate tpl, chat_template_for(model_->opened(), ""));
    KILN_ASSIGN_OR_RETURN(ChatFormat f, ChatFormat::create(model_->tokenizer(), tpl));
    chat_.emplace(std::move(f));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, chat_->encode(messages));
  if (static_cast<int64_t>(ids.size()) >= n_ctx_)
    return context_full("chat: the conversation is " + std::to_string(ids.size()) +
                        " tokens, more than the context of " + std::to_string(n_ctx_) +
                        " holds; clear it or give a longer context");
  return run(ids, turn, chat_->end_of_turn_ids(), sink);
}

Status RuntimeSession::use_chat_template(const ModelChatTemplate& tpl, const nlohmann::ordered_json& kwargs) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  KILN_ASSIGN_OR_RETURN(ChatFormat f, ChatFormat::create(model_->tokenizer(), tpl, kwargs));
  chat_.emplace(std::move(f));
  return Status::ok();
}

Status RuntimeSession::reset() {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cached_.clear();
  position_.store(0);
  stop_counting_decoding();
  logits_.clear();
  sampled_tail_ = 0;
  if (session_) session_->reset();
  if (!snapshot_.empty()) {
    ::unlink(snapshot_.c_str());
    snapshot_.clear();
  }
  return Status::ok();
}

Status RuntimeSession::set_sampler(const SamplerParams& p) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  options_.sampler = p;
  sampler_.emplace(p, model_->config().vocab_size);
  return Status::ok();
}

Status RuntimeSession::save(const std::string& path) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  KILN_RETURN_IF_ERROR(resume());
  const int n = std::min(static_cast<int>(cached_.size()), session_->position());
  return save_session_snapshot(*session_, std::span<const int>(cached_).first(static_cast<size_t>(n)), path);
}

Status RuntimeSession::restore(const std::string& path) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  KILN_RETURN_IF_ERROR(resume());
  KILN_ASSIGN_OR_RETURN(cached_, load_session_snapshot(*session_, path));
  position_.store(static_cast<int>(cached_.size()));
  logits_.clear();
  sampled_tail_ = 0;
  return Status::ok();
}

Result<std::string> RuntimeSession::profile_json() {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  if (!tracer_ || tracer_->level() == ProfileLevel::kOff)
    return invalid_argument("the session was created without profiling (set its profiling level)");
  if (profile_.empty()) return invalid_argument("no call has run on the session yet");
  return profile_;
}

SessionState RuntimeSession::state() {
  SessionState s;
  s.n_ctx = n_ctx_;
  s.generating = generating_.load();
  std::lock_guard<std::recursive_mutex> lock(model_->rt_->mu_);
  s.reserved_bytes = bytes_;
  s.evicted = session_ == nullptr;
  // During a call the session's own count, live (the session cannot be evicted while its call runs,
  // and session_ changes only under rt mu_); between calls what the last call left in the cache.
  s.position = session_ && s.generating ? session_->position() : position_.load();
  return s;
}

// ---------------------------------------------------------------------------------------------
// RuntimeSession, token level

void RuntimeSession::stop_counting_decoding() {
  if (counted_decoding_) model_->rt_->executor_->decoding().fetch_sub(1);
  counted_decoding_ = false;
}

Status RuntimeSession::decode(std::span<const int> ids) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cancel_.store(false);
  if (ids.empty()) return invalid_argument("decode: no token ids");
  const int vocab = model_->config().vocab_size;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return invalid_argument("decode: token id " + std::to_string(ids[i]) + " (at " + std::to_string(i) +
                              ") is outside the vocabulary of " + std::to_string(vocab));
  KILN_RETURN_IF_ERROR(resume());
  // The tokens the cache really holds (a failed call may have left the two apart).
  const int start = std::min(static_cast<int>(cached_.size()), session_->position());
  if (static_cast<int64_t>(start) + static_cast<int64_t>(ids.size()) > n_ctx_)
    return context_full("decode: " + std::to_string(ids.size()) + " tokens after " + std::to_string(start) +
                        " do not fit the session's context of " + std::to_string(n_ctx_));
  session_->rewind(start);
  cached_.resize(static_cast<size_t>(start));
  logits_.clear();
  // One token at a time is how a decoding loop runs: the session counts as decoding, so that the
  // other sessions' steps wait for its token and carry it (see StepExecutor::decoding).
  if (ids.size() == 1 && !counted_decoding_) {
    model_->rt_->executor_->decoding().fetch_add(1);
    counted_decoding_ = true;
  } else if (ids.size() > 1) {
    stop_counting_decoding();
  }
  struct Watch {
    Session& s;
    Watch(Session& x, const std::atomic<bool>* f) : s(x) { s.watch_cancel(f); }
    ~Watch() { s.watch_cancel(nullptr); }
  } watch(*session_, &cancel_);
  const size_t chunk = static_cast<size_t>(std::max(session_->max_step(), 1));
  std::span<const float> last;
  for (size_t i = 0; i < ids.size(); i += chunk) {
    Status st = cancel_.load() ? cancelled("decode: cancelled") : Status::ok();
    if (st) {
      auto l = session_->decode(ids.subspan(i, std::min(chunk, ids.size() - i)));
      if (l) last = *l;
      else st = l.status();
    }
    if (!st) {
      session_->rewind(start);  // as before the call
      return st.code() == StatusCode::kCancelled ? cancelled("decode: cancelled") : st;
    }
  }
  logits_.assign(last.begin(), last.end());
  // A token sample() gave, decoded back, is a sampled one; anything else starts a new prompt.
  sampled_tail_ = ids.size() == 1 && ids[0] == last_sampled_ ? sampled_tail_ + 1 : 0;
  last_sampled_ = -1;
  cached_.insert(cached_.end(), ids.begin(), ids.end());
  position_.store(static_cast<int>(cached_.size()));
  std::lock_guard<std::recursive_mutex> lock(model_->rt_->mu_);
  last_used_ = model_->rt_->touch();
  return Status::ok();
}

Status RuntimeSession::logits(std::span<float> out) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  if (logits_.empty())
    return invalid_argument("no logits to read: decode tokens first (generate, chat, truncate and reset leave none)");
  if (out.size() < logits_.size())
    return invalid_argument("the logits are " + std::to_string(logits_.size()) + " floats; the buffer holds " +
                            std::to_string(out.size()));
  std::copy(logits_.begin(), logits_.end(), out.begin());
  return Status::ok();
}

int RuntimeSession::n_past() { return state().position; }

Status RuntimeSession::truncate(int n_keep) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  KILN_RETURN_IF_ERROR(resume());
  const int n = std::min(static_cast<int>(cached_.size()), session_->position());
  if (n_keep < 0 || n_keep > n)
    return invalid_argument("truncate: n_keep " + std::to_string(n_keep) + " is outside 0.." + std::to_string(n) +
                            " (the tokens the session holds)");
  const size_t dropped = static_cast<size_t>(n - n_keep) + (cached_.size() - static_cast<size_t>(n));
  sampled_tail_ = sampled_tail_ > dropped ? sampled_tail_ - dropped : 0;
  cached_.resize(static_cast<size_t>(n_keep));
  session_->rewind(n_keep);
  position_.store(n_keep);
  logits_.clear();
  last_sampled_ = -1;
  return Status::ok();
}

Result<int> RuntimeSession::sample() {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  if (logits_.empty())
    return invalid_argument("no logits to sample from: decode tokens first (generate, chat, truncate and reset leave none)");
  const int id = sampler_->sample(logits_, cached_, cached_.size() - std::min(sampled_tail_, cached_.size()));
  last_sampled_ = id;
  return id;
}

}  // namespace kiln
