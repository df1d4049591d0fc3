// The lab's client fleet (include/stormguard/lab/fleet.hpp): the simulator's fleet and metrics
// (src/sim/fleet.hpp, src/sim/metrics.hpp) driven by real time and real HTTP attempts through
// http::async_client, on one Asio thread.
#include "stormguard/lab/fleet.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "sim/common.hpp"
#include "sim/fleet.hpp"
#include "sim/metrics.hpp"
#include "stormguard/http/async_client.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/report.hpp"

namespace stormguard::lab {

namespace {

using steady = std::chrono::steady_clock;
constexpr std::int64_t k_tick_ns = 100'000'000;  // progress, stop flag and queue samples
constexpr std::uint32_t k_arrival = std::numeric_limits<std::uint32_t>::max();

// A scheduled start: a logical request's arrival (id k_arrival) or a retry's attempt.
struct pending {
  std::int64_t time;  // ns of the scenario's clock
  std::uint32_t id;
  std::int32_t attempt;
  friend bool operator>(const pending& a, const pending& b) noexcept { return a.time > b.time; }
};

template <class B>
class lab_engine {
 public:
  template <class Config>
  lab_engine(asio::io_context& io, const sim::scenario& s, const sim::strategy& strat,
             const Config& config, server& srv, const fleet_options& options)
      : io_(io),
        s_(s),
        srv_(srv),
        options_(options),
        url_(srv.url()),
        end_(s.length.count()),
        timeout_(strat.attempt_timeout.value_or(s.timeout)),
        unavailable_(strat.retries_503 ? classification::retry() : classification::stop()),
        client_(io.get_executor(), client_options_for(timeout_)),
        fleet_(s, strat, config, expected_requests(s)),
        metrics_(s, strat.name, expected_requests(s)),
        arrivals_rng_(sim::seeds::mix(s.seed, sim::seeds::k_tag_arrivals)),
        starts_timer_(io),
        tick_timer_(io),
        prometheus_(options.metrics == nullptr
                        ? nullptr
                        : &options.metrics->for_client(strat.name, metrics::budget_kind<B>())) {
    if (s.incident) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
    }
  }

  fleet_result run() {
    srv_.start_clock();
    t0_ = steady::now();
    schedule_next_arrival(0);
    arm_starts();
    tick();
    io_.run();
    fleet_result out;
    out.completed = completed_;
    std::int64_t in_flight_attempts = 0;
    std::int64_t requests_in_flight = 0;
    for (const sim::engine::request& r : fleet_.requests()) {
      if (r.state == sim::engine::request_state::awaiting) ++in_flight_attempts;
      if (r.state != sim::engine::request_state::ended) ++requests_in_flight;
    }
    const server_stats st = srv_.stats();
    metrics_.sample_queue_until(end_ + sim::engine::k_bin_ns, st.queued);
    metrics_.counters().lost = st.lost;
    metrics_.counters().wasted_work = std::max<std::int64_t>(0, st.served - st.served_in_time);
    out.result = metrics_.finish(in_flight_attempts, requests_in_flight);
    return out;
  }

 private:
  static double expected_requests(const sim::scenario& s) {
    return s.requests_per_second * std::chrono::duration<double>(s.length).count();
  }

  // One attempt per call: the fleet decides the retries.
  static http::client_options client_options_for(duration timeout) {
    http::client_options o;
    o.retry.max_retries = 0;
    o.attempt_timeout = timeout;
    o.connect_timeout = timeout;
    return o;
  }

