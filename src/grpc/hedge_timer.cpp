// SPDX-License-Identifier: Apache-2.0
// The hedged calls' delay timer (hedge_timer.hpp).
#include "grpc/hedge_timer.hpp"

#include <vector>

namespace stormguard::grpc::detail {

hedge_timer::~hedge_timer() {
  {
    const std::lock_guard hold(mutex_);
    stopping_ = true;
  }
  changed_.notify_one();
  if (thread_.joinable()) thread_.join();
}

hedge_timer::key hedge_timer::arm(clock::time_point at, std::weak_ptr<timer_target> target,
                                  std::uint32_t generation) {
  bool earliest = false;
  key k{at, 0};
  {
    const std::lock_guard hold(mutex_);
    k.second = ++sequence_;
    const auto placed = armed_.emplace(k, wake{std::move(target), generation}).first;
    // The thread is woken only when it would sleep past this wake-up: when it waits for a later
    // time (kept after that wake-up was disarmed), or for nothing. A client whose calls answer
    // before their delay then wakes it about once per delay, not once per call.
    earliest = placed == armed_.begin() && at < sleeping_until_;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  if (earliest) changed_.notify_one();  // the thread sleeps until a later time, or forever
  return k;
}

void hedge_timer::disarm(const key& k) {
  const std::lock_guard hold(mutex_);
  armed_.erase(k);
}

void hedge_timer::run() {
  std::vector<wake> due;
  std::unique_lock hold(mutex_);
  while (!stopping_) {
    const auto now = clock::now();
    while (!armed_.empty() && armed_.begin()->first.first <= now) {
      due.push_back(std::move(armed_.begin()->second));
      armed_.erase(armed_.begin());
    }
    if (due.empty()) {
      if (!armed_.empty()) {
        sleeping_until_ = armed_.begin()->first.first;
      } else if (sleeping_until_ <= now) {
        sleeping_until_ = clock::time_point::max();  // nothing armed, nothing to wait for
      }  // else: the time of a wake-up disarmed since; arm() need not wake the thread before it
      if (sleeping_until_ == clock::time_point::max()) {
        changed_.wait(hold);
      } else {
        changed_.wait_until(hold, sleeping_until_);
      }
      continue;
    }
    hold.unlock();  // the calls take their own locks, and may arm again
    for (wake& w : due) {
      if (const auto target = w.target.lock()) target->on_timer(w.generation);
    }
    due.clear();
    hold.lock();
  }
}

}  // namespace stormguard::grpc::detail
