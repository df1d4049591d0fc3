// SPDX-License-Identifier: Apache-2.0
// The simulator's one event type and the queues that hold events (the internal engine target
// stormguard_sim_engine):
// a FIFO ring buffer, a radix heap, and `event_queues`, which merges one queue per kind of event
// into the order of a single priority queue ordered by (time, sequence number).
#ifndef STORMGUARD_ENGINE_EVENT_QUEUE_HPP
#define STORMGUARD_ENGINE_EVENT_QUEUE_HPP

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace stormguard::sim::engine {

enum class event_kind : std::uint8_t { arrival, attempt_start, timeout, service_done };

// The one event type of the time-series engine and of layers: a 24-byte POD ordered by
// (time, seq). `request` is the logical request (or call) it concerns, `attempt` its attempt
// number; `kind` says what happens.
struct event {
  std::int64_t time;  // ns since the epoch
  std::uint64_t seq;  // insertion order: breaks ties deterministically
  std::uint32_t request;
  std::int32_t attempt : 24;  // the work bound keeps attempt numbers far below 2^23
  event_kind kind : 8;
};
static_assert(std::is_trivially_copyable_v<event> && sizeof(event) == 24);

// The largest attempt number an event can carry.
inline constexpr std::int64_t k_max_event_attempt = (std::int64_t{1} << 23) - 1;

// (time, seq) order: the earlier event first.
struct earlier {
  bool operator()(const event& a, const event& b) const noexcept {
    return a.time != b.time ? a.time < b.time : a.seq < b.seq;
  }
};

// A FIFO in a power-of-two ring buffer that doubles when full and never shrinks: after warm-up,
// pushing and popping never allocate (std::deque allocates and frees a block every few hundred
// elements as it slides).
template <class T>
class ring {
 public:
  ring() : buffer_(1024), mask_(1023) {}
  [[nodiscard]] bool empty() const noexcept { return head_ == tail_; }
  [[nodiscard]] std::size_t size() const noexcept { return tail_ - head_; }
  [[nodiscard]] const T& front() const noexcept { return buffer_[head_ & mask_]; }
  [[nodiscard]] const T& back() const noexcept { return buffer_[(tail_ - 1) & mask_]; }
  void pop_front() noexcept { ++head_; }
  void push_back(const T& value) {
    if (size() == buffer_.size()) grow();
    buffer_[tail_++ & mask_] = value;
  }

 private:
  void grow() {
    std::vector<T> bigger(buffer_.size() * 2);
    for (std::size_t i = 0; i < size(); ++i) bigger[i] = buffer_[(head_ + i) & mask_];
    tail_ = size();
    head_ = 0;
    buffer_.swap(bigger);
    mask_ = buffer_.size() - 1;
  }

  std::vector<T> buffer_;
  std::size_t mask_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
};

// A radix heap (R. K. Ahuja, K. Mehlhorn, J. B. Orlin and R. E. Tarjan, "Faster algorithms for
// the shortest path problem", JACM 37(2), 1990) of events keyed by time: a monotone priority
// queue, valid because no event is ever scheduled before the last one taken out (a retry or a
// service completion is due at or after now). Bucket i > 0 holds the events whose time differs
// from the last time taken in bit i - 1 at the highest; bucket 0 those equal to it. A push is
// O(1); taking the minimum empties the first non-empty bucket into lower ones, so an event moves
// at most 64 times and in practice once or twice. Ties on time go by sequence number. The
// buckets keep their capacity: no allocation once warm. (Two to three times faster here than
// std::priority_queue, whose pop was the simulator's hot spot.)
class radix_heap {
 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  // Precondition: e.time >= the time of every event popped so far.
  void push(const event& e) {
    const std::size_t b = bucket_of(e.time);
    buckets_[b].push_back(e);
    ++size_;
    if (cached_ && earlier{}(e, top_)) {
      top_ = e;
      top_bucket_ = b;
      top_index_ = buckets_[b].size() - 1;
    }
  }

  // The earliest event by (time, seq). Precondition: !empty(). Does not change the heap (the
  // simulator looks at the heads of all its queues before taking one).
  [[nodiscard]] const event& top() {
    if (!cached_) find_top();
    return top_;
  }

  // Removes top(). Precondition: !empty().
  void pop() {
    if (!cached_) find_top();
    auto& from = buckets_[top_bucket_];
    from[top_index_] = from.back();
    from.pop_back();
    --size_;
    cached_ = false;
    if (top_bucket_ != 0) {
      // The minimum left bucket i: the rest of that bucket moves to lower buckets, relative to
      // the new last time (all of it does: they agree with it above bit i - 1).
      last_ = top_.time;
      for (const event& e : from) buckets_[bucket_of(e.time)].push_back(e);
      from.clear();
    }
  }

 private:
  [[nodiscard]] std::size_t bucket_of(std::int64_t time) const noexcept {
    const auto x = static_cast<std::uint64_t>(time) ^ static_cast<std::uint64_t>(last_);
    return x == 0 ? 0 : static_cast<std::size_t>(64 - std::countl_zero(x));
  }

  void find_top() {
    std::size_t b = 0;
    while (buckets_[b].empty()) ++b;
    const auto& bucket = buckets_[b];
    std::size_t best = 0;
    for (std::size_t i = 1; i < bucket.size(); ++i) {
      if (earlier{}(bucket[i], bucket[best])) best = i;
    }
    top_ = bucket[best];
    top_bucket_ = b;
    top_index_ = best;
    cached_ = true;
  }

  std::array<std::vector<event>, 65> buckets_;
  std::int64_t last_ = 0;  // the time of the last event popped from a bucket > 0
  std::size_t size_ = 0;
  bool cached_ = false;  // top_ (at top_bucket_[top_index_]) is the minimum
  event top_{};
  std::size_t top_bucket_ = 0;
  std::size_t top_index_ = 0;
};

// The pending events of one run, in queues by kind whose heads are merged by (time, sequence
// number): exactly the order of one priority queue of all events, at a fraction of its cost.
// There is at most one pending arrival. Timeouts are due `timeout` after the instant they are
// scheduled, which never decreases, so they form a FIFO (a ring buffer: O(1), and most of the
// pending events). With fixed service times, a completion is due a constant after its start, one
// constant per phase (normal, incident, overload: the `lane`), so each phase's completions form a
// FIFO too; exponential service times go to a radix heap. Retries (one per request backing off)
// are a radix heap. Every container grows by doubling and is reused: no allocation per event.
class event_queues {
 public:
  // `end`: the end of the run (an event at or after it is never processed, so it is not stored);
  // `fifo_service`: service completions arrive in time order per lane (fixed service times).
  event_queues(std::int64_t end, bool fifo_service) : end_(end), fifo_service_(fifo_service) {
    arrival_.time = end_;  // none yet
  }

  // Schedules an event (dropping one at or after the end changes no order: sequence numbers
  // only break ties). `lane` is the service phase of a service completion; a lane past the
  // FIFO lanes (a stalled attempt) goes to the heap.
  void push(std::int64_t time, event_kind kind, std::uint32_t request, std::int32_t attempt,
            std::size_t lane = 0) {
    if (time >= end_) return;
    const event e{time, next_seq_++, request, attempt, kind};
    switch (kind) {
      case event_kind::arrival:
        arrival_ = e;
        break;
      case event_kind::timeout:
        if (!timeouts_.empty() && timeouts_.back().time > time) {
          throw std::logic_error("stormguard::sim: timeouts scheduled out of order");
        }
        timeouts_.push_back(e);
        break;
      case event_kind::service_done:
        if (fifo_service_ && lane < lanes_.size()) {
          lanes_[lane].push_back(e);  // monotone: a constant after a later start
        } else {
          services_.push(e);
        }
        break;
      case event_kind::attempt_start:
        retries_.push(e);
        break;
    }
  }

  // Removes and returns the earliest pending event; one with time `end` when none is left.
  event pop() {
    const event sentinel{end_, ~std::uint64_t{0}, 0, 0, event_kind::arrival};
    const event* best = &sentinel;
    source from = source::none;
    const auto consider = [&](const event& e, source s) {
      if (earlier{}(e, *best)) {
        best = &e;
        from = s;
      }
    };
    if (arrival_.time < end_) consider(arrival_, source::arrival);
    if (!timeouts_.empty()) consider(timeouts_.front(), source::timeout);
    if (!services_.empty()) consider(services_.top(), source::service);
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      if (!lanes_[i].empty()) consider(lanes_[i].front(), static_cast<source>(lane0 + i));
    }
    if (!retries_.empty()) consider(retries_.top(), source::retry);
    const event e = *best;
    remove(from);
    return e;
  }

 private:
  enum source : std::uint8_t { none, arrival, timeout, service, lane0, lane1, lane2, retry };

  void remove(source from) {
    switch (from) {
      case source::none:
      case source::arrival:
        arrival_.time = end_;
        break;
      case source::timeout:
        timeouts_.pop_front();
        break;
      case source::service:
        services_.pop();
        break;
      case source::lane0:
      case source::lane1:
      case source::lane2:
        lanes_[from - lane0].pop_front();
        break;
      case source::retry:
        retries_.pop();
        break;
    }
  }

  std::int64_t end_;
  bool fifo_service_;
  event arrival_{};  // the next arrival; time end_ when none
  ring<event> timeouts_;
  std::array<ring<event>, 3> lanes_;  // fixed service: completions per phase
  radix_heap services_;               // exponential service: completions
  radix_heap retries_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_EVENT_QUEUE_HPP