  [[nodiscard]] std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0_).count();
  }
  [[nodiscard]] bool in_incident(std::int64_t t) const noexcept {
    return t >= incident_start_ && t < incident_end_;
  }

  void schedule_next_arrival(std::int64_t from) {
    // The simulator's arrival process: exponential gaps -ln(1 - u) / rate from its own stream.
    const double u = uniform_unit(arrivals_rng_);
    const double gap_ns = -std::log1p(-u) / s_.requests_per_second * 1e9;
    if (!(gap_ns < static_cast<double>(end_ - from))) return;
    push(pending{from + static_cast<std::int64_t>(std::llround(gap_ns)), k_arrival, 0});
  }

  void push(pending p) {
    starts_.push(p);
    if (!armed_ || p.time < armed_at_) arm_starts();
  }

  // Waits until the earliest scheduled start.
  void arm_starts() {
    if (starts_.empty() || stopped_) {
      armed_ = false;
      return;
    }
    armed_ = true;
    armed_at_ = starts_.top().time;
    starts_timer_.expires_at(t0_ + std::chrono::nanoseconds(armed_at_));
    starts_timer_.async_wait([this](const std::error_code& ec) {
      if (ec || stopped_) return;  // re-armed earlier, or stopped
      armed_ = false;
      const std::int64_t t = now();
      while (!starts_.empty() && starts_.top().time <= t && !stopped_) {
        const pending p = starts_.top();
        starts_.pop();
        if (p.id == k_arrival) {
          on_arrival(p.time);
        } else {
          start_attempt(p.id, p.attempt, p.time);
        }
      }
      if (!armed_) arm_starts();
    });
  }

  // Every 100 ms: the end of the run, the stop flag, the queue sample and the progress.
  void tick() {
    const std::int64_t t = now();
    if (t >= end_ || (options_.stop != nullptr && options_.stop->load())) {
      completed_ = t >= end_;
      stop();
      return;
    }
    metrics_.sample_queue_until(t, srv_.stats().queued);
    if (options_.progress) {
      options_.progress(static_cast<std::size_t>(t / k_tick_ns),
                        static_cast<std::size_t>((end_ + k_tick_ns - 1) / k_tick_ns));
    }
    const std::int64_t next = std::min(end_, (t / k_tick_ns + 1) * k_tick_ns);
    tick_timer_.expires_at(t0_ + std::chrono::nanoseconds(next));
    tick_timer_.async_wait([this](const std::error_code& ec) {
      if (!ec && !stopped_) tick();
    });
  }

  void stop() {
    stopped_ = true;
    starts_timer_.cancel();
    io_.stop();
  }

  void on_arrival(std::int64_t at) {
    const bool incident = in_incident(at);
    const std::uint32_t id = fleet_.add(at, incident);
    metrics_.arrival(at, incident);
    if (!fleet_.admit(id, at)) {
      fleet_[id].state = sim::engine::request_state::ended;
      ++metrics_.counters().throttled;
      if (prometheus_ != nullptr) prometheus_->record_end(end_reason::throttled);
    } else {
      start_attempt(id, 1, at);
    }
    schedule_next_arrival(at);
  }

  void start_attempt(std::uint32_t id, std::int32_t attempt, std::int64_t at) {
    sim::engine::request& r = fleet_[id];
    r.attempt = attempt;
    r.state = sim::engine::request_state::awaiting;
    metrics_.attempt(at, r.in_incident);
    http::request req;
    req.url = url_;
    client_.async_perform(std::move(req), [this, id](http::result res) { on_result(id, res); });
  }

  void on_result(std::uint32_t id, const http::result& res) {
    if (stopped_) return;
    const std::int64_t t = now();
    if (t >= end_) return;  // after the run: still in flight, as in the simulator
    sim::engine::request& r = fleet_[id];
    if (res.response && res.response->status >= 200 && res.response->status < 300) {
      r.state = sim::engine::request_state::ended;
      metrics_.success(t, t - r.start);
      fleet_.succeeded(id, t);
      fleet_.ended(id, t);
      if (prometheus_ != nullptr) {
        prometheus_->record_outcome(attempt_status::success);
        prometheus_->record_end(end_reason::success);
      }
      return;
    }
    if (res.response) {
      metrics_.failure(t);
      if (prometheus_ != nullptr) {
        prometheus_->record_outcome(unavailable_.action() != classification::kind::stop
                                        ? attempt_status::failure
                                        : attempt_status::not_retryable);
      }
      on_failure(id, t, unavailable_);
    } else {
      metrics_.timeout(t);
      if (prometheus_ != nullptr) prometheus_->record_outcome(attempt_status::timeout);
      on_failure(id, t, classification::retry().as_timeout());
    }
  }

  void on_failure(std::uint32_t id, std::int64_t t, classification verdict) {
    const retry_decision next = fleet_.failed(id, t, verdict);
    sim::engine::request& r = fleet_[id];
    if (next.retry) {
      if (prometheus_ != nullptr) prometheus_->record_retry(next.delay, false);
      r.state = sim::engine::request_state::backing_off;
      r.previous_delay = next.delay.count();
      const std::int64_t delay = std::max<std::int64_t>(0, next.delay.count());
      if (delay < end_ - t) push(pending{t + delay, id, r.attempt + 1});
      return;
    }
    r.state = sim::engine::request_state::ended;
    fleet_.ended(id, t);
    if (prometheus_ != nullptr) prometheus_->record_end(next.reason);
    if (next.reason == end_reason::budget_exhausted) {
      ++metrics_.counters().budget_exhausted;
    } else {
      ++metrics_.counters().attempts_exhausted;
    }
  }

  asio::io_context& io_;
  const sim::scenario& s_;
  server& srv_;
  const fleet_options& options_;
  std::string url_;
  std::int64_t end_;
  duration timeout_;
  classification unavailable_;
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;
  http::async_client client_;
  sim::engine::fleet<B> fleet_;
  sim::engine::metrics metrics_;
  random_generator arrivals_rng_;
  std::priority_queue<pending, std::vector<pending>, std::greater<>> starts_;
  asio::steady_timer starts_timer_;
  asio::steady_timer tick_timer_;
  steady::time_point t0_{};
  bool armed_ = false;
  std::int64_t armed_at_ = 0;
  bool stopped_ = false;
  bool completed_ = true;
  metrics::client_metrics* prometheus_;  // nullptr: no Prometheus metrics
};

std::string json_string(const std::string& text) { return nlohmann::json(text).dump(); }

