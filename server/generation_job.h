// One request's generation on a slot's session, as a job on the runtime's job threads
// (kiln_session_chat_async / _generate_async; no thread of its own): the HTTP thread reads its
// text as it comes (SSE) or waits for the end, and cancels it when the client goes away.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "server/request_parser.h"

namespace kiln::server {

// What the server adds to a request: the grammar of a required tool call (GBNF; it takes the
// place of the request's response_format) and the draft model of kiln serve --draft.
struct JobExtras {
  std::string tool_grammar;
  std::string tool_trigger;  // tool_choice auto: the grammar holds from this text on (a lazy grammar)
  kiln_model* draft = nullptr;
};

class GenerationJob {
 public:
  // Starts generating `req` on `session` (sampling set from the request first). `ctx_limit` > 0:
  // a prompt whose tokens plus `max_tokens` exceed it is refused (overflow_prompt()) before any
  // text is handed over; the prompt's length is only known once the runtime has read it.
  GenerationJob(kiln_session* session, const GenerationRequest& req, int max_tokens, int ctx_limit = 0,
                const JobExtras& extras = JobExtras{});
  ~GenerationJob();  // cancels and waits for the job
  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;

  // Waits for new text or the end. Returns false once finished and all text was taken.
  bool next(std::string& text);
  // Waits until text has come or the job has finished (a request that fails before its first
  // token is answered with an error status, not a stream).
  void wait_started();
  // Any thread: the generation stops before its next step.
  void cancel();

  // After next() returned false (or wait_started() saw it finish):
  bool finished();
  kiln_status status() const { return status_; }
  const std::string& error() const { return error_; }
  const kiln_generate_result& result() const { return result_; }
  // The prompt's tokens when the job was refused for ctx_limit, else -1.
  int overflow_prompt();

 private:
  static int on_token(void* self, const char* text, size_t len, const int32_t* ids, size_t n_ids);
  static void on_done(void* self, kiln_status status, const kiln_generate_result* result, const char* error);
  // Sets the request's sampling and starts the job; a failure finishes the job at once.
  void start(kiln_session* session, const GenerationRequest& req, int max_tokens, const JobExtras& extras);
  void finish(kiln_status status, const kiln_generate_result* result, const std::string& error);

  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  kiln_session* session_;
  kiln_status status_ = KILN_OK;
  std::string error_;
  kiln_generate_result result_{};
  int max_tokens_ = 0, ctx_limit_ = 0;
  bool checked_ = false;      // the generating thread's: the ctx_limit check has run
  int overflow_prompt_ = -1;  // under mu_
  kiln_job_done done_{};
  kiln_job* job_ = nullptr;
};

}  // namespace kiln::server
