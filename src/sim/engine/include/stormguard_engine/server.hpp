// SPDX-License-Identifier: Apache-2.0
// The server of the time-series model (the internal engine target stormguard_sim_engine): worker
// slots, a FIFO queue of bounded length, the service time by phase (normal, incident, overload) and
// the sliding window of load that server.overload compares with its threshold; with
// server.defences, the defences of stormguard_engine/defences.hpp in front of them.
#ifndef STORMGUARD_ENGINE_SERVER_HPP
#define STORMGUARD_ENGINE_SERVER_HPP

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/defences.hpp"
#include "stormguard_engine/event_queue.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim::engine {

// The service time of one attempt and its phase: 0 normal, 1 incident, 2 overload (the FIFO lane
// its completion goes to when service times are fixed); k_stall_lane for a stalled attempt (its
// completion goes to the heap: stalls break the FIFO order of a lane).
struct service {
  std::int64_t time;  // ns
  std::size_t lane;
};

// The lane of a stalled attempt's completion (not a FIFO lane).
inline constexpr std::size_t k_stall_lane = 3;

class server {
 public:
  // `service_seed` seeds the generator of exponential service times (and, mixed with a tag of
  // its own, that of the stalls).
  server(const scenario& s, std::uint64_t service_seed)
      : s_(s), rng_(service_seed), stall_rng_(seeds::mix(service_seed, seeds::k_tag_stall)) {
    if (s.incident && s.incident->service_time) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
      incident_service_ = s.incident->service_time->count();
    }
  }

  // An attempt reaches the server now: counts it in the load window (rejected ones included).
  void arrive(std::int64_t now) {
    if (!s_.overload) return;
    const std::int64_t slice = now / k_load_slice_ns;
    advance_load(slice);
    ++load_[static_cast<std::size_t>(slice) % k_load_slices];
    ++load_total_;
  }

  [[nodiscard]] bool has_free_worker() const noexcept { return busy_ < s_.workers; }
  [[nodiscard]] bool queue_full() const noexcept {
    return static_cast<std::int64_t>(queue_.size()) >= s_.queue_limit;
  }
  [[nodiscard]] std::int64_t queue_length() const noexcept {
    return static_cast<std::int64_t>(queue_.size());
  }

  // Takes a worker for an attempt whose service starts now; returns its service.
  service start(std::int64_t now) {
    ++busy_;
    return service_time(now);
  }
  void enqueue(queued_attempt a) { queue_.push_back(a); }
  [[nodiscard]] std::int64_t queue_limit() const noexcept { return s_.queue_limit; }
  // A worker is free again (the caller chooses who takes it).
  void release() noexcept { --busy_; }
  // The FIFO line's head, taken out of the line (no worker taken).
  std::optional<queued_attempt> pop_fifo() {
    if (queue_.empty()) return std::nullopt;
    const queued_attempt next = queue_.front();
    queue_.pop_front();
    return next;
  }

  // A worker finished. If an attempt waits, it takes the worker (returned with its service).
  struct next_service {
    queued_attempt attempt;
    service svc;
  };
  std::optional<next_service> finish(std::int64_t now) {
    --busy_;
    return next_fifo(now);
  }
  // The FIFO line's head takes a free worker now (returned with its service), if any waits.
  std::optional<next_service> next_fifo(std::int64_t now) {
    if (queue_.empty()) return std::nullopt;
    const queued_attempt next = queue_.front();  // copied before pop_front reuses the slot
    queue_.pop_front();
    return next_service{next, start(now)};
  }

 private:
  static constexpr std::int64_t k_load_slice_ns = 100'000'000;  // the window's slices: 100 ms
  static constexpr std::size_t k_load_slices = 10;              // 10 slices: a 1-s window

  // Clears the slices that left the window since the newest one seen.
  void advance_load(std::int64_t slice) {
    for (std::int64_t k = load_slice_ + 1; k <= slice && k <= load_slice_ + 10; ++k) {
      auto& slot = load_[static_cast<std::size_t>(k) % k_load_slices];
      load_total_ -= slot;
      slot = 0;
    }
    load_slice_ = std::max(load_slice_, slice);
  }

  // More than above_rate attempts reached the server in the 1-s window ending now.
  [[nodiscard]] bool overloaded(std::int64_t now) {
    if (!s_.overload) return false;
    advance_load(now / k_load_slice_ns);
    return static_cast<double>(load_total_) > s_.overload->above_rate;
  }

  // The service time of an attempt whose service starts now, stall included (server.stall: one
  // draw per attempt from the stall generator, only when the scenario has stalls).
  [[nodiscard]] service service_time(std::int64_t now) {
    service svc = phase_service_time(now);
    if (s_.stall && uniform_unit(stall_rng_) < s_.stall->probability) {
      svc.time = stormguard::detail::saturating_add(duration(svc.time), s_.stall->length).count();
      svc.lane = k_stall_lane;
    }
    return svc;
  }

  // The service time of the phase at `now`.
  [[nodiscard]] service phase_service_time(std::int64_t now) {
    std::int64_t mean = s_.service_time.count();
    std::size_t lane = 0;
    if (incident_service_ != 0 && now >= incident_start_ && now < incident_end_) {
      mean = incident_service_;
      lane = 1;
    } else if (overloaded(now)) {
      mean = s_.overload->service_time.count();
      lane = 2;
    }
    if (s_.distribution == service_distribution::fixed) return {mean, lane};
    const double u = uniform_unit(rng_);
    // -ln(1 - u) <= 37.5 for u < 1, and validate() bounds mean by 1 h: no overflow.
    return {std::max<std::int64_t>(1, std::llround(-std::log1p(-u) * static_cast<double>(mean))),
            lane};
  }

  const scenario& s_;
  random_generator rng_;
  random_generator stall_rng_;
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;
  std::int64_t incident_service_ = 0;  // 0: the incident leaves the service time alone
  std::array<std::int64_t, k_load_slices> load_{};
  std::int64_t load_total_ = 0;
  std::int64_t load_slice_ = 0;
  ring<queued_attempt> queue_;
  int busy_ = 0;
};

