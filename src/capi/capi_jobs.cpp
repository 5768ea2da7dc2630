// kiln.h: jobs, the asynchronous calls: how they run on the runtime's job threads, and cancel,
// wait, result and free.
#include <string>

#include "capi/guard.h"

using namespace kiln;
using namespace kiln::capi;

namespace kiln::capi {

namespace {
// Frees the job once both the work and its owner are through with it.
void let_go(kiln_job* job) {
  if (job->released.exchange(true)) delete job;
}

// Waits for the job; false (the error set) when called from the job's own thread.
bool wait_done(kiln_job* job, const char* what) {
  std::unique_lock<std::mutex> l(job->mu);
  if (job->runner == std::this_thread::get_id()) {
    fail(KILN_E_REENTRANT, std::string(what) + ": called from the job's own callback");
    return false;
  }
  job->cv.wait(l, [&] { return job->done; });
  return true;
}

kiln_status job_status(kiln_job* job) {
  return job->status == KILN_OK ? KILN_OK : fail(job->status, job->error);
}
}  // namespace

void start_job(Runtime& rt, kiln_job* job, std::function<kiln_status()> work, kiln_job** out) {
  register_handle(job, HandleKind::kJob);
  if (out) *out = job;
  else {
    unregister_handle(job, HandleKind::kJob);
    let_go(job);  // nobody will wait on it: the work frees it when it ends
  }
  rt.jobs().post([job, work = std::move(work)] {
    {
      std::lock_guard<std::mutex> l(job->mu);
      job->runner = std::this_thread::get_id();
    }
    const kiln_status st = work();
    JobThreads::finishing();
    {
      // Notified under the lock: a waiter that wakes may free the job as soon as it has it.
      std::lock_guard<std::mutex> l(job->mu);
      job->status = st;
      if (st != KILN_OK) job->error = kiln_last_error();
      job->runner = {};
      job->session.reset();
      job->done = true;
      job->cv.notify_all();
    }
    let_go(job);
  });
}

}  // namespace kiln::capi

extern "C" {

KILN_API kiln_status kiln_job_cancel(kiln_job* job) {
  return guarded("kiln_job_cancel", [&] {
    if (!check_handle(job, HandleKind::kJob, "kiln_job_cancel")) return KILN_E_INVALID_ARGUMENT;
    std::lock_guard<std::mutex> l(job->mu);
    job->cancel.store(true);
    if (job->session && !job->done) job->session->cancel();
    return ok();
  });
}

KILN_API kiln_status kiln_job_wait(kiln_job* job) {
  return guarded("kiln_job_wait", [&] {
    if (!check_handle(job, HandleKind::kJob, "kiln_job_wait")) return KILN_E_INVALID_ARGUMENT;
    if (!wait_done(job, "kiln_job_wait")) return KILN_E_REENTRANT;
    return job_status(job);
  });
}

KILN_API kiln_status kiln_job_result(kiln_job* job, kiln_generate_result* out) {
  return guarded("kiln_job_result", [&] {
    if (!check_handle(job, HandleKind::kJob, "kiln_job_result")) return KILN_E_INVALID_ARGUMENT;
    if (!wait_done(job, "kiln_job_result")) return KILN_E_REENTRANT;
    if (out != nullptr && job->has_result) write_sized(out, job->result);
    return job_status(job);
  });
}

KILN_API void kiln_job_free(kiln_job* job) {
  if (!check_handle(job, HandleKind::kJob, "kiln_job_free")) return;
  unregister_handle(job, HandleKind::kJob);
  {
    std::unique_lock<std::mutex> l(job->mu);
    // From its own callback the job cannot be waited for: it frees itself when it ends.
    if (job->runner != std::this_thread::get_id()) job->cv.wait(l, [&] { return job->done; });
  }
  let_go(job);
}

}  // extern "C"
