// SPDX-License-Identifier: Apache-2.0
// The thread that runs lab::server's store calls (the payments endpoint's charges and ledger
// reads) off the event loop, so that a store that hangs (SIGSTOPped, partitioned without a reset)
// holds only the charges, never /stats, the scenario's endpoint or shutdown. Private to
// stormguard::lab.
//
//   charge_worker w(base, 1024);
//   w.post([=] { auto answer = endpoint->charge(...);          // on the worker thread
//                return [=] { reply(req, answer); }; });        // later, on the loop's thread
//   ...
//   w.stop(std::chrono::milliseconds(500));  // the loop has stopped; a stuck call is abandoned
//
// One worker thread: the jobs run one at a time in the order they were posted (the endpoint is
// not thread-safe; the store serializes its calls anyway). Results come back to the loop through a
// pipe (libevent's threading support is not needed). At most `max_queued` jobs wait; post()
// refuses more.
#ifndef STORMGUARD_SRC_LAB_CHARGE_WORKER_HPP
#define STORMGUARD_SRC_LAB_CHARGE_WORKER_HPP

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>

#include "stormguard/clock.hpp"

struct event_base;

namespace stormguard::lab::detail {

class charge_worker {
 public:
  /// A job: runs on the worker thread and returns what to do next on the loop's thread.
  using job = std::function<std::function<void()>()>;

  /// Starts the thread and registers the result pipe on `base` (which must outlive stop()).
  /// Throws std::system_error when the pipe or the thread cannot be created.
  charge_worker(event_base* base, std::size_t max_queued);
  /// stop(0) if not stopped.
  ~charge_worker();
  charge_worker(const charge_worker&) = delete;
  charge_worker& operator=(const charge_worker&) = delete;

  /// Queues `j`; false (and `j` dropped) when max_queued jobs already wait or after stop().
  /// Loop thread.
  bool post(job j);

  /// With the loop stopped: drops the queued jobs and the results not yet run, waits at most
  /// `grace` for the running job, and abandons it (the thread is detached; what the job holds
  /// stays alive until it returns, its result is dropped) when it is still running then.
  /// Otherwise the thread is joined: it has ended, its thread-local state (OpenSSL's among it)
  /// released, when stop returns. Idempotent. Returns false when a job was abandoned.
  bool stop(duration grace) noexcept;

  struct shared;  ///< private (charge_worker.cpp)

 private:
  std::shared_ptr<shared> shared_;
  std::thread thread_;  // joined by stop(), or detached when it abandons a job
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_CHARGE_WORKER_HPP
