#include "stormguard/sim/simulator.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>
#include <type_traits>
#include <variant>
#include <vector>

#include "sim/common.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::sim {

namespace {

constexpr std::int64_t k_bin_ns = 1'000'000'000;            // the 1-second bins of the time series
constexpr std::int64_t k_fine_bin_ns = k_fine_bin.count();  // the plots' bins

// now + delay in ns, saturating at the largest time instead of overflowing. The engine never
// processes an event at or after the end of the run, so a saturated time simply means "never".
constexpr std::int64_t add_saturated(std::int64_t now, std::int64_t delay) noexcept {
  return detail::saturating_add(duration(now), duration(delay)).count();
}
static_assert(add_saturated(std::numeric_limits<std::int64_t>::max() - 1, 5) ==
              std::numeric_limits<std::int64_t>::max());

using seeds::fnv1a;
using seeds::mix;

// Domain tags so that the streams derived from one scenario seed never coincide.
constexpr std::uint64_t k_tag_arrivals = 0x6172726976616c73ULL;  // "arrivals"
constexpr std::uint64_t k_tag_service = 0x73657276696365ULL;     // "service"
constexpr std::uint64_t k_tag_client = 0x636c69656e74ULL;        // "client"
constexpr std::uint64_t k_tag_incident = 0x696e636964656e74ULL;  // "incident"

constexpr std::int64_t k_load_slice_ns = 100'000'000;  // the overload window's slices: 100 ms
constexpr std::size_t k_load_slices = 10;              // 10 slices: a 1-s window

enum class event_kind : std::uint8_t { arrival, attempt_start, timeout, service_done };

// A small POD event; the heap orders events by (time, seq).
// A 24-byte POD event; its kind is the queue it waits in (see engine::push).
struct event {
  std::int64_t time;  // ns since the epoch
  std::uint64_t seq;  // insertion order: breaks ties deterministically
  std::uint32_t request;
  std::int32_t attempt;
};
static_assert(std::is_trivially_copyable_v<event> && sizeof(event) == 24);

struct next_event {
  event e;
  event_kind kind;
};

// (time, seq) order: the earlier event first.
struct earlier {
  bool operator()(const event& a, const event& b) const noexcept {
    return a.time != b.time ? a.time < b.time : a.seq < b.seq;
  }
};

enum class request_state : std::uint8_t { awaiting, backing_off, ended };

struct request {
  std::int64_t start;           // arrival = start of attempt 1, ns
  std::int64_t previous_delay;  // the delay waited before the current attempt, ns
  std::uint32_t client;
  std::int32_t attempt;  // the current (latest) attempt number
  request_state state;
  attempt_status retried;  // how the attempt before the current one ended (budgets see it)
  bool in_incident;  // started inside the incident window: its attempts count for the incident
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

struct queued_attempt {
  std::uint32_t request;
  std::int32_t attempt;
};

template <class B>
struct client {
  client(std::uint64_t seed, const auto& config) : rng(seed), budget(config) {}
  random_generator rng;
  B budget;
};

template <class B, class Config>
class engine {
 public:
  engine(const scenario& s, const strategy& strat, const Config& config)
      : s_(s),
        policy_(strat.retry),
        end_(s.length.count()),
        timeout_(s.timeout.count()),
        arrivals_rng_(mix(s.seed, k_tag_arrivals)),
        service_rng_(mix(s.seed, k_tag_service)),
        incident_rng_(mix(s.seed, k_tag_incident)) {
    result_.name = strat.name;
    const std::uint64_t strategy_hash = fnv1a(strat.name);
    for (int i = 0; i < s.clients; ++i) {
      const std::uint64_t seed =
          mix(mix(mix(s.seed, k_tag_client), static_cast<std::uint64_t>(i)), strategy_hash);
      clients_.emplace_back(seed, config);
    }
    if (s.incident) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
      incident_service_ = s.incident->service_time.value_or(duration::zero()).count();
      loss_rate_ = s.incident->loss_rate;
      error_or_loss_rate_ = s.incident->loss_rate + s.incident->error_rate;
    }
    const auto bins = static_cast<std::size_t>((end_ + k_bin_ns - 1) / k_bin_ns);
    result_.series.assign(bins, time_bin{});
    const auto fine_bins = static_cast<std::size_t>((end_ + k_fine_bin_ns - 1) / k_fine_bin_ns);
    result_.fine_series.assign(fine_bins, fine_bin{});
    const double expected = s.requests_per_second * std::chrono::duration<double>(s.length).count();
    requests_.reserve(static_cast<std::size_t>(expected * 1.05) + 16);
    latencies_.reserve(static_cast<std::size_t>(expected * 1.05) + 16);
    arrival_.time = end_;  // none yet
  }