// What the server does with an attempt that reaches it: lost (read, never answered), error (an
// immediate 503 of the incident's error rate), rejected (an immediate 503: the queue is full),
// accepted (it takes a worker or a place in the queue: server_model::take), or answered by a
// defence at the door (decision::by says which kind and with what outcome: the retry budget's
// retry_refused, the concurrency limit's over_limit with server_model::retry_after, drop-expired's
// expired when the deadline it carries has passed or is nearer than the service estimate).
enum class admission : std::uint8_t { lost, error, rejected, accepted, defended };

// admit()'s answer: what happened and, for admission::defended, the defence's answer.
struct decision {
  admission what = admission::accepted;
  defence_answer by{};
  friend constexpr bool operator==(const decision& d, admission a) noexcept { return d.what == a; }
};

// The scenario's server as both the simulator's virtual server and the lab's HTTP server run it:
// the incident's one draw per attempt (lost with probability loss_rate, else a 503 with
// error_rate, from the scenario's "incident" stream), then the workers and the queue (server).
// Not thread-safe: one thread (the simulator's loop, or the lab server's event loop) calls it.
class server_model {
 public:
  // `s` must outlive the model (it is read at each decision: the lab server drops its overload
  // once the scenario's duration has passed).
  explicit server_model(const scenario& s)
      : server_(s, seeds::mix(s.seed, seeds::k_tag_service)),
        incident_rng_(seeds::mix(s.seed, seeds::k_tag_incident)) {
    if (!s.defences.enabled.empty()) defences_ = std::make_unique<defences>(s);
    if (s.incident) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
      loss_rate_ = s.incident->loss_rate;
      error_or_loss_rate_ = s.incident->loss_rate + s.incident->error_rate;
    }
  }

  // An attempt reaches the server now (ns of the scenario's clock), saying what `labels` say.
  [[nodiscard]] decision admit(std::int64_t now, const attempt_labels& labels = {}) {
    if (error_or_loss_rate_ > 0.0 && now >= incident_start_ && now < incident_end_) {
      const double u = uniform_unit(incident_rng_);
      if (u < loss_rate_) return {admission::lost};
      if (u < error_or_loss_rate_) return {admission::error};
    }
    server_.arrive(now);
    if (defences_) {
      if (const auto answer = defences_->admit(now, labels)) return {admission::defended, *answer};
      if (!server_.has_free_worker() && queue_length() >= server_.queue_limit()) {
        defences_->cancel();
        defences_->engaged(now);
        return {admission::rejected};
      }
      return {admission::accepted};
    }
    if (!server_.has_free_worker() && server_.queue_full()) return {admission::rejected};
    return {admission::accepted};
  }

  // After admission::accepted: a worker now (its service), or nullopt when `waiting` was queued.
  [[nodiscard]] std::optional<service> take(std::int64_t now, queued_attempt waiting) {
    if (server_.has_free_worker()) {
      const service svc = server_.start(now);
      if (defences_) defences_->started(now, waiting.arrived, svc.time);
      return svc;
    }
    if (defences_ && defences_->keeps_line()) {
      defences_->push(waiting);
    } else {
      server_.enqueue(waiting);
    }
    return std::nullopt;
  }

  // A worker finished now; the queue's head takes it (returned with its service).
  std::optional<server::next_service> finish(std::int64_t now) {
    return finish(now, [](const queued_attempt&, const defence_answer&) {});
  }
  // The same with defences: attempts that leave the line unserved (CoDel, drop-expired) are
  // passed to on_drop(const queued_attempt&, const defence_answer&) first.
  template <class OnDrop>
  std::optional<server::next_service> finish(std::int64_t now, OnDrop&& on_drop) {
    if (!defences_) return server_.finish(now);
    defences_->finished(now);
    server_.release();
    while (true) {
      std::optional<queued_attempt> next;
      if (defences_->keeps_line()) {
        next = defences_->pop(now, [&](queued_attempt& dropped, const defence_answer& why) {
          defences_->cancel();
          on_drop(dropped, why);
        });
      } else {
        next = server_.pop_fifo();
      }
      if (!next) return std::nullopt;
      if (const auto answer = defences_->leave_line(now, next->deadline)) {
        defences_->cancel();
        on_drop(*next, *answer);
        continue;
      }
      const service svc = server_.start(now);
      defences_->started(now, next->arrived, svc.time);
      return server::next_service{*next, svc};
    }
  }

  [[nodiscard]] std::int64_t queue_length() const noexcept {
    return server_.queue_length() +
           (defences_ ? static_cast<std::int64_t>(defences_->line_size()) : 0);
  }

  // The Retry-After of the answer `o` given now (defences::retry_after_for: the pacing kind's for
  // every refusal, else the concurrency limit's when the reply carries one), or nullopt. `paced`
  // is set when the pacing kind chose it.
  [[nodiscard]] std::optional<duration> retry_after_for(stormguard::admission::outcome o,
                                                        std::int64_t now, bool* paced = nullptr) {
    if (paced != nullptr) *paced = false;
    if (!defences_) return std::nullopt;
    return defences_->retry_after_for(o, now, paced);
  }

 private:
  server server_;
  random_generator incident_rng_;
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;  // [0, 0): no incident
  double loss_rate_ = 0.0;
  double error_or_loss_rate_ = 0.0;
  std::unique_ptr<defences> defences_;  // null: no defence (today's FIFO server)
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_SERVER_HPP
