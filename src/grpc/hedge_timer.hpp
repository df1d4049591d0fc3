// SPDX-License-Identifier: Apache-2.0
// The hedged calls' delay timer: one thread per client, started at the first hedge armed, that
// wakes a call when its next copy is due. A grpc::Alarm per call cost a timer registration, a
// cancellation and a callback on one of gRPC's threads for every call whose first copy answers
// in time; here arming is an insertion into an ordered map under a mutex and disarming an erase,
// and a call that was decided meanwhile is never woken.
#ifndef STORMGUARD_SRC_GRPC_HEDGE_TIMER_HPP
#define STORMGUARD_SRC_GRPC_HEDGE_TIMER_HPP

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace stormguard::grpc::detail {

// What the timer wakes: a call, told which of its arms is due.
class timer_target {
 public:
  virtual void on_timer(std::uint32_t generation) = 0;

 protected:
  ~timer_target() = default;
};

class hedge_timer {
 public:
  using clock = std::chrono::steady_clock;
  // An armed wake-up: its time, and a sequence number that makes it unique.
  using key = std::pair<clock::time_point, std::uint64_t>;

  hedge_timer() = default;
  ~hedge_timer();
  hedge_timer(const hedge_timer&) = delete;
  hedge_timer& operator=(const hedge_timer&) = delete;

  // Wakes `target` (if it still exists) at `at` with `generation`, on the timer's thread.
  key arm(clock::time_point at, std::weak_ptr<timer_target> target, std::uint32_t generation);
  // Forgets `k`; nothing when it has fired or was never armed.
  void disarm(const key& k);

 private:
  struct wake {
    std::weak_ptr<timer_target> target;
    std::uint32_t generation = 0;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<key, wake> armed_;
  std::uint64_t sequence_ = 0;
  // Until when the thread sleeps (max: until woken).
  clock::time_point sleeping_until_ = clock::time_point::max();
  bool stopping_ = false;
  std::thread thread_;  // started by the first arm
};

}  // namespace stormguard::grpc::detail

#endif  // STORMGUARD_SRC_GRPC_HEDGE_TIMER_HPP
