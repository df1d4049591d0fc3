// SPDX-License-Identifier: Apache-2.0
// A bounded pool of store connections, shared by the three stores (src/guard/*_store.cpp).
#ifndef STORMGUARD_SRC_GUARD_POOL_HPP
#define STORMGUARD_SRC_GUARD_POOL_HPP

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "stormguard/detail/mutex.hpp"

namespace stormguard::guard::internal {

/// At most `max` connections of type C, opened on demand by `open` (which throws store_error);
/// acquire() waits while all are lent out. A lease returns its connection on destruction, unless
/// discard() was called (a broken connection: closed, a new one opened next time).
/// Thread-safe.
template <class C>
class pool {
 public:
  pool(std::size_t max, std::function<std::unique_ptr<C>()> open)
      : max_(max), open_(std::move(open)) {}

  class lease {
   public:
    lease(pool& p, std::unique_ptr<C> c) : pool_(&p), conn_(std::move(c)) {}
    lease(lease&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), conn_(std::move(o.conn_)) {}
    lease& operator=(lease&&) = delete;
    ~lease() {
      if (pool_ != nullptr) pool_->give_back(std::move(conn_));
    }
    C& operator*() const noexcept { return *conn_; }
    C* operator->() const noexcept { return conn_.get(); }
    /// The connection is broken: close it instead of returning it.
    void discard() noexcept { conn_.reset(); }

   private:
    pool* pool_;
    std::unique_ptr<C> conn_;
  };

  /// An idle connection, a new one (open() may throw: the slot is freed again), or waits.
  lease acquire() {
    std::unique_ptr<C> idle;
    {
      const stormguard::detail::lock hold(mutex_);
      // condition_variable_any releases mutex_ while it waits and holds it again on return.
      while (idle_.empty() && open_count_ >= max_) cv_.wait(mutex_);
      if (!idle_.empty()) {
        idle = std::move(idle_.back());
        idle_.pop_back();
      } else {
        ++open_count_;  // a slot for the connection opened below, outside the lock
      }
    }
    if (idle) return lease(*this, std::move(idle));
    try {
      return lease(*this, open_());
    } catch (...) {
      const stormguard::detail::lock hold(mutex_);
      --open_count_;
      cv_.notify_one();
      throw;
    }
  }

 private:
  void give_back(std::unique_ptr<C> c) noexcept {
    const stormguard::detail::lock hold(mutex_);
    if (c) {
      idle_.push_back(std::move(c));
    } else {
      --open_count_;
    }
    cv_.notify_one();
  }

  std::size_t max_;
  std::function<std::unique_ptr<C>()> open_;
  stormguard::detail::mutex mutex_;
  std::condition_variable_any cv_;
  std::vector<std::unique_ptr<C>> idle_ STORMGUARD_GUARDED_BY(mutex_);
  std::size_t open_count_ STORMGUARD_GUARDED_BY(mutex_) = 0;
};

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_POOL_HPP
