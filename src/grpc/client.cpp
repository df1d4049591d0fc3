// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc::client: one gRPC unary call per attempt, each on a fresh ClientContext,
// retried by stormguard::retrier.
//
// The retry decision is not made here: a failed attempt goes to classify_attempt (the
// idempotency rule and the pushback), and the retrier asks retry_policy::decide and the budget
// through the one budget protocol. What lives here is one attempt: its context (the caller's
// configuration, the attempt label, the deadline), the cancellation of the attempt in flight, and
// what the attempt's answer says (the pushback trailer, whether it ever left).
#include "stormguard/grpc/client.hpp"

#include <grpc/grpc.h>  // GRPC_ARG_ENABLE_RETRIES, grpc_connectivity_state
#include <grpcpp/create_channel.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "grpc/client_impl.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::grpc {

status_codes::status_codes(std::initializer_list<::grpc::StatusCode> codes) {
  for (const ::grpc::StatusCode code : codes) {
    const int c = static_cast<int>(code);
    if (c < 1 || c > 16) {
      throw std::invalid_argument("stormguard::grpc::status_codes: the status code " +
                                  std::to_string(c) +
                                  " is not a failure code of gRPC (1..16; 0 is OK)");
    }
    mask_ |= std::uint32_t{1} << c;
  }
}

classification classify_attempt(const attempt_failure& failure, const status_codes& retryable,
                                bool idempotent) noexcept {
  if (failure.pushback) {
    if (failure.pushback->do_not_retry) return classification::stop();
    return classification::retry_after(failure.pushback->delay);
  }
  if (failure.never_sent) return classification::retry();
  if (!idempotent) return classification::stop();
  if (failure.attempt_timed_out) return classification::retry().as_timeout();
  const int code = static_cast<int>(failure.status.error_code());
  const auto read =
      is_known_status_code(code) ? failure.status.error_code() : ::grpc::StatusCode::UNKNOWN;
  return retryable.contains(read) ? classification::retry() : classification::stop();
}

::grpc::ChannelArguments channel_arguments(::grpc::ChannelArguments args) {
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return args;
}

std::shared_ptr<::grpc::Channel> make_channel(
    const std::string& target, const std::shared_ptr<::grpc::ChannelCredentials>& credentials,
    ::grpc::ChannelArguments args) {
  return ::grpc::CreateCustomChannel(target, credentials, channel_arguments(std::move(args)));
}

