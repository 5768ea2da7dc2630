// A session as the binding holds it: the kiln_session, the lock that keeps its calls one at a time
// (blocking ones on the caller's thread, async ones on the worker), and the one native worker thread
// that runs its async calls and delivers their callbacks. The worker starts at the first async call,
// is attached to the JVM once, and ends (detached) when the session is closed.
#ifndef KILN_JNI_SESSION_BOX_H
#define KILN_JNI_SESSION_BOX_H

#include <jni.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

namespace kiln_jni {

// One generate or chat call's inputs, copied out of Java before the call runs.
struct Turn {
  bool chat = false;
  std::string prompt;
  std::vector<std::string> roles, contents;
  std::vector<std::string> stop;
  kiln_generate_params params = kiln_generate_default_params();
};

// Runs `turn` on `session` (the caller holds its lock).
kiln_status run_turn(kiln_session* session, const Turn& turn, kiln_token_fn fn, void* user, kiln_generate_result* out);

class SessionBox {
 public:
  explicit SessionBox(kiln_session* session) : session_(session) {}
  SessionBox(const SessionBox&) = delete;
  SessionBox& operator=(const SessionBox&) = delete;

  kiln_session* session() const { return session_; }
  // Held for every call that generates or changes the session; recursive so that a callback calling
  // its own session gets the C API's KILN_E_REENTRANT instead of a deadlock.
  std::recursive_mutex& use() { return use_; }
  bool closing() const { return closing_.load(); }

  // The async call running now (0: none), so that cancelling one call never stops the next.
  void set_running(int64_t call);
  void cancel_if_running(int64_t call);

  // Queues `task` on the worker (started now if it is not running).
  void post(std::function<void(JNIEnv*)> task);

  // Cancels what runs, lets queued calls end as cancelled, ends the worker and frees everything.
  // From the worker itself (a callback closing its own session) that happens after the running call.
  static void close(SessionBox* box);

 private:
  ~SessionBox() { kiln_session_free(session_); }
  void loop();

  kiln_session* session_;
  std::recursive_mutex use_;
  std::atomic<bool> closing_{false};
  std::mutex running_mu_;
  int64_t running_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void(JNIEnv*)>> queue_;
  bool stop_ = false;
  bool free_on_exit_ = false;
  std::thread worker_;
};

}  // namespace kiln_jni

#endif
