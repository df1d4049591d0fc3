// SPDX-License-Identifier: Apache-2.0
// Internal: the attempts other transports hand to lab::server (server::submit, `serve --grpc`)
// on their own threads, taken to the server's event loop. Private to stormguard::lab.
//
//   transport_inbox inbox;
//   inbox.open(base, [&](std::vector<std::unique_ptr<transport_call>> taken) {...});  // loop
//   inbox.submit(std::make_unique<transport_call>(...));   // any thread; answered at once
//                                                          // (unanswered) once closed
//   ... the loop has stopped:
//   for (auto& c : inbox.close()) complete(*c, {.unanswered = true});
//   inbox.release();
//
// A submit into an empty inbox writes one byte to a pipe that wakes the loop (libevent's
// threading support is not needed); the loop takes every call queued at once.
#ifndef STORMGUARD_SRC_LAB_TRANSPORT_INBOX_HPP
#define STORMGUARD_SRC_LAB_TRANSPORT_INBOX_HPP

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stormguard/detail/mutex.hpp"
#include "stormguard/lab/server.hpp"

struct event;
struct event_base;

namespace stormguard::lab::detail {

/// One attempt submitted by another transport (server::submit).
struct transport_call {
  transport_attempt attempt;
  std::function<bool()> gone;  ///< empty: never gone
  std::function<void(const transport_answer&)> done;
};

/// Calls c.done once with `answer` (later calls do nothing); an exception from it is dropped.
void complete(transport_call& c, const transport_answer& answer) noexcept;

class transport_inbox {
 public:
  using taker = std::function<void(std::vector<std::unique_ptr<transport_call>>)>;

  transport_inbox() = default;
  ~transport_inbox();
  transport_inbox(const transport_inbox&) = delete;
  transport_inbox& operator=(const transport_inbox&) = delete;

  /// Creates the pipe and its event on `base` (which must outlive release()); `take` runs on
  /// the loop's thread with the calls queued since. An error message, or "".
  std::string open(event_base* base, taker take);
  /// Queues `c` for the loop; answers it unanswered here when the inbox is closed. Any thread.
  void submit(std::unique_ptr<transport_call> c);
  /// Closes the inbox (submit() answers at once from now on) and returns what was queued.
  /// Any thread; idempotent.
  std::vector<std::unique_ptr<transport_call>> close();
  /// With the loop stopped: closes, answers what was queued unanswered, frees the event and the
  /// pipe. Idempotent.
  void release() noexcept;

 private:
  static void on_readable(int fd, short, void* arg);

  taker take_;
  event* event_ = nullptr;
  int pipe_[2] = {-1, -1};
  stormguard::detail::mutex mutex_;
  std::vector<std::unique_ptr<transport_call>> queued_ STORMGUARD_GUARDED_BY(mutex_);
  bool closed_ STORMGUARD_GUARDED_BY(mutex_) = false;
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_TRANSPORT_INBOX_HPP
