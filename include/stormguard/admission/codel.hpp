// SPDX-License-Identifier: Apache-2.0
/// \file
/// CoDel with adaptive LIFO, the queue discipline of Facebook's
/// servers (folly::Codel; Maurer, "Fail at Scale", ACM Queue 13(8), 2015).
///
/// A FIFO queue under overload serves the oldest requests first: exactly those whose callers are
/// most likely to have given up, so the server spends its capacity on answers nobody waits for.
/// CoDel (Nichols and Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012), as folly
/// adapts it for request queues, watches the smallest queueing delay seen in each interval: when
/// even the best request of an interval waited longer than `target`, the queue is overloaded, and
/// while it is, any request that waited longer than 2 · target is dropped instead of served.
/// Adaptive LIFO serves the newest request first while the queue is overloaded (its caller is
/// still waiting) and returns to FIFO when the overload ends.
///
/// \code{.cpp}
///  stormguard::admission::adaptive_lifo_queue<request> queue;   // target 5 ms, interval 100 ms
///  queue.push(now, req);
///  while (auto next = queue.pop(now, [](request& dropped) { reject(dropped); })) serve(*next);
/// \endcode
///
/// Defaults are folly's: target 5 ms, interval 100 ms.
#ifndef STORMGUARD_ADMISSION_CODEL_HPP
#define STORMGUARD_ADMISSION_CODEL_HPP

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard::admission {

/// CoDel's two settings.
struct codel_options {
  /// The queueing delay the queue aims for. In [1 µs, 10 s]; folly's default 5 ms.
  duration target = std::chrono::milliseconds(5);
  /// How often the overload state is re-evaluated from the interval's smallest delay. In
  /// [1 ms, 60 s] and >= target; folly's default 100 ms.
  duration interval = std::chrono::milliseconds(100);
  friend bool operator==(const codel_options&, const codel_options&) = default;
};

/// folly::Codel's decision, fed with each request's queueing delay as it leaves the queue.
/// Not thread-safe: one owner (the queue, or the server's dispatch loop) calls it.
///
/// Example (tests/reference_admission_examples_test.cpp, run by the tests):
/// \snippet reference_admission_examples_test.cpp adaptive_lifo_queue
class STORMGUARD_EXPORT codel {
 public:
  /// Validates `options`; throws std::invalid_argument naming the field and the value.
  explicit codel(codel_options options = {});

  /// A request leaves the queue at `now` after waiting `delay`. True: drop it (the queue is
  /// overloaded and the request waited more than 2 · target). The first request of each new
  /// interval is never dropped: it starts the interval's minimum.
  [[nodiscard]] bool should_drop(time_point now, duration delay) noexcept;
  /// Judges the interval that ended, if one has by `now` (should_drop does this first; a queue
  /// calls it before choosing FIFO or LIFO, so the choice follows the latest judgement).
  void advance(time_point now) noexcept;
  /// True while the last finished interval's smallest delay exceeded target.
  [[nodiscard]] bool overloaded() const noexcept { return overloaded_; }
  /// 2 · target: the delay above which an overloaded queue drops.
  [[nodiscard]] duration slough_timeout() const noexcept { return 2 * options_.target; }
  /// The validated settings.
  [[nodiscard]] const codel_options& options() const noexcept { return options_; }

 private:
  codel_options options_;
  time_point interval_end_{time_point::min()};
  duration min_delay_{duration::max()};
  bool reset_ = false;
  bool overloaded_ = false;
};

/// A request queue with CoDel and adaptive LIFO: FIFO while CoDel says the queue is healthy,
/// newest first while it is overloaded, and requests that waited too long dropped (handed to the
/// caller's callback, never served). Bounded: push refuses past `capacity`. Not thread-safe (a
/// server's dispatch loop owns it); allocates as std::deque does.
///
/// Example (tests/reference_admission_examples_test.cpp, run by the tests):
/// \snippet reference_admission_examples_test.cpp adaptive_lifo_queue
template <class T>
class adaptive_lifo_queue {
 public:
  /// `capacity` >= 1 (0 is treated as 1). Throws std::invalid_argument for bad `options`.
  explicit adaptive_lifo_queue(codel_options options = {}, std::size_t capacity = 1'000'000)
      : codel_(options), capacity_(capacity == 0 ? 1 : capacity) {}

  /// Enqueues `item` arriving at `now`. False, leaving `item` as it was, when the queue already
  /// holds `capacity` items.
  bool push(time_point now, T&& item) {
    if (items_.size() >= capacity_) return false;
    items_.push_back(entry{now, std::move(item)});
    return true;
  }
  /// Enqueues a copy of `item` (see the other overload).
  bool push(time_point now, const T& item) {
    T copy(item);
    return push(now, std::move(copy));
  }

  /// The next item to serve at `now`, or nothing when the queue is empty. Items CoDel drops are
  /// passed to `on_drop(T&)` first (and counted in dropped()).
  template <class OnDrop>
  std::optional<T> pop(time_point now, OnDrop&& on_drop) {
    while (!items_.empty()) {
      codel_.advance(now);
      const bool lifo = codel_.overloaded();
      entry e = lifo ? std::move(items_.back()) : std::move(items_.front());
      if (lifo) {
        items_.pop_back();
      } else {
        items_.pop_front();
      }
      if (codel_.should_drop(now, now - e.enqueued)) {
        ++dropped_;
        on_drop(e.item);
        continue;
      }
      return std::optional<T>(std::move(e.item));
    }
    return std::nullopt;
  }

  /// Items waiting.
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  /// True when nothing waits.
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  /// Items dropped by CoDel so far.
  [[nodiscard]] std::int64_t dropped() const noexcept { return dropped_; }
  /// True while serving newest first (CoDel says overloaded).
  [[nodiscard]] bool lifo() const noexcept { return codel_.overloaded(); }
  /// The CoDel state.
  [[nodiscard]] const codel& state() const noexcept { return codel_; }

 private:
  struct entry {
    time_point enqueued;
    T item;
  };
  codel codel_;
  std::size_t capacity_;
  std::deque<entry> items_;
  std::int64_t dropped_ = 0;
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_CODEL_HPP
