// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc::admit: the admission component's defences at a gRPC handler's entry. What is
// read (the attempt label from the metadata, the deadline from the context) and what is answered
// (a status and the pushback trailer) is gRPC's; every decision is the defences' own
// (retry_admission::admit, admission::expired, concurrency_limit::try_acquire).
#include "stormguard/grpc/admission.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"

namespace stormguard::grpc {

namespace {
random_generator seeded(std::uint64_t seed) {
  return seed == 0 ? random_generator() : random_generator(seed);
}
}  // namespace

struct server_admission::impl {
  server_admission_options options;
  real_clock own_clock;
  clock* clk;
  std::optional<admission::retry_admission> retry_budget;
  std::optional<admission::concurrency_limit> limit;
  stormguard::detail::mutex random_mutex;
  random_generator random STORMGUARD_GUARDED_BY(random_mutex);
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> retry_refused{0};
  std::atomic<std::int64_t> expired{0};
  std::atomic<std::int64_t> over_limit{0};
  std::atomic<std::int64_t> malformed{0};

  impl(server_admission_options o, clock* c)
      : options(std::move(o)), clk(c != nullptr ? c : &own_clock), random(seeded(options.seed)) {
    if (options.drop_expired && (*options.drop_expired < duration::zero() ||
                                 *options.drop_expired > std::chrono::hours(1))) {
      throw std::invalid_argument(
          "stormguard::grpc::server_admission_options::drop_expired must be in [0 s, 1 h], got " +
          std::to_string(options.drop_expired->count()) + " ns");
    }
    if (options.retry_budget) retry_budget.emplace(*options.retry_budget);
    if (options.concurrency_limit) limit.emplace(*options.concurrency_limit, clk->now());
  }

  duration refusal_delay() {
    const stormguard::detail::lock hold(random_mutex);
    return limit->retry_after_for_refusal(random);
  }
  void release(time_point started) {
    const time_point now = clk->now();
    const stormguard::detail::lock hold(random_mutex);
    limit->release(now, started, random);
  }
};

server_admission::server_admission(server_admission_options options)
    : impl_(std::make_unique<impl>(std::move(options), nullptr)) {}
server_admission::server_admission(server_admission_options options, clock& clk)
    : impl_(std::make_unique<impl>(std::move(options), &clk)) {}
server_admission::~server_admission() = default;

server_admission_counts server_admission::counts() const noexcept {
  return {impl_->admitted.load(std::memory_order_relaxed),
          impl_->retry_refused.load(std::memory_order_relaxed),
          impl_->expired.load(std::memory_order_relaxed),
          impl_->over_limit.load(std::memory_order_relaxed),
          impl_->malformed.load(std::memory_order_relaxed)};
}

std::int64_t server_admission::concurrency_limit() const noexcept {
  return impl_->limit ? impl_->limit->limit() : -1;
}

admission_ticket server_admission::decide(const attempt_info& attempt, time_point deadline) {
  impl& self = *impl_;
  const time_point now = self.clk->now();
  if (attempt.malformed) self.malformed.fetch_add(1, std::memory_order_relaxed);
  const duration do_not_retry = -std::chrono::milliseconds(1);
  if (self.options.drop_expired && admission::expired(now, deadline, *self.options.drop_expired)) {
    self.expired.fetch_add(1, std::memory_order_relaxed);
    return {this, admission::outcome::expired, now, false, do_not_retry};
  }
  if (self.retry_budget && !self.retry_budget->admit(now, attempt)) {
    self.retry_refused.fetch_add(1, std::memory_order_relaxed);
    return {this, admission::outcome::retry_refused, now, false, do_not_retry};
  }
  if (self.limit && !self.limit->try_acquire(now)) {
    self.over_limit.fetch_add(1, std::memory_order_relaxed);
    return {this, admission::outcome::over_limit, now, false, self.refusal_delay()};
  }
  self.admitted.fetch_add(1, std::memory_order_relaxed);
  return {this, admission::outcome::served, now, self.limit.has_value(), duration::zero()};
}

admission_ticket::admission_ticket(server_admission* owner, admission::outcome decision,
                                   time_point started, bool holds_slot, duration pushback) noexcept
    : owner_(owner),
      decision_(decision),
      started_(started),
      holds_slot_(holds_slot),
      pushback_(pushback) {}

admission_ticket::admission_ticket(admission_ticket&& other) noexcept
    : owner_(other.owner_),
      decision_(other.decision_),
      started_(other.started_),
      holds_slot_(std::exchange(other.holds_slot_, false)),
      pushback_(other.pushback_) {}

admission_ticket& admission_ticket::operator=(admission_ticket&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    decision_ = other.decision_;
    started_ = other.started_;
    holds_slot_ = std::exchange(other.holds_slot_, false);
    pushback_ = other.pushback_;
  }
  return *this;
}

admission_ticket::~admission_ticket() { release(); }

void admission_ticket::release() noexcept {
  if (!holds_slot_) return;
  holds_slot_ = false;
  owner_->impl_->release(started_);
}

::grpc::Status admission_ticket::refusal() const { return status_for(decision_); }

::grpc::Status status_for(admission::outcome o) {
  if (o == admission::outcome::served) return ::grpc::Status::OK;
  const admission::reply answer = admission::reply_for(o);
  std::string message(answer.body);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  const auto code = o == admission::outcome::over_limit ? ::grpc::StatusCode::RESOURCE_EXHAUSTED
                                                        : ::grpc::StatusCode::UNAVAILABLE;
  return {code, "stormguard admission: " + message};
}

std::optional<std::string> pushback_for(admission::outcome o, std::optional<duration> delay) {
  if (admission::reply_for(o).do_not_retry) return std::string(admission::k_refusal_pushback);
  if (!delay) return std::nullopt;
  using ms = std::chrono::milliseconds;
  constexpr auto k_max = ms(std::numeric_limits<std::int32_t>::max());
  const duration d =
      std::clamp(*delay, duration::zero(), std::chrono::duration_cast<duration>(k_max));
  return std::to_string(std::chrono::ceil<ms>(d).count());
}

namespace {

// The caller's deadline on the admission's clock: the time gRPC says is left, from now.
time_point deadline_on(const clock& clk, std::chrono::system_clock::time_point wall) {
  const auto wall_now = std::chrono::system_clock::now();
  if (wall >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return time_point::max();  // gRPC's "no deadline" (gpr_inf_future) is near the end of time
  }
  const duration left = std::chrono::duration_cast<duration>(wall - wall_now);
  return stormguard::detail::saturating_add(clk.now(), left);
}

}  // namespace

admission_ticket admit(::grpc::ServerContextBase& context, server_admission& admission) {
  attempt_fields reader;
  for (const auto& [name, value] : context.client_metadata()) {
    reader.field(std::string_view(name.data(), name.size()),
                 std::string_view(value.data(), value.size()));
  }
  admission_ticket ticket =
      admission.decide(reader.result(), deadline_on(*admission.impl_->clk, context.deadline()));
  if (!ticket.admitted()) {
    const duration pushback = ticket.pushback();
    const std::string value =
        pushback < duration::zero()
            ? std::string(admission::k_refusal_pushback)
            : std::to_string(
                  std::chrono::duration_cast<std::chrono::milliseconds>(pushback).count());
    context.AddTrailingMetadata(std::string(k_pushback_header), value);
  }
  return ticket;
}

}  // namespace stormguard::grpc
