// SPDX-License-Identifier: Apache-2.0
// What the synchronous call (client.cpp) and the asynchronous one (async_call.cpp) share: the
// client's state, how an attempt's context is prepared, how a failed attempt is read and judged,
// and how a call's result is made.
#ifndef STORMGUARD_SRC_GRPC_CLIENT_IMPL_HPP
#define STORMGUARD_SRC_GRPC_CLIENT_IMPL_HPP

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <optional>

#include "grpc/hedge_timer.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::grpc::detail {

// The generator of a client shared by its calls' threads: each draw under a mutex (draws happen
// only after failures, and for the adaptive budget's admission).
class locked_generator {
 public:
  using result_type = random_generator::result_type;
  explicit locked_generator(random_generator& g) noexcept : g_(&g) {}
  static constexpr result_type min() noexcept { return random_generator::min(); }
  static constexpr result_type max() noexcept { return random_generator::max(); }
  result_type operator()() noexcept {
    const stormguard::detail::lock hold(mutex_);
    return (*g_)();
  }

 private:
  stormguard::detail::mutex mutex_;
  random_generator* g_;
};

// What one failed attempt carried back, beyond the classifier's attempt_failure.
struct failed_attempt {
  attempt_failure failure;
  bool cut_by_deadline = false;  // DEADLINE_EXCEEDED on the call's own deadline
};

// What prepare_context saw, for read_failure.
struct attempt_setup {
  bool call_deadline_rules = false;  // the call's deadline, not attempt_timeout, limits it
  bool was_ready = false;            // the channel was READY as the attempt started
};

// A fresh context for attempt `attempt`: the caller's configure, the attempt label, the deadline
// (time_left cut to attempt_timeout, or the caller's own when earlier).
attempt_setup prepare_context(::grpc::ClientContext& ctx, const call_options& call, int attempt,
                              duration time_left, const client_options& options,
                              ::grpc::Channel& channel);

// The pushback trailer of a finished call, if any.
std::optional<stormguard::pushback> pushback_of(const ::grpc::ClientContext& ctx);

// What a failed attempt says: its status, pushback, whether it never left, which deadline ended it.
failed_attempt read_failure(const ::grpc::Status& status, const ::grpc::ClientContext& ctx,
                            const attempt_setup& setup, const client_options& options,
                            ::grpc::Channel& channel);

// classify_attempt, and stop for an attempt the call's deadline ended.
classification verdict_of(const failed_attempt& f, const client_options& options,
                          bool idempotent) noexcept;

// The result of a call that ended for `reason` after `attempts` (last: its failed attempt, if
// any): server_refused and deadline_exceeded said precisely, a status for a call without attempt.
result finish_result(end_reason reason, int attempts, duration slept, const failed_attempt* last);

// The caller's on_end hook of an asynchronous call (a gRPC thread): an exception from it is
// dropped, since the thread would lose it and the call must still end.
void tell_end(const client_options& options, std::string_view method, const result& r) noexcept;

}  // namespace stormguard::grpc::detail

namespace stormguard::grpc {

struct client::impl {
  std::shared_ptr<::grpc::Channel> channel;
  client_options options;
  retry_policy policy;
  hedging_policy hedging;                    // the hedged calls' (options.hedging.policy)
  std::unique_ptr<latency_tracker> tracker;  // for a hedging delay_quantile > 0, else null
  std::unique_ptr<any_budget> own_budget;
  any_budget* budget;
  real_clock own_clock;
  random_generator own_random;
  clock* clk;
  detail::locked_generator random;
  // Last: its thread (if a hedge started it) is joined before the members above go.
  detail::hedge_timer timer;

  impl(std::shared_ptr<::grpc::Channel> ch, c_core_retries retries, client_options o, clock* c,
       random_generator* r);

  // One attempt of a synchronous call, on a fresh context.
  outcome<done_t, detail::failed_attempt> attempt(detail::attempt_ref rpc, const call_options& call,
                                                  const attempt_context& at);
};

}  // namespace stormguard::grpc

#endif  // STORMGUARD_SRC_GRPC_CLIENT_IMPL_HPP
