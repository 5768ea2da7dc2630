// What the C API's opaque handles are, and how a call checks one: every live handle is in a
// process-wide registry, so a NULL, freed or foreign pointer is an error message, never a
// dereference.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/runtime.h"
#include "kiln/kiln.h"

struct kiln_runtime {
  std::shared_ptr<kiln::Runtime> rt;
};

struct kiln_model {
  std::shared_ptr<kiln::RuntimeModel> model;
};

struct kiln_session {
  std::shared_ptr<kiln::RuntimeSession> session;
};

// An asynchronous call (a model load, a generation) on the runtime's job threads.
struct kiln_job {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;        // under mu: the work and its callbacks have returned
  std::thread::id runner;   // under mu: the job thread while it runs the work
  std::atomic<bool> cancel{false};
  std::shared_ptr<kiln::RuntimeSession> session;  // a generation's, which kiln_job_cancel stops
  // When done:
  kiln_status status = KILN_OK;
  std::string error;
  bool has_result = false;  // a generation's
  kiln_generate_result result{};
  // Whichever of (the work ends, the owner lets go) comes second frees the job.
  std::atomic<bool> released{false};
};

namespace kiln::capi {

enum class HandleKind { kRuntime, kModel, kSession, kJob };

void register_handle(const void* p, HandleKind kind);
// False (and the thread's error set, naming `what`) when `p` is not a live handle of that kind.
bool check_handle(const void* p, HandleKind kind, const char* what);
// Removes the handle; false when it was not live (a double free is then ignored).
bool unregister_handle(const void* p, HandleKind kind);

// Sets this thread's error message and returns the status the C edge reports for `s`.
kiln_status fail(const Status& s);
kiln_status fail(kiln_status code, const std::string& message);
// KILN_OK, clearing nothing (the last error stays until the next failure).
inline kiln_status ok() { return KILN_OK; }
kiln_status to_c_status(StatusCode code);

// Runs `work` on `rt`'s job threads as `job` (registered here): `work` returns the job's status,
// with its message taken from the thread's last error. `out` NULL: nobody will wait on the job.
void start_job(kiln::Runtime& rt, kiln_job* job, std::function<kiln_status()> work, kiln_job** out);

}  // namespace kiln::capi
