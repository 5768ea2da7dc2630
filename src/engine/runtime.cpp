#include "engine/runtime.h"

#include "engine/runtime_core.h"

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

Runtime::Runtime(const RuntimeOptions& o)
    : core_(std::make_shared<RuntimeCore>(o.memory_budget, plan_threads(o.perf_mode, o.n_threads))) {}

Runtime::~Runtime() = default;

std::shared_ptr<Runtime> Runtime::create(const RuntimeOptions& options) {
  return std::shared_ptr<Runtime>(new Runtime(options));
}

const ThreadPlan& Runtime::thread_plan() const { return core_->plan; }

Result<std::shared_ptr<RuntimeModel>> Runtime::load_model(const std::string& path, const ModelLoadOptions& options) {
  return RuntimeModel::open(shared_from_this(), core_, path, options);
}

uint64_t Runtime::trim() {
  RuntimeCore::Lock lock(*core_);
  return core_->budget.trim();
}

RuntimeStats Runtime::stats() {
  RuntimeCore::Lock lock(*core_);
  const MemoryBudget& b = core_->budget;
  RuntimeStats s;
  s.budget = b.budget();
  s.held = b.held();
  s.peak_held = b.peak();
  s.n_threads = core_->executor->n_threads();
  s.n_evictions = b.evictions();
  s.decode_steps = core_->executor->decode_steps();
  s.decode_tokens = core_->executor->decode_tokens();
  core_->budget.count(s.n_models, s.n_sessions);
  return s;
}

// ---------------------------------------------------------------------------------------------
// RuntimeModel

Result<std::shared_ptr<RuntimeModel>> RuntimeModel::open(std::shared_ptr<Runtime> rt, std::shared_ptr<RuntimeCore> core,
                                                         const std::string& path, const ModelLoadOptions& options) {
  auto step = [&](double f) { return !options.progress || options.progress(f); };
  if (!step(0)) return cancelled(path + ": load cancelled");
  std::shared_ptr<RuntimeModel> m(new RuntimeModel());
  m->rt_ = std::move(rt);
  m->core_ = std::move(core);
  m->path_ = path;
  m->load_ = options;
  RuntimeCore::Lock lock(*m->core_);
  KILN_ASSIGN_OR_RETURN(auto compiled, static_cast<WeightsSource&>(*m).acquire_locked(nullptr));
  if (!step(0.9)) {
    compiled.reset();
    m->core_->budget.release(m->evict_held());
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
  m->core_->budget.add_model(std::shared_ptr<Evictable>(m, static_cast<Evictable*>(m.get())));
  step(1);
  return m;
}

RuntimeModel::~RuntimeModel() {
  if (!core_) return;
  RuntimeCore::Lock lock(*core_);
  core_->budget.release(bytes_);
}

bool RuntimeModel::resident() {
  RuntimeCore::Lock lock(*core_);
  return compiled_ != nullptr;
}

std::shared_ptr<const TokenTrie> RuntimeModel::grammar_vocabulary() {
  std::lock_guard<std::mutex> lock(vocabulary_mu_);
  if (!grammar_vocabulary_) grammar_vocabulary_ = kiln::grammar_vocabulary(tokenizer());
  return grammar_vocabulary_;
}

Result<std::shared_ptr<const Model>> RuntimeModel::compiled() {
  RuntimeCore::Lock lock(*core_);
  return acquire_locked(nullptr);
}

Result<std::shared_ptr<const Model>> RuntimeModel::acquire_locked(const Evictable* requester) {
  last_used_ = core_->touch();
  if (compiled_) return compiled_;
  // A .kiln is counted before it is mapped (its size is known); a source model once compiled.
  const bool kiln = load_.open.range || is_kiln_file(path_);
  const uint64_t estimate = load_.open.range ? load_.open.range->length() : kiln ? file_bytes(path_) : 0;
  const std::string what = "model " + path_;
  const Evictable* keep[] = {static_cast<const Evictable*>(this), requester};
  MemoryBudget& budget = core_->budget;
  KILN_RETURN_IF_ERROR(budget.reserve(estimate, load_.priority, what, keep));
  auto opened = open_model(path_, load_.open);
  if (!opened) {
    budget.release(estimate);
    return opened.status();
  }
  uint64_t bytes = estimate;
  if (!kiln) {
    bytes = opened->model->weight_bytes();
    KILN_RETURN_IF_ERROR(budget.reserve(bytes, load_.priority, what, keep));
  }
  compiled_ = std::move(opened->model);
  if (load_.prefault) compiled_->prefault();
  bytes_ = bytes;
  if (!opened_.tokenizer) opened_ = std::move(*opened);
  return compiled_;
}

bool RuntimeModel::try_hold(std::span<const Evictable* const> keep) {
  if (std::find(keep.begin(), keep.end(), static_cast<const Evictable*>(this)) != keep.end()) return false;
  // A model goes only when every one of its sessions is idle (and then they go first).
  std::vector<std::shared_ptr<Evictable>> live;
  sessions(live);
  for (auto& s : live) {
    if (!s->try_hold(keep)) {
      release_hold();
      return false;
    }
    held_sessions_.push_back(std::move(s));
  }
  return true;
}

uint64_t RuntimeModel::evict_held() {
  uint64_t freed = 0;
  for (auto& s : held_sessions_)
    if (s->holds_memory()) freed += s->evict_held();
  compiled_.reset();
  return freed + std::exchange(bytes_, 0);
}

void RuntimeModel::release_hold() {
  for (auto& s : held_sessions_) s->release_hold();
  // Dropped with the runtime's lock released (see RuntimeCore::Lock): a session whose owner let go
  // of it meanwhile is destroyed there.
  for (auto& s : held_sessions_) core_->budget.keep_alive(std::move(s));
  held_sessions_.clear();
}

void RuntimeModel::sessions(std::vector<std::shared_ptr<Evictable>>& out) {
  for (const auto& w : sessions_)
    if (auto s = w.lock()) out.push_back(std::move(s));
}

Result<std::shared_ptr<RuntimeSession>> RuntimeModel::new_session(const SessionOptions& o) {
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : default_context(config_);
  if (o.n_ctx < 0) return invalid_argument("n_ctx " + std::to_string(o.n_ctx) + " is negative (0 takes the default)");
  if (n_ctx > config_.max_seq_len)
    return invalid_argument("n_ctx " + std::to_string(n_ctx) + " exceeds the model's maximum of " +
                            std::to_string(config_.max_seq_len));
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16)
    return invalid_argument("a KV cache holds f32 or f16, not " + std::string(dtype_name(o.kv_dtype)));
  SessionOptions with_ctx = o;
  with_ctx.n_ctx = n_ctx;
  return RuntimeSession::open(shared_from_this(), core_, *this, sessions_, with_ctx);
}

