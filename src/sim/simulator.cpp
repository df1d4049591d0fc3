#include "stormguard/sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>
#include <type_traits>
#include <variant>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::sim {

namespace {

constexpr std::int64_t k_bin_ns = 1'000'000'000;  // the 1-second bins of the time series

// now + delay in ns, saturating at the largest time instead of overflowing. The engine never
// processes an event at or after the end of the run, so a saturated time simply means "never".
constexpr std::int64_t add_saturated(std::int64_t now, std::int64_t delay) noexcept {
  return detail::saturating_add(duration(now), duration(delay)).count();
}
static_assert(add_saturated(std::numeric_limits<std::int64_t>::max() - 1, 5) ==
              std::numeric_limits<std::int64_t>::max());

// The budget class a budget_config alternative stands for. A new kind of budget (a strategy such
// as full+throttle) adds its options type to budget_config and a specialisation here.
template <class Config>
struct budget_for;
template <>
struct budget_for<no_budget> {
  using type = no_budget;
};
template <>
struct budget_for<ratio_budget_options> {
  using type = ratio_budget;
};
template <>
struct budget_for<token_bucket_throttle_options> {
  using type = token_bucket_throttle;
};
template <>
struct budget_for<retry_quota_options> {
  using type = retry_quota;
};
template <>
struct budget_for<adaptive_throttle_options> {
  using type = adaptive_throttle;
};

// SplitMix64's finaliser (Steele, Lea and Flood 2014), used to derive independent seeds.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return mix(a ^ mix(b)); }

// FNV-1a: a stable hash of the strategy name (std::hash differs between standard libraries).
constexpr std::uint64_t fnv1a(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Domain tags so that the streams derived from one scenario seed never coincide.
constexpr std::uint64_t k_tag_arrivals = 0x6172726976616c73ULL;  // "arrivals"
constexpr std::uint64_t k_tag_service = 0x73657276696365ULL;     // "service"
constexpr std::uint64_t k_tag_client = 0x636c69656e74ULL;        // "client"

enum class event_kind : std::uint8_t { arrival, attempt_start, timeout, service_done };

// A small POD event; the heap orders events by (time, seq).
struct event {
  std::int64_t time;  // ns since the epoch
  std::uint64_t seq;  // insertion order: breaks ties deterministically
  std::uint32_t request;
  std::int32_t attempt;
  event_kind kind;
};
static_assert(std::is_trivially_copyable_v<event>);

struct later {
  bool operator()(const event& a, const event& b) const noexcept {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
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
        service_rng_(mix(s.seed, k_tag_service)) {
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
      incident_service_ = s.incident->service_time.count();
    }
    const auto bins = static_cast<std::size_t>((end_ + k_bin_ns - 1) / k_bin_ns);
    result_.series.assign(bins, time_bin{});
    const double expected = s.requests_per_second * std::chrono::duration<double>(s.length).count();
    requests_.reserve(static_cast<std::size_t>(expected * 1.05) + 16);
    latencies_.reserve(static_cast<std::size_t>(expected * 1.05) + 16);
    std::vector<event> storage;
    storage.reserve(4096);
    heap_ = std::priority_queue<event, std::vector<event>, later>(later{}, std::move(storage));
  }

  strategy_result run() {
    schedule_next_arrival(0);
    while (!heap_.empty()) {
      const event e = heap_.top();
      if (e.time >= end_) break;
      heap_.pop();
      sample_queue_until(e.time);
      ++result_.events;
      switch (e.kind) {
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
  void push(std::int64_t time, event_kind kind, std::uint32_t request_id, std::int32_t attempt) {
    if (time >= end_) return;
    heap_.push(event{time, next_seq_++, request_id, attempt, kind});
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

  [[nodiscard]] std::int64_t service_time(std::int64_t now) {
    const std::int64_t mean = in_incident(now) ? incident_service_ : s_.service_time.count();
    if (s_.distribution == service_distribution::fixed) return mean;
    const double u = uniform_unit(service_rng_);
    // -ln(1 - u) <= 37.5 for u < 1, and validate() bounds mean by 1 h: no overflow.
    return std::max<std::int64_t>(1, std::llround(-std::log1p(-u) * static_cast<double>(mean)));
  }

  void on_arrival(std::int64_t now) {
    const auto id = static_cast<std::uint32_t>(requests_.size());
    const auto client_index =
        static_cast<std::uint32_t>(requests_.size() % static_cast<std::size_t>(s_.clients));
    requests_.push_back(
        request{now, 0, client_index, 0, request_state::awaiting, attempt_status::success});
    ++result_.logical_requests;
    ++bin(now).logical_requests;
    if (in_incident(now)) ++result_.incident_logical_requests;
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
    if (in_incident(now)) ++result_.incident_attempts;

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
      const queued_attempt next = queue_.front();
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
  std::int64_t incident_end_ = 0;  // [0, 0): no incident
  std::int64_t incident_service_ = 0;

  random_generator arrivals_rng_;
  random_generator service_rng_;
  std::deque<client<B>> clients_;  // a deque: budgets are neither copyable nor movable

  std::priority_queue<event, std::vector<event>, later> heap_;
  std::uint64_t next_seq_ = 0;
  std::deque<queued_attempt> queue_;
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
  return std::visit(
      [&](const auto& config) {
        using config_type = std::decay_t<decltype(config)>;
        using budget_type = typename budget_for<config_type>::type;
        return engine<budget_type, config_type>(s, strat, config).run();
      },
      strat.budget);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies) {
  simulation_report report{s, {}};
  report.strategies.reserve(strategies.size());
  for (const strategy& strat : strategies) report.strategies.push_back(simulate(s, strat));
  return report;
}

}  // namespace stormguard::sim
