#include "session_box.h"

#include "jni_support.h"

namespace kiln_jni {

kiln_status run_turn(kiln_session* session, const Turn& turn, kiln_token_fn fn, void* user, kiln_generate_result* out) {
  kiln_generate_params p = turn.params;
  std::vector<const char*> stop;
  for (const std::string& s : turn.stop) stop.push_back(s.c_str());
  p.stop = stop.empty() ? nullptr : stop.data();
  p.n_stop = stop.size();
  if (!turn.chat) return kiln_session_generate(session, turn.prompt.c_str(), &p, fn, user, out);
  std::vector<kiln_message> messages;
  for (size_t i = 0; i < turn.roles.size(); ++i) messages.push_back({turn.roles[i].c_str(), turn.contents[i].c_str()});
  return kiln_session_chat(session, messages.data(), messages.size(), &p, fn, user, out);
}

void SessionBox::set_running(int64_t call) {
  std::lock_guard<std::mutex> lock(running_mu_);
  running_ = call;
}

void SessionBox::cancel_if_running(int64_t call) {
  // Under the lock, the call cannot end and the next begin in between; a cancel that lands after
  // the call's last step is cleared when the next generate starts (kiln resets it there).
  std::lock_guard<std::mutex> lock(running_mu_);
  if (running_ == call) kiln_session_cancel(session_);
}

void SessionBox::post(std::function<void(JNIEnv*)> task) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(task));
  if (!worker_.joinable()) worker_ = std::thread([this] { loop(); });
  cv_.notify_one();
}

void SessionBox::loop() {
  JNIEnv* env = env_for_native_thread();  // attached once, detached when this thread ends
  for (;;) {
    std::function<void(JNIEnv*)> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) break;  // closed, and every queued call has ended
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (env != nullptr) task(env);
  }
  bool free_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_now = free_on_exit_;
  }
  if (free_now) delete this;
}

void SessionBox::close(SessionBox* box) {
  box->closing_.store(true);
  kiln_session_cancel(box->session_);
  {
    std::lock_guard<std::mutex> lock(box->mu_);
    box->stop_ = true;
    if (box->worker_.joinable() && box->worker_.get_id() == std::this_thread::get_id()) {
      box->free_on_exit_ = true;
      box->worker_.detach();
      return;
    }
  }
  box->cv_.notify_all();
  if (box->worker_.joinable()) box->worker_.join();
  { const std::lock_guard<std::recursive_mutex> wait_for_callers(box->use_); }
  delete box;
}

}  // namespace kiln_jni