// ---------------------------------------------------------------------------------------------
// RuntimeSession

Result<std::shared_ptr<RuntimeSession>> RuntimeSession::open(std::shared_ptr<RuntimeModel> model,
                                                             std::shared_ptr<RuntimeCore> core, WeightsSource& weights,
                                                             std::vector<std::weak_ptr<Evictable>>& model_sessions,
                                                             const SessionOptions& o) {
  std::shared_ptr<RuntimeSession> s(new RuntimeSession());
  s->model_ = std::move(model);
  s->core_ = std::move(core);
  s->weights_ = &weights;
  s->options_ = o;
  s->n_ctx_ = o.n_ctx;
  s->sampler_.emplace(o.sampler, s->model_->config().vocab_size);
  if (o.profiling != ProfileLevel::kOff || o.check_numerics)
    s->tracer_ = std::make_unique<StepTracer>(o.profiling, o.check_numerics);
  {
    RuntimeCore::Lock lock(*s->core_);
    std::erase_if(model_sessions, [](const auto& w) { return w.expired(); });
    model_sessions.push_back(std::shared_ptr<Evictable>(s, static_cast<Evictable*>(s.get())));
  }
  // Reserved now, so that a session the budget cannot hold is refused here and not mid-reply.
  std::lock_guard<std::mutex> hold(s->mu_);
  KILN_RETURN_IF_ERROR(s->resume());
  return s;
}

RuntimeSession::~RuntimeSession() {
  stop_counting_decoding();
  if (!snapshot_.empty()) ::unlink(snapshot_.c_str());
  session_.reset();
  RuntimeCore::Lock lock(*core_);
  core_->budget.release(bytes_);
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

void RuntimeSession::touch() {
  RuntimeCore::Lock lock(*core_);
  last_used_ = core_->touch();
}

bool RuntimeSession::try_hold(std::span<const Evictable* const> keep) {
  if (std::find(keep.begin(), keep.end(), static_cast<const Evictable*>(this)) != keep.end()) return false;
  // The thread inside this session's call (its own reservation) holds mu_ already.
  return owner_.load() != std::this_thread::get_id() && mu_.try_lock();
}

uint64_t RuntimeSession::evict_held() { return evict_locked(); }

Status RuntimeSession::resume() {
  RuntimeCore& core = *core_;
  RuntimeCore::Lock lock(core);
  last_used_ = core.touch();
  KILN_ASSIGN_OR_RETURN(auto compiled, weights_->acquire_locked(static_cast<const Evictable*>(this)));
  if (session_) return Status::ok();
  const uint64_t need = Session::bytes_needed(*compiled, n_ctx_, options_.kv_dtype, core.executor->n_threads());
  const Evictable* keep[] = {static_cast<const Evictable*>(this)};
  KILN_RETURN_IF_ERROR(core.budget.reserve(need, options_.priority,
                                           "a session of " + std::to_string(n_ctx_) + " positions", keep));
  auto s = Session::create(compiled, n_ctx_, core.executor, options_.kv_dtype);
  if (!s) {
    core.budget.release(need);
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
  go.decoding = &core_->executor->decoding();
  if (turn.grammar) {
    go.grammar = turn.grammar;
    go.grammar_vocabulary = model_->grammar_vocabulary();
    go.grammar_trigger = turn.grammar_trigger;
  }
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
  touch();
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
                                             const PieceSink& sink, const nlohmann::ordered_json& tools) {
  KILN_RETURN_IF_ERROR(enter());
  const Held held{this};
  cancel_.store(false);
  if (!chat_) {
    KILN_ASSIGN_OR_RETURN(ModelChatTemplate tpl, chat_template_for(model_->opened(), ""));
    KILN_ASSIGN_OR_RETURN(ChatFormat f, ChatFormat::create(model_->tokenizer(), tpl));
    chat_.emplace(std::move(f));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, chat_->encode(messages, tools));
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
  RuntimeCore::Lock lock(*core_);
  s.reserved_bytes = bytes_;
  s.evicted = session_ == nullptr;
  // During a call the session's own count, live (the session cannot be evicted while its call runs,
  // and session_ changes only under the runtime's lock); between calls what the last call left in the cache.
  s.position = session_ && s.generating ? session_->position() : position_.load();
  return s;
}

// ---------------------------------------------------------------------------------------------
// RuntimeSession, token level

void RuntimeSession::stop_counting_decoding() {
  if (counted_decoding_) core_->executor->decoding().fetch_sub(1);
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
    core_->executor->decoding().fetch_add(1);
    counted_decoding_ = true;
  } else if (ids.size() > 1) {
    stop_counting_decoding();
  }
  const CancelWatch watch(*session_, &cancel_);
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
  touch();
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
