// What the C API's opaque handles are, and how a call checks one: every live handle is in a
// process-wide registry, so a NULL, freed or foreign pointer is an error message, never a
// dereference.
#pragma once

#include <atomic>
#include <memory>
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

struct kiln_job {
  std::thread thread;
  std::atomic<bool> cancel{false};
  std::atomic<bool> done{false};
  // Set by whichever of (the loading thread ends, the owner lets go) happens first; the second
  // frees the job.
  std::atomic<bool> released{false};
  kiln_status status = KILN_OK;
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

}  // namespace kiln::capi
