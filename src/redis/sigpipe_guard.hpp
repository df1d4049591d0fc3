// SPDX-License-Identifier: Apache-2.0
// Internal (target stormguard_redis): hiredis plumbing shared by the guard's Redis store and the
// fleet budget's Redis syncer.
#ifndef STORMGUARD_REDIS_SIGPIPE_GUARD_HPP
#define STORMGUARD_REDIS_SIGPIPE_GUARD_HPP

#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <ctime>

namespace stormguard::redis_detail {

/// Blocks SIGPIPE in this thread while hiredis writes to a socket the server may have closed
/// (hiredis 0.14 uses write(), not send(MSG_NOSIGNAL)), and consumes a SIGPIPE that the write
/// raised, so that a store never kills its process nor changes its signal handlers. libpq does
/// the same (pq_block_sigpipe / pq_reset_sigpipe in fe-secure.c).
class sigpipe_guard {
 public:
  sigpipe_guard() noexcept {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;
  ~sigpipe_guard() {
    const int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        const timespec zero{};
        while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace stormguard::redis_detail

#endif  // STORMGUARD_REDIS_SIGPIPE_GUARD_HPP