  strategy_result run() {
    schedule_next_arrival(0);
    while (true) {
      const auto [e, kind] = pop_next();
      if (e.time >= end_) break;  // also the "no event left" sentinel
      sample_queue_until(e.time);
      ++result_.events;
      switch (kind) {
        case event_kind::arrival:
          on_arrival(e.time);
          break;
        case event_kind::attempt_start:
          start_attempt(e.request, e.attempt, e.time);
          break;
        case event_kind::timeout:
          on_timeout(e.request, e.attempt, e.time);
          break;
        case event_kind::service_done:
          on_service_done(e.request, e.attempt, e.time);
          break;
      }
    }
    sample_queue_until(end_ + k_bin_ns);
    finish();
    return std::move(result_);
  }

 private:
  // Schedules an event. One at or after the end of the run would never be processed: it is not
  // stored at all (dropping it changes no order, as sequence numbers only break ties).
  //
  // The events are kept in queues by kind whose heads are merged by (time, sequence number):
  // exactly the order of one priority queue of all events, at a fraction of its cost. There is
  // at most one pending arrival. Timeouts are due `timeout` after the instant they are scheduled,
  // which never decreases, so they form a FIFO (a ring buffer: O(1), and most of the pending
  // events). With fixed service times, a completion is due a constant after its start, one
  // constant per phase (normal, incident, overload), so each phase's completions form a FIFO
  // too; exponential service times go to a radix heap. Retries (one per request backing off) are
  // a radix heap. Every container grows by doubling and is reused: no allocation per event.
  void push(std::int64_t time, event_kind kind, std::uint32_t request_id, std::int32_t attempt) {
    if (time >= end_) return;
    const event e{time, next_seq_++, request_id, attempt};
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
        if (s_.distribution == service_distribution::fixed) {
          lanes_[service_lane_].push_back(e);  // monotone: a constant after a later start
        } else {
          services_.push(e);
        }
        break;
      case event_kind::attempt_start:
        retries_.push(e);
        break;
    }
  }

  // Removes and returns the earliest pending event; one with time end_ when none is left.
  next_event pop_next() {
    const event sentinel{end_, ~std::uint64_t{0}, 0, 0};
    const event* best = &sentinel;
    enum class source : std::uint8_t {
      none,
      arrival,
      timeout,
      service,
      lane0,
      lane1,
      lane2,
      retry
    } from = source::none;
    const auto consider = [&](const event& e, source s) {
      if (e.time < best->time || (e.time == best->time && e.seq < best->seq)) {
        best = &e;
        from = s;
      }
    };
    if (arrival_.time < end_) consider(arrival_, source::arrival);
    if (!timeouts_.empty()) consider(timeouts_.front(), source::timeout);
    if (!services_.empty()) consider(services_.top(), source::service);
    if (!lanes_[0].empty()) consider(lanes_[0].front(), source::lane0);
    if (!lanes_[1].empty()) consider(lanes_[1].front(), source::lane1);
    if (!lanes_[2].empty()) consider(lanes_[2].front(), source::lane2);
    if (!retries_.empty()) consider(retries_.top(), source::retry);
    const event e = *best;
    switch (from) {
      case source::none:
      case source::arrival:
        arrival_.time = end_;
        return {e, event_kind::arrival};
      case source::timeout:
        timeouts_.pop_front();
        return {e, event_kind::timeout};
      case source::service:
        services_.pop();
        return {e, event_kind::service_done};
      case source::lane0:
        lanes_[0].pop_front();
        return {e, event_kind::service_done};
      case source::lane1:
        lanes_[1].pop_front();
        return {e, event_kind::service_done};
      case source::lane2:
        lanes_[2].pop_front();
        return {e, event_kind::service_done};
      case source::retry:
        retries_.pop();
        return {e, event_kind::attempt_start};
    }
    return {e, event_kind::arrival};
  }

  [[nodiscard]] bool in_incident(std::int64_t t) const noexcept {
    return t >= incident_start_ && t < incident_end_;
  }