std::string cell(std::optional<double> lab, std::optional<double> sim, int decimals,
                 const char* unit = "") {
  const auto one = [&](std::optional<double> v) {
    return v ? fmt::format("{:.{}f}{}", *v, decimals, unit) : std::string("-");
  };
  return one(lab) + " / " + one(sim);
}

}  // namespace

outcome<fleet_result, std::string> run_fleet(const sim::scenario& s, const sim::strategy& strat,
                                             server& srv, const fleet_options& options) {
  if (auto problem = sim::validate(s)) {
    throw std::invalid_argument("stormguard::lab::run_fleet: invalid scenario: " +
                                problem->message);
  }
  const sim::strategy applied = sim::engine::with_scenario_retries(s, strat);
  asio::io_context io(1);
  try {
    return std::visit(
        [&](const auto& config) -> fleet_result {
          using budget_type = typename sim::budget_for<std::decay_t<decltype(config)>>::type;
          lab_engine<budget_type> engine(io, s, applied, config, srv, options);
          return engine.run();
        },
        applied.budget);
  } catch (const std::runtime_error& e) {  // libcurl could not be initialised
    return failure{std::string(e.what())};
  }
}

outcome<lab_report, std::string> run_lab(const sim::scenario& s,
                                         std::span<const sim::strategy> strategies,
                                         const fleet_options& options) {
  if (auto problem = sim::validate(s)) {
    throw std::invalid_argument("stormguard::lab::run_lab: invalid scenario: " + problem->message);
  }
  if (auto problem = sim::check_work(s, strategies)) {
    throw std::invalid_argument("stormguard::lab::run_lab: " + problem->message);
  }
  lab_report report{s, {}, false};
  const std::size_t ticks =
      static_cast<std::size_t>((s.length.count() + k_tick_ns - 1) / k_tick_ns);
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    if (options.stop != nullptr && options.stop->load()) {
      report.interrupted = true;
      break;
    }
    auto started = server::start(s, {.port = 0, .start_clock = false});
    if (!started) return failure{started.error()};
    const std::unique_ptr<server> srv = *std::move(started);
    fleet_options per_run{{}, options.stop, options.metrics};
    if (options.progress) {
      per_run.progress = [&, i](std::size_t done, std::size_t) {
        options.progress(i * ticks + done, strategies.size() * ticks);
      };
    }
    auto measured = run_fleet(s, strategies[i], *srv, per_run);
    srv->stop();
    if (!measured) return failure{measured.error()};
    fleet_result& run = *measured;
    report.strategies.push_back(lab_comparison{strategies[i].name, std::move(run.result),
                                               sim::simulate(s, strategies[i]), run.completed});
    if (!run.completed) {
      report.interrupted = true;
      break;
    }
  }
  if (options.progress && !report.interrupted) {
    options.progress(strategies.size() * ticks, strategies.size() * ticks);
  }
  return report;
}

std::string to_json(const lab_report& report) {
  std::string out =
      fmt::format("{{\"scenario\":{},\"seed\":{},\"interrupted\":{},\"strategies\":[",
                  json_string(report.scenario.name), report.scenario.seed, report.interrupted);
  bool first = true;
  for (const lab_comparison& c : report.strategies) {
    if (!first) out += ',';
    first = false;
    out += fmt::format("{{\"name\":{},\"completed\":{},\"lab\":{},\"sim\":{}}}",
                       json_string(c.name), c.completed, sim::to_json(c.lab), sim::to_json(c.sim));
  }
  out += "]}\n";
  return out;
}

std::string format_table(const lab_report& report) {
  const auto& s = report.scenario;
  std::string out = fmt::format(
      "{}: {:g} req/s, {} clients, {} workers, queue {}, seed {}; each figure lab / sim\n\n",
      s.name, s.requests_per_second, s.clients, s.workers, s.queue_limit, s.seed);
  out +=
      fmt::format("{:<14} {:>17} {:>17} {:>17} {:>19} {:>21} {:>15}\n", "strategy", "amplification",
                  "incident ampl.", "peak load", "success", "p99 (ms)", "recovery (s)");
  for (const lab_comparison& c : report.strategies) {
    const auto pct = [](std::optional<double> v) {
      return v ? std::optional<double>(*v * 100) : std::nullopt;
    };
    out += fmt::format("{:<14} {:>17} {:>17} {:>17} {:>19} {:>21} {:>15}{}\n", c.name,
                       cell(c.lab.amplification, c.sim.amplification, 2),
                       cell(c.lab.incident_amplification, c.sim.incident_amplification, 2),
                       cell(c.lab.peak_load_ratio, c.sim.peak_load_ratio, 2),
                       cell(pct(c.lab.success_ratio), pct(c.sim.success_ratio), 1, "%"),
                       cell(c.lab.p99_latency_ms, c.sim.p99_latency_ms, 0),
                       cell(c.lab.recovery_s, c.sim.recovery_s, 0),
                       c.completed ? "" : "  (stopped early)");
  }
  if (report.interrupted) out += "\ninterrupted: the report is partial\n";
  return out;
}

}  // namespace stormguard::lab
