// SPDX-License-Identifier: Apache-2.0
/// \file
/// Admission at a gRPC handler's entry: the server's defences of stormguard::admission
/// (retry-budget, drop-expired, concurrency-limit), read from a call's metadata and deadline and
/// answered in gRPC's words.
///
/// gRPC C++ lets no interceptor refuse a call before its handler runs, so the handler asks
/// first, in one line, for a synchronous and a callback service alike:
///
/// \code{.cpp}
///  stormguard::grpc::server_admission admission({.retry_budget =
///  stormguard::ratio_budget_options{},
///                                                .drop_expired = std::chrono::milliseconds(5)});
///
///  grpc::Status GetOrder(grpc::ServerContext* ctx, const Req* req, Order* out) override {
///    auto ticket = stormguard::grpc::admit(*ctx, admission);
///    if (!ticket) return ticket.refusal();   // trailer grpc-retry-pushback-ms already added
///    ...                                     // the ticket holds a concurrency slot until here
///  }
/// \endcode
///
/// The answers follow gRFC A6 ("Pushback"): a retry the retry budget refuses, and a call whose
/// caller's deadline has passed or is nearer than the service estimate, get UNAVAILABLE with
/// `grpc-retry-pushback-ms: -1` (do not retry); a call over the concurrency limit gets
/// RESOURCE_EXHAUSTED with a positive pushback (retry no sooner than that). None of the defences'
/// decisions is made here: retry_admission, expired and concurrency_limit decide.
///
/// Inside `namespace stormguard`, `grpc::` names this namespace: name gRPC's own types from the
/// global namespace there (a leading `::`).
#ifndef STORMGUARD_GRPC_ADMISSION_HPP
#define STORMGUARD_GRPC_ADMISSION_HPP

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard::grpc {

/// Which defences run, with their settings (each off when empty). Validated by the defences'
/// own constructors (std::invalid_argument naming the field and the value).
struct server_admission_options {
  /// retry-budget: admits a call that says it is a retry (grpc-previous-rpc-attempts >= 1,
  /// x-envoy-attempt-count >= 2, or a malformed label) only while retries stay within this
  /// ratio budget of first attempts (admission::retry_admission; the floor is per server).
  std::optional<ratio_budget_options> retry_budget{};
  /// drop-expired: the server's estimate of one call's service time, in [0, 1 h]; a call whose
  /// caller's deadline is at or before now + estimate is refused (admission::expired). 0 refuses
  /// only deadlines already passed. A call without a deadline is never refused by it.
  std::optional<duration> drop_expired{};
  /// concurrency-limit: the adaptive limit of calls in the handler at once
  /// (admission::concurrency_limit; Envoy's gradient controller). initial_limit 0 starts as
  /// Envoy does, at min_concurrency; give a server's thread count to start there.
  std::optional<admission::concurrency_limit_options> concurrency_limit{};
  /// The random seed of the generator drawn for the concurrency limit's jitter and refusal
  /// pushback; 0 (the default) seeds from the operating system.
  std::uint64_t seed = 0;
};

/// What the defences decided so far, counted (thread-safe reads).
struct server_admission_counts {
  std::int64_t admitted = 0;       ///< calls admitted by every defence
  std::int64_t retry_refused = 0;  ///< refused by retry-budget
  std::int64_t expired = 0;        ///< refused by drop-expired
  std::int64_t over_limit = 0;     ///< refused by concurrency-limit
  std::int64_t malformed = 0;      ///< calls whose attempt label was unreadable
  /// Equal when every count is.
  friend constexpr bool operator==(const server_admission_counts&,
                                   const server_admission_counts&) = default;
};

class admission_ticket;
class server_admission;
/// \cond
STORMGUARD_EXPORT admission_ticket admit(::grpc::ServerContextBase& context,
                                         server_admission& admission);
/// \endcond

/// The defences of one server (or one service), shared by every handler thread. Thread-safe.
/// Neither copyable nor movable (handlers hold references).
class STORMGUARD_EXPORT server_admission {
 public:
  /// The defences `options` name, on the real clock.
  explicit server_admission(server_admission_options options);
  /// The same on an injected clock, which must outlive it (deadlines are converted from gRPC's
  /// system-clock deadline to this clock through the time left).
  server_admission(server_admission_options options, clock& clk);
  ~server_admission();
  server_admission(const server_admission&) = delete;
  server_admission& operator=(const server_admission&) = delete;

  /// The counts so far.
  [[nodiscard]] server_admission_counts counts() const noexcept;
  /// The concurrency limit's current limit, or -1 without that defence.
  [[nodiscard]] std::int64_t concurrency_limit() const noexcept;

  /// Runs the defences for a call that says it is `attempt`, whose caller's deadline is
  /// `deadline` (an instant of the admission's clock; time_point::max() = none), in the order
  /// drop-expired, retry-budget, concurrency-limit (the cheapest refusals first; a refused call
  /// takes no concurrency slot). What admit() runs after reading the context; public for
  /// servers that read the call otherwise.
  [[nodiscard]] admission_ticket decide(const attempt_info& attempt, time_point deadline);

 private:
  friend class admission_ticket;
  friend admission_ticket admit(::grpc::ServerContextBase& context, server_admission& admission);
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The answer for one call: admitted (holding a concurrency slot, released with the call's
/// latency when the ticket is destroyed or release() is called), or refused with the status to
/// return. Movable, not copyable; not thread-safe (one per call).
class STORMGUARD_EXPORT admission_ticket {
 public:
  /// A refused or admitted call (made by server_admission::decide).
  admission_ticket(server_admission* owner, admission::outcome decision, time_point started,
                   bool holds_slot, duration pushback) noexcept;
  /// Takes over `other`'s decision and slot; `other` then holds none.
  admission_ticket(admission_ticket&& other) noexcept;
  /// Releases this ticket's slot, then takes over `other`'s decision and slot.
  admission_ticket& operator=(admission_ticket&& other) noexcept;
  admission_ticket(const admission_ticket&) = delete;
  admission_ticket& operator=(const admission_ticket&) = delete;
  /// release().
  ~admission_ticket();

  /// True when every defence admitted the call.
  [[nodiscard]] bool admitted() const noexcept { return decision_ == admission::outcome::served; }
  /// admitted().
  explicit operator bool() const noexcept { return admitted(); }
  /// Which defence refused it (admission::outcome::served when admitted).
  [[nodiscard]] admission::outcome decision() const noexcept { return decision_; }
  /// The pushback a refusal carries: -1 ms for "do not retry", a positive delay for the
  /// concurrency limit; zero when admitted.
  [[nodiscard]] duration pushback() const noexcept { return pushback_; }
  /// The status to return from the handler for a refused call: UNAVAILABLE (retry-budget,
  /// drop-expired) or RESOURCE_EXHAUSTED (concurrency-limit), with the defence's message
  /// (admission::reply_for); OK when admitted.
  [[nodiscard]] ::grpc::Status refusal() const;
  /// Ends the call's hold on the concurrency limit now, with the latency since admission (once;
  /// later calls and the destructor do nothing). Call it where the handler's work ends when the
  /// ticket lives longer (a callback reactor).
  void release() noexcept;

 private:
  server_admission* owner_;
  admission::outcome decision_;
  time_point started_;
  bool holds_slot_;
  duration pushback_;
};

/// The status a handler returns for a call its defences decided `o` about: OK for served;
/// RESOURCE_EXHAUSTED for over_limit (the concurrency limit); UNAVAILABLE for every other
/// refusal or drop (admission::outcome), with admission::reply_for's message after
/// "stormguard admission: ". What admission_ticket::refusal() returns; public for servers whose
/// defences decide elsewhere (`stormguard serve --grpc`).
[[nodiscard]] STORMGUARD_EXPORT ::grpc::Status status_for(admission::outcome o);

/// The value of the trailer grpc-retry-pushback-ms (k_pushback_header) for a call answered `o`
/// (gRFC A6 "Pushback"): "-1" (do not retry) when admission::reply_for says so (retry_refused,
/// expired); else, when the server asks the client to wait `delay` (a Retry-After's delay), that
/// delay in whole milliseconds, rounded up, at least 0 and at most INT32_MAX (the trailer is an
/// int32); else none.
[[nodiscard]] STORMGUARD_EXPORT std::optional<std::string> pushback_for(
    admission::outcome o, std::optional<duration> delay);

/// Reads the call's attempt label (every grpc-previous-rpc-attempts and x-envoy-attempt-count
/// of its metadata, through stormguard::attempt_fields) and its deadline
/// (grpc::ServerContextBase::deadline(), converted to the admission's clock), runs the
/// defences, and for a refusal adds the trailer `grpc-retry-pushback-ms` (-1, or the delay in
/// whole milliseconds) to `context`. Returns the ticket; the handler returns ticket.refusal()
/// when it is refused. Works for grpc::ServerContext (synchronous and asynchronous services)
/// and grpc::CallbackServerContext alike. Thread-safe for distinct contexts.
///
/// Example (tests/integration/grpc_test.cpp, a synchronous service's handler):
/// \snippet grpc_test.cpp grpc_admit
[[nodiscard]] STORMGUARD_EXPORT admission_ticket admit(::grpc::ServerContextBase& context,
                                                       server_admission& admission);

}  // namespace stormguard::grpc

#endif  // STORMGUARD_GRPC_ADMISSION_HPP