  // The bin of time t. Every processed event lies in [0, end_), so the index is always in range;
  // the check makes a bug a clear exception rather than a write out of bounds.
  [[nodiscard]] time_bin& bin(std::int64_t t) {
    if (t < 0 || t >= end_) throw std::logic_error("stormguard::sim: event time out of range");
    return result_.series[static_cast<std::size_t>(t / k_bin_ns)];
  }

  [[nodiscard]] fine_bin& fine_bin_at(std::int64_t t) {
    return result_.fine_series[static_cast<std::size_t>(t / k_fine_bin_ns)];
  }

  // The queue length at the end of every bin that ends at or before `t`.
  void sample_queue_until(std::int64_t t) {
    while (next_sample_bin_ < result_.series.size() &&
           static_cast<std::int64_t>(next_sample_bin_ + 1) * k_bin_ns <= t) {
      result_.series[next_sample_bin_++].queue_length = static_cast<std::int64_t>(queue_.size());
    }
  }

  void schedule_next_arrival(std::int64_t now) {
    // Exponential inter-arrival time of a Poisson process: -ln(1 - u) / rate.
    const double u = uniform_unit(arrivals_rng_);
    // In double, and compared with the time left before rounding: for a tiny rate the gap can be
    // far beyond the int64 range (even infinite), and then there is simply no next arrival.
    const double gap_ns = -std::log1p(-u) / s_.requests_per_second * 1e9;
    if (!(gap_ns < static_cast<double>(end_ - now))) return;
    push(now + static_cast<std::int64_t>(std::llround(gap_ns)), event_kind::arrival, 0, 0);
  }

  // Attempts that reached the server in the 1-s window ending now (10 slices of 100 ms, the
  // current one included): the load that server.overload compares with its threshold.
  void count_load(std::int64_t now) {
    const std::int64_t slice = now / k_load_slice_ns;
    advance_load(slice);
    ++load_[static_cast<std::size_t>(slice) % k_load_slices];
    ++load_total_;
  }
  void advance_load(std::int64_t slice) {
    // Clears the slices that left the window since the newest one seen.
    for (std::int64_t k = load_slice_ + 1; k <= slice && k <= load_slice_ + 10; ++k) {
      auto& slot = load_[static_cast<std::size_t>(k) % k_load_slices];
      load_total_ -= slot;
      slot = 0;
    }
    load_slice_ = std::max(load_slice_, slice);
  }
  [[nodiscard]] bool overloaded(std::int64_t now) {
    if (!s_.overload) return false;
    advance_load(now / k_load_slice_ns);
    return static_cast<double>(load_total_) > s_.overload->above_rate;
  }

  // The service time of an attempt whose service starts now; sets service_lane_ to its phase
  // (0 normal, 1 incident, 2 overload), the FIFO its completion goes to.
  [[nodiscard]] std::int64_t service_time(std::int64_t now) {
    std::int64_t mean = s_.service_time.count();
    service_lane_ = 0;
    if (incident_service_ != 0 && in_incident(now)) {
      mean = incident_service_;
      service_lane_ = 1;
    } else if (overloaded(now)) {
      mean = s_.overload->service_time.count();
      service_lane_ = 2;
    }
    if (s_.distribution == service_distribution::fixed) return mean;
    const double u = uniform_unit(service_rng_);
    // -ln(1 - u) <= 37.5 for u < 1, and validate() bounds mean by 1 h: no overflow.
    return std::max<std::int64_t>(1, std::llround(-std::log1p(-u) * static_cast<double>(mean)));
  }

  void on_arrival(std::int64_t now) {
    const auto id = static_cast<std::uint32_t>(requests_.size());
    const auto client_index =
        static_cast<std::uint32_t>(requests_.size() % static_cast<std::size_t>(s_.clients));
    const bool incident = in_incident(now);
    requests_.push_back(request{now, 0, client_index, 0, request_state::awaiting,
                                attempt_status::success, incident});
    ++result_.logical_requests;
    ++bin(now).logical_requests;
    if (incident) ++result_.incident_logical_requests;
    auto& c = clients_[client_index];
    if (!c.budget.try_admit(time_point(duration(now)), c.rng)) {
      // Rejected locally before its first attempt (adaptive throttling): no attempt is sent.
      requests_.back().state = request_state::ended;
      ++result_.throttled;
      schedule_next_arrival(now);
      return;
    }
    start_attempt(id, 1, now);
    schedule_next_arrival(now);
  }

