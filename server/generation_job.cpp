// The job's thread runs the C API's turn; the token callback hands text over under a mutex and
// returns non-zero once the job is cancelled, so a cancel takes effect within one step.
#include "server/generation_job.h"

#include <cstring>

namespace kiln::server {

GenerationJob::GenerationJob(kiln_session* session, const GenerationRequest& req, int max_tokens, int ctx_limit,
                             const JobExtras& extras)
    : session_(session), max_tokens_(max_tokens), ctx_limit_(ctx_limit) {
  result_.size = sizeof result_;
  start(session, req, max_tokens, extras);
}

GenerationJob::~GenerationJob() {
  cancel();
  if (job_ != nullptr) kiln_job_free(job_);  // waits for it
}

void GenerationJob::cancel() {
  // The job's own cancel: once finished it stops nothing (the slot may serve another request).
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  cancelled_.store(true);
  if (job_ != nullptr) kiln_job_cancel(job_);
}

int GenerationJob::on_token(void* self, const char* text, size_t len, const int32_t*, size_t n_ids) {
  auto* job = static_cast<GenerationJob*>(self);
  if (!job->checked_ && n_ids > 0) {
    job->checked_ = true;
    // The first text comes before its last sampled token is decoded: the session holds the
    // prompt and the n_ids - 1 tokens before that one.
    kiln_session_stats ss{};
    ss.size = sizeof ss;
    if (job->ctx_limit_ > 0 && kiln_session_stats_get(job->session_, &ss) == KILN_OK) {
      const int prompt = ss.position - static_cast<int>(n_ids) + 1;
      if (static_cast<int64_t>(prompt) + job->max_tokens_ > job->ctx_limit_) {
        std::lock_guard<std::mutex> lock(job->mu_);
        job->overflow_prompt_ = prompt;
        return 1;  // nothing of the reply is handed over
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(job->mu_);
    job->pending_.append(text, len);
  }
  job->cv_.notify_all();
  return job->cancelled_.load() ? 1 : 0;
}

void GenerationJob::start(kiln_session* session, const GenerationRequest& req, int max_tokens, const JobExtras& extras) {
  kiln_sampling_params sp = kiln_sampling_default_params();
  if (req.temperature) sp.temperature = static_cast<float>(*req.temperature);
  if (req.top_p) sp.top_p = static_cast<float>(*req.top_p);
  if (req.frequency_penalty) sp.frequency_penalty = static_cast<float>(*req.frequency_penalty);
  if (req.presence_penalty) sp.presence_penalty = static_cast<float>(*req.presence_penalty);
  if (req.repeat_penalty) sp.repeat_penalty = static_cast<float>(*req.repeat_penalty);
  if (req.repeat_last_n) sp.repeat_last_n = *req.repeat_last_n;
  sp.seed = req.seed ? *req.seed : KILN_SEED_RANDOM;
  kiln_status st = kiln_session_set_sampling(session, &sp);
  if (st == KILN_OK) {
    // The C API copies the strings and messages before it returns.
    std::vector<const char*> stops;
    for (const std::string& s : req.stop) stops.push_back(s.c_str());
    kiln_generate_params gp = kiln_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.stop = stops.empty() ? nullptr : stops.data();
    gp.n_stop = stops.size();
    // Constrained output: a required tool call's grammar, else the response_format's.
    static const char* const kAnyObject = "{\"type\": \"object\", \"additionalProperties\": true}";
    if (!extras.tool_grammar.empty()) gp.grammar = extras.tool_grammar.c_str();
    if (!extras.tool_trigger.empty()) gp.grammar_trigger = extras.tool_trigger.c_str();
    else if (req.format == ReplyFormat::kGrammar) gp.grammar = req.format_text.c_str();
    else if (req.format == ReplyFormat::kJsonSchema) gp.json_schema = req.format_text.c_str();
    else if (req.format == ReplyFormat::kJsonObject) gp.json_schema = kAnyObject;
    gp.draft_model = extras.draft;
    gp.lookup_ngram = extras.draft != nullptr ? 0 : req.lookup;
    gp.draft_max = req.draft_max;
    done_.fn = &GenerationJob::on_done;
    done_.user_data = this;
    gp.on_done = &done_;
    std::lock_guard<std::mutex> lock(mu_);  // job_ is set before on_done can read finished_ with it
    if (req.chat && !req.chat_json.empty()) {
      st = kiln_session_chat_json_async(session, req.chat_json.c_str(), &gp, &GenerationJob::on_token, this, &job_);
    } else if (req.chat) {
      std::vector<kiln_message> ms;
      for (const ChatMessage& m : req.messages) ms.push_back(kiln_message{m.role.c_str(), m.content.c_str()});
      st = kiln_session_chat_async(session, ms.data(), ms.size(), &gp, &GenerationJob::on_token, this, &job_);
    } else {
      st = kiln_session_generate_async(session, req.prompt.c_str(), &gp, &GenerationJob::on_token, this, &job_);
    }
  }
  if (st != KILN_OK) finish(st, nullptr, kiln_last_error());
}

void GenerationJob::on_done(void* self, kiln_status status, const kiln_generate_result* result, const char* error) {
  static_cast<GenerationJob*>(self)->finish(status, result, error);
}

void GenerationJob::finish(kiln_status st, const kiln_generate_result* res, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (res != nullptr) result_ = *res;
    // A reply that ended before any text (an end token first) is held to the same rule.
    if (st == KILN_OK && !checked_ && ctx_limit_ > 0 &&
        static_cast<int64_t>(result_.prompt_tokens) + max_tokens_ > ctx_limit_)
      overflow_prompt_ = result_.prompt_tokens;
    status_ = st;
    error_ = st == KILN_OK ? std::string() : error;
    finished_ = true;
  }
  cv_.notify_all();
}

bool GenerationJob::next(std::string& text) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !pending_.empty() || finished_; });
  text.clear();
  text.swap(pending_);
  return !text.empty() || !finished_;
}

void GenerationJob::wait_started() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !pending_.empty() || finished_; });
}

int GenerationJob::overflow_prompt() {
  std::lock_guard<std::mutex> lock(mu_);
  return overflow_prompt_;
}

bool GenerationJob::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace kiln::server