namespace detail {

std::optional<stormguard::pushback> pushback_of(const ::grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto found =
      trailers.find(::grpc::string_ref(k_pushback_header.data(), k_pushback_header.size()));
  if (found == trailers.end()) return std::nullopt;
  return parse_pushback(std::string_view(found->second.data(), found->second.size()));
}

namespace {
// Saturating: system_clock::now() + d, or nothing for a d that reaches past its range.
std::optional<std::chrono::system_clock::time_point> wall_deadline(duration d) {
  const auto now = std::chrono::system_clock::now();
  const auto room = std::chrono::system_clock::time_point::max() - now;
  if (d >= std::chrono::duration_cast<duration>(room)) return std::nullopt;
  return now + std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

::grpc::Status no_attempt_status(end_reason reason, int next_attempt) {
  const std::string n = std::to_string(next_attempt);
  switch (reason) {
    case end_reason::cancelled:
      return {::grpc::StatusCode::CANCELLED, "stormguard: cancelled before attempt " + n};
    case end_reason::deadline_exceeded:
      return {::grpc::StatusCode::DEADLINE_EXCEEDED,
              "stormguard: the call's deadline passed before attempt " + n};
    default:
      return {::grpc::StatusCode::UNAVAILABLE,
              "stormguard: the retry budget throttled the call (no attempt sent)"};
  }
}
}  // namespace

attempt_setup prepare_context(::grpc::ClientContext& ctx, const call_options& call, int attempt,
                              duration time_left, const client_options& options,
                              ::grpc::Channel& channel) {
  if (call.configure) call.configure(ctx);
  if (attempt >= 2) {
    ctx.AddMetadata(std::string(k_previous_attempts_header), std::to_string(attempt - 1));
  }
  const duration limit = std::min(time_left, options.attempt_timeout);
  if (const auto until = wall_deadline(limit)) {
    if (*until < ctx.deadline()) ctx.set_deadline(*until);
  }
  return {time_left <= options.attempt_timeout && time_left != duration::max(),
          channel.GetState(false) == GRPC_CHANNEL_READY};
}

failed_attempt read_failure(const ::grpc::Status& status, const ::grpc::ClientContext& ctx,
                            const attempt_setup& setup, const client_options& options,
                            ::grpc::Channel& channel) {
  failed_attempt f;
  f.failure.status = status;
  f.failure.pushback = pushback_of(ctx);
  const auto code = status.error_code();
  f.failure.never_sent = code == ::grpc::StatusCode::UNAVAILABLE && !setup.was_ready &&
                         channel.GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE;
  if (code == ::grpc::StatusCode::DEADLINE_EXCEEDED) {
    f.cut_by_deadline = setup.call_deadline_rules;
    f.failure.attempt_timed_out = !f.cut_by_deadline && options.attempt_timeout != duration::max();
  }
  return f;
}

void tell_end(const client_options& options, std::string_view method, const result& r) noexcept {
  if (!options.on_end) return;
  try {
    options.on_end(method, r);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a failed diagnostic changes nothing
  }
}

classification verdict_of(const failed_attempt& f, const client_options& options,
                          bool idempotent) noexcept {
  if (f.cut_by_deadline) return classification::stop();
  return classify_attempt(f.failure, options.retryable, idempotent);
}

result finish_result(end_reason reason, int attempts, duration slept, const failed_attempt* last) {
  result out;
  out.reason = reason;
  out.attempts = attempts;
  out.slept = slept;
  if (reason == end_reason::success) return out;
  if (last == nullptr) {
    out.status = no_attempt_status(reason, attempts + 1);
    return out;
  }
  out.status = last->failure.status;
  out.pushback = last->failure.pushback;
  if (reason == end_reason::not_retryable) {
    // The classifier's stop, said more precisely: the server's "do not retry", or the deadline.
    if (last->failure.pushback && last->failure.pushback->do_not_retry) {
      out.reason = end_reason::server_refused;
    } else if (last->cut_by_deadline) {
      out.reason = end_reason::deadline_exceeded;
    }
  }
  return out;
}

}  // namespace detail

client::impl::impl(std::shared_ptr<::grpc::Channel> ch, c_core_retries retries, client_options o,
                   clock* c, random_generator* r)
    : channel(std::move(ch)),
      options(std::move(o)),
      policy(options.retry),
      hedging(options.hedging.policy),
      tracker(options.hedging.policy.delay_quantile > 0.0
                  ? std::make_unique<latency_tracker>(options.hedging.policy.delay_quantile)
                  : nullptr),
      own_budget(options.shared_budget ? nullptr : make_budget(options.budget)),
      budget(options.shared_budget ? options.shared_budget.get() : own_budget.get()),
      own_random(),
      clk(c != nullptr ? c : &own_clock),
      random(r != nullptr ? *r : own_random) {
  if (!channel) throw std::invalid_argument("stormguard::grpc::client: the channel is null");
  if (retries == c_core_retries::on) {
    throw std::invalid_argument(
        "stormguard::grpc::client: the channel has C-core's retries on (c_core_retries::on); "
        "make it with stormguard::grpc::channel_arguments() or make_channel(), which set "
        "grpc.enable_retries 0");
  }
  if (options.attempt_timeout <= duration::zero()) {
    throw std::invalid_argument(
        "stormguard::grpc::client_options::attempt_timeout must be > 0, got " +
        std::to_string(options.attempt_timeout.count()) + " ns");
  }
}

// One attempt of a synchronous call, on a fresh context.
outcome<done_t, detail::failed_attempt> client::impl::attempt(detail::attempt_ref rpc,
                                                              const call_options& call,
                                                              const attempt_context& at) {
  ::grpc::ClientContext ctx;
  const detail::attempt_setup setup =
      detail::prepare_context(ctx, call, at.attempt, at.time_left, options, *channel);
  ::grpc::Status status;
  {
    // A stop request cancels the attempt in flight (TryCancel is thread-safe; before the call
    // starts it marks the context, and gRPC cancels the call as it starts).
    const std::stop_callback cancel(at.stop, [&ctx] { ctx.TryCancel(); });
    status = rpc(ctx);
  }
  if (status.ok()) return done;
  return failure<detail::failed_attempt>{
      detail::read_failure(status, ctx, setup, options, *channel)};
}

client::client(const std::string& target,
               const std::shared_ptr<::grpc::ChannelCredentials>& credentials,
               client_options options)
    : impl_(std::make_unique<impl>(make_channel(target, credentials), c_core_retries::off,
                                   std::move(options), nullptr, nullptr)) {}

client::client(std::shared_ptr<::grpc::Channel> channel, c_core_retries retries,
               client_options options)
    : impl_(std::make_unique<impl>(std::move(channel), retries, std::move(options), nullptr,
                                   nullptr)) {}

client::client(std::shared_ptr<::grpc::Channel> channel, c_core_retries retries,
               client_options options, clock& clk, random_generator& random)
    : impl_(
          std::make_unique<impl>(std::move(channel), retries, std::move(options), &clk, &random)) {}

client::~client() = default;

const std::shared_ptr<::grpc::Channel>& client::channel() const noexcept { return impl_->channel; }
const client_options& client::options() const noexcept { return impl_->options; }
any_budget& client::budget() noexcept { return *impl_->budget; }

result client::run(detail::attempt_ref rpc, const call_options& call) {
  impl& self = *impl_;
  const auto operation = [&](const attempt_context& at) { return self.attempt(rpc, call, at); };
  const auto classify = [&](const detail::failed_attempt& f) {
    return detail::verdict_of(f, self.options, call.idempotent);
  };
  auto retry = retrier(self.policy, *self.clk, self.random, *self.budget);
  const stormguard::call_options settings{.stop = call.stop, .deadline = call.deadline};
  auto ended = self.options.on_attempt ? retry.on_attempt([&](const attempt_event& e) {
    self.options.on_attempt(call.method, e);
  })(operation, classify, settings)
                                       : retry(operation, classify, settings);
  result r = detail::finish_result(ended.reason, ended.attempts, ended.slept,
                                   ended.last_error ? &*ended.last_error : nullptr);
  if (self.options.on_end) self.options.on_end(call.method, std::as_const(r));
  return r;
}

}  // namespace stormguard::grpc