  void start_attempt(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    request& r = requests_[id];
    r.attempt = attempt;
    r.state = request_state::awaiting;
    ++result_.attempts;
    ++bin(now).attempts;
    ++fine_bin_at(now).attempts;
    if (r.in_incident) ++result_.incident_attempts;

    if (error_or_loss_rate_ > 0.0 && in_incident(now)) {
      // One draw decides: lost with probability loss_rate, else a 503 with error_rate.
      const double u = uniform_unit(incident_rng_);
      if (u < loss_rate_) {
        ++result_.lost;
        push(add_saturated(now, timeout_), event_kind::timeout, id, attempt);
        return;
      }
      if (u < error_or_loss_rate_) {
        ++result_.failures;
        ++bin(now).failures;
        on_failure(id, now, classification::retry());
        return;
      }
    }

    if (s_.overload) count_load(now);
    const bool start_now = busy_ < s_.workers;
    if (!start_now && static_cast<std::int64_t>(queue_.size()) >= s_.queue_limit) {
      // Queue full: an immediate 503, a retryable failure.
      ++result_.failures;
      ++bin(now).failures;
      on_failure(id, now, classification::retry());
      return;
    }
    // The timeout is pushed before the service completion so that, at equal times, the timeout
    // comes first: a response at exactly the deadline is late.
    push(add_saturated(now, timeout_), event_kind::timeout, id, attempt);
    if (start_now) {
      ++busy_;
      push(add_saturated(now, service_time(now)), event_kind::service_done, id, attempt);
    } else {
      queue_.push_back(queued_attempt{id, attempt});
    }
  }

  void on_service_done(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    --busy_;
    if (!queue_.empty()) {
      const queued_attempt next = queue_.front();  // copied before pop_front reuses the slot
      queue_.pop_front();
      ++busy_;
      push(add_saturated(now, service_time(now)), event_kind::service_done, next.request,
           next.attempt);
    }
    request& r = requests_[id];
    if (r.state == request_state::awaiting && r.attempt == attempt) {
      r.state = request_state::ended;
      ++result_.successes;
      ++bin(now).successes;
      ++fine_bin_at(now).successes;
      record(r, attempt_status::success, now);
      latencies_.push_back(now - r.start);
    } else {
      ++result_.wasted_work;  // the client gave up on this attempt: the answer is ignored
    }
  }

  void on_timeout(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    request& r = requests_[id];
    if (r.state != request_state::awaiting || r.attempt != attempt) return;  // answered in time
    ++result_.timeouts;
    ++bin(now).timeouts;
    on_failure(id, now, classification::retry().as_timeout());
  }

  // Tells the request's client budget how its current attempt ended.
  void record(request& r, attempt_status status, std::int64_t now) {
    clients_[r.client].budget.record(time_point(duration(now)),
                                     attempt_report{status, r.attempt, r.retried});
  }

  // The one place where a retry is decided: the library's retry_policy with this client's
  // generator and budget. `verdict` is retry() for a 503 and retry().as_timeout() for a timeout.
  void on_failure(std::uint32_t id, std::int64_t now, classification verdict) {
    request& r = requests_[id];
    auto& c = clients_[r.client];
    const attempt_status status = retry_policy::status_of(verdict);
    record(r, status, now);
    const retry_decision next = policy_.decide(r.attempt, verdict, duration(r.previous_delay),
                                               c.rng, c.budget, time_point(duration(now)));
    r.retried = status;
    if (next.retry) {
      r.state = request_state::backing_off;
      r.previous_delay = next.delay.count();
      push(add_saturated(now, std::max<std::int64_t>(0, next.delay.count())),
           event_kind::attempt_start, id, r.attempt + 1);
      return;
    }
    r.state = request_state::ended;
    if (next.reason == end_reason::budget_exhausted) {
      ++result_.budget_exhausted;
    } else {
      ++result_.attempts_exhausted;
    }
  }

  void finish() {
    strategy_result& m = result_;
    for (const request& r : requests_) {
      if (r.state == request_state::awaiting) ++m.in_flight_attempts;
      if (r.state != request_state::ended) ++m.requests_in_flight;
    }
    // a ÷ b, undefined (nullopt) when b is 0: no requests means no ratio, not a ratio of 0.
    const auto ratio = [](std::int64_t a, std::int64_t b) -> std::optional<double> {
      if (b == 0) return std::nullopt;
      return static_cast<double>(a) / static_cast<double>(b);
    };
    m.amplification = ratio(m.attempts, m.logical_requests);
    m.success_ratio = ratio(m.successes, m.logical_requests);
    if (s_.incident) {
      m.incident_amplification = ratio(m.incident_attempts, m.incident_logical_requests);
    }
    std::int64_t peak = 0;
    for (const time_bin& b : m.series) peak = std::max(peak, b.attempts);
    m.peak_load_ratio = static_cast<double>(peak) / s_.requests_per_second;
    if (!latencies_.empty()) {
      // Nearest rank: the ceil(0.99 · n)-th smallest latency.
      const std::size_t rank = (latencies_.size() * 99 + 99) / 100;
      auto nth = latencies_.begin() + static_cast<std::ptrdiff_t>(rank - 1);
      std::nth_element(latencies_.begin(), nth, latencies_.end());
      m.p99_latency_ms = static_cast<double>(*nth) / 1e6;
    }
    m.recovery_s = recovery();
  }

