#include "engine/job_threads.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace kiln {

struct JobThreads::State {
  std::mutex mu;
  std::condition_variable cv;
  std::condition_variable taken_cv;  // a worker took a job
  uint64_t posted = 0, taken = 0;    // jobs so far: the queue holds those in (taken, posted]
  std::deque<std::function<void()>> queue;
  std::vector<std::thread> threads;
  int idle = 0;
  int finishing = 0;  // threads past their job's end (JobThreads::finishing), on their way back
  int max_threads = 1;
  bool stop = false;
};

JobThreads::JobThreads(int max_threads) : state_(std::make_shared<State>()) {
  state_->max_threads = std::max(max_threads, 1);
}

JobThreads::~JobThreads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->stop = true;
    state_->queue.clear();
    threads.swap(state_->threads);
  }
  state_->cv.notify_all();
  for (std::thread& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) t.detach();  // it holds the state and ends next
    else t.join();
  }
}

void JobThreads::post(std::function<void()> job) {
  State& s = *state_;
  std::unique_lock<std::mutex> l(s.mu);
  s.queue.push_back(std::move(job));
  const uint64_t mine = ++s.posted;
  s.cv.notify_one();
  if (s.idle + s.finishing >= static_cast<int>(s.queue.size()) ||
      static_cast<int>(s.threads.size()) >= s.max_threads)
    return;
  // Every thread is busy. One may be finishing its job (a caller that waited for a job's end posts
  // the next one while that job's thread is still on its way back): give it a moment to take this
  // one before another thread is added.
  if (!s.threads.empty() &&
      s.taken_cv.wait_for(l, std::chrono::milliseconds(2), [&] { return s.stop || s.taken >= mine; }))
    return;
  s.threads.emplace_back([st = state_] { work(st); });
}

int JobThreads::n_threads() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return static_cast<int>(state_->threads.size());
}

bool JobThreads::on_job_thread() const {
  std::lock_guard<std::mutex> l(state_->mu);
  const auto me = std::this_thread::get_id();
  return std::any_of(state_->threads.begin(), state_->threads.end(), [&](const std::thread& t) { return t.get_id() == me; });
}

namespace {
thread_local JobThreads::State* t_state = nullptr;  // the job threads this thread is one of
thread_local bool t_finishing = false;             // it called finishing() for its job
}  // namespace

void JobThreads::finishing() {
  if (t_state == nullptr || t_finishing) return;
  std::lock_guard<std::mutex> l(t_state->mu);
  t_finishing = true;
  ++t_state->finishing;
}

void JobThreads::work(const std::shared_ptr<State>& s) {
  t_state = s.get();  // the thread holds `s` until it ends
  std::unique_lock<std::mutex> l(s->mu);
  for (;;) {
    ++s->idle;
    s->cv.wait(l, [&] { return s->stop || !s->queue.empty(); });
    --s->idle;
    if (s->stop) return;
    std::function<void()> job = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->taken;
    s->taken_cv.notify_all();
    l.unlock();
    job();
    job = nullptr;  // what it captured goes here, outside the lock (it may own this object)
    l.lock();
    if (t_finishing) --s->finishing;
    t_finishing = false;
  }
}

}  // namespace kiln
