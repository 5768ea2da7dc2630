// The runtime's job threads: asynchronous calls (a model load, a generation) run on threads the
// runtime keeps, not on one started per call. A job goes to an idle thread; when none is idle a
// thread is added, up to a cap, past which jobs wait in order. Generations that block on a shared
// decode step need one thread each to be batched together, hence threads grow with the jobs that
// run at once instead of being a fixed small pool.
#pragma once

#include <functional>
#include <memory>
#include <thread>

namespace kiln {

class JobThreads {
 public:
  static constexpr int kMaxThreads = 64;

  explicit JobThreads(int max_threads = kMaxThreads);
  // Lets the running jobs finish and drops the queued ones (their functions are destroyed
  // uncalled). From one of its own threads (the last owner let go inside a job), that thread is
  // left to end by itself.
  ~JobThreads();
  JobThreads(const JobThreads&) = delete;
  JobThreads& operator=(const JobThreads&) = delete;

  void post(std::function<void()> job);
  // Called by a job at its end, just before it tells its caller it is done: a job the caller posts
  // next then waits for this thread instead of adding one (however late the thread gets back).
  // On any other thread it does nothing.
  static void finishing();
  // Threads started so far (they stay, idle, for the next jobs).
  int n_threads() const;
  // True on one of this object's threads.
  bool on_job_thread() const;

  struct State;  // opaque (job_threads.cpp)

 private:
  static void work(const std::shared_ptr<State>& s);
  std::shared_ptr<State> state_;  // shared with the threads, which may outlive this object
};

}  // namespace kiln