  [[nodiscard]] std::optional<double> recovery() const {
    if (!s_.incident || incident_end_ >= end_) return std::nullopt;
    constexpr int k_run = 5;
    const auto& series = result_.series;
    const auto first = static_cast<std::size_t>((incident_end_ + k_bin_ns - 1) / k_bin_ns);
    const auto whole_bins = static_cast<std::size_t>(end_ / k_bin_ns);
    // A bin without demand says nothing about recovery: it neither counts towards the run nor
    // breaks it. The run starts at its first bin with demand.
    int run = 0;
    std::size_t run_start = 0;
    for (std::size_t k = first; k < whole_bins; ++k) {
      const time_bin& b = series[k];
      if (b.logical_requests == 0) continue;
      const bool good =
          static_cast<double>(b.successes) >= 0.95 * static_cast<double>(b.logical_requests);
      if (!good) {
        run = 0;
        continue;
      }
      if (run++ == 0) run_start = k;
      if (run == k_run) {
        const std::int64_t start = static_cast<std::int64_t>(run_start) * k_bin_ns;
        return static_cast<double>(start - incident_end_) / 1e9;
      }
    }
    return std::nullopt;
  }

  const scenario& s_;
  retry_policy policy_;
  std::int64_t end_;
  std::int64_t timeout_;
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;      // [0, 0): no incident
  std::int64_t incident_service_ = 0;  // 0: the incident leaves the service time alone
  double loss_rate_ = 0.0;
  double error_or_loss_rate_ = 0.0;
  std::array<std::int64_t, k_load_slices> load_{};
  std::int64_t load_total_ = 0;
  std::int64_t load_slice_ = 0;

  random_generator arrivals_rng_;
  random_generator service_rng_;
  random_generator incident_rng_;
  std::deque<client<B>> clients_;  // a deque: budgets are neither copyable nor movable

  event arrival_{};  // the next arrival; time end_ (or more) when none
  ring<event> timeouts_;
  std::array<ring<event>, 3> lanes_;  // fixed service: completions per phase
  std::size_t service_lane_ = 0;
  radix_heap services_;  // exponential service: completions
  radix_heap retries_;
  std::uint64_t next_seq_ = 0;
  ring<queued_attempt> queue_;
  int busy_ = 0;

  std::vector<request> requests_;
  std::vector<std::int64_t> latencies_;
  std::size_t next_sample_bin_ = 0;
  strategy_result result_;
};

}  // namespace

strategy_result simulate(const scenario& s, const strategy& strat) {
  if (auto problem = validate(s)) {
    throw std::invalid_argument("stormguard::sim::simulate: invalid scenario: " + problem->message);
  }
  strategy applied = strat;
  if (s.max_retries && applied.retry.max_retries > 0) applied.retry.max_retries = *s.max_retries;
  return std::visit(
      [&](const auto& config) {
        using config_type = std::decay_t<decltype(config)>;
        using budget_type = typename budget_for<config_type>::type;
        return engine<budget_type, config_type>(s, applied, config).run();
      },
      applied.budget);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies) {
  simulation_report report{s, {}};
  report.strategies.reserve(strategies.size());
  for (const strategy& strat : strategies) report.strategies.push_back(simulate(s, strat));
  return report;
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies,
                           unsigned threads, const progress_callback& progress) {
  if (auto problem = validate(s)) {
    throw std::invalid_argument("stormguard::sim::simulate: invalid scenario: " + problem->message);
  }
  simulation_report report{s, {}};
  report.strategies.resize(strategies.size());
  parallel_for(
      strategies.size(), threads,
      [&](std::size_t i) { report.strategies[i] = simulate(s, strategies[i]); }, progress);
  return report;
}

}  // namespace stormguard::sim
