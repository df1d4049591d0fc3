// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retry budgets and throttles, the ceiling on how much extra load retries
/// (and, for adaptive throttling, first attempts) may add.
///
/// A budget is shared by every call a client (or a proxy) makes. The share of retries in all
/// traffic has a hard ceiling (Google SRE book, chapter 21: a per-client retry budget); beyond it a
/// call fails fast instead of retrying. The retry executor (retry.hpp) and the storm simulator talk
/// to every budget through the `stormguard::retry_budget` concept, three calls per logical request:
///
/// \code{.unparsed}
///  b.try_admit(now, g)              before the first attempt; false = rejected locally (only
///                                   adaptive_throttle ever says false; the call ends with
///                                   end_reason::throttled and no attempt)
///  b.try_withdraw(now, status, g)   before each retry; false = fail fast (budget_exhausted)
///  b.record(now, report)            after each attempt, with how it ended
/// \endcode
///
/// Five algorithms, each as published:
///
/// \code{.unparsed}
///  ratio_budget           Finagle's RetryBudget (Linkerd): retries <= ratio · requests over a
///                         sliding window, plus a floor per second. The default.
///  token_bucket_throttle  gRPC retry throttling (gRFC A6): failures drain a bucket, successes
///                         refill it; no retries while it is half empty or less.
///  retry_quota            the AWS SDKs' "standard" retry mode: a retry costs 5 tokens (10 after
///                         a timeout) out of 500; a success pays back.
///  adaptive_throttle      Google SRE book, "Handling Overload": rejects requests (first attempts
///                         too) locally with probability max(0, (requests - K·accepts) /
///                         (requests + 1)) over the last 2 minutes.
///  concurrency_budget     Envoy's retry budget: retries in flight <= max(3, 20 % of the
///                         logical requests in flight).
/// \endcode
///
/// The kinds are one list, stormguard::budget_options in budget_kinds.hpp: each options type below
/// names its kind ("ratio", "token_bucket", "quota", "adaptive", "concurrency"; "none" for
/// no_budget), its class and its settings, and any_budget holds a budget of any kind.
///
/// Time is passed in (read from the caller's stormguard::clock), so a budget never reads a clock;
/// randomness (adaptive_throttle only) comes from the caller's generator. Every budget here is
/// thread-safe (atomics or one short critical section) and exposes its state for observability.
///
/// \code{.cpp}
///  stormguard::ratio_budget budget;                 // 10 % of requests over 10 s, floor 10/s
///  stormguard::retrier retry(policy, clock, rng, budget);
/// \endcode
#ifndef STORMGUARD_BUDGET_HPP
#define STORMGUARD_BUDGET_HPP

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/detail/empty_braces.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/sliding_window.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard {

class ratio_budget;
class token_bucket_throttle;
class retry_quota;
class adaptive_throttle;
class concurrency_budget;

/// How one attempt ended, as a budget sees it. The retrier derives it from the attempt's result
/// and the classifier's verdict (classify.hpp); the simulator from its model.
enum class attempt_status : unsigned char {
  success,        ///< the attempt succeeded
  failure,        ///< it failed with an error the classifier retries, other than a timeout
  timeout,        ///< it failed with a timeout the classifier retries (classification::timeout())
  not_retryable,  ///< it failed with an error the classifier does not retry (verdict stop): the
                  ///< server answered, but not with success (a 404, a validation error)
};

/// "success", "failure", "timeout", "not_retryable"; "unknown" outside the enum.
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(attempt_status s) noexcept;

/// What a budget is told after each attempt (retry_budget::record).
struct attempt_report {
  attempt_status status = attempt_status::success;  ///< how the attempt ended
  int attempt = 1;  ///< its number within the logical request: 1 = first attempt, 2 = first retry
  /// For a retry (attempt > 1): how the previous attempt, the one this retry retries, ended
  /// (failure or timeout), which is what the retry was charged for (retry_quota refunds that
  /// cost on success). success for the first attempt.
  attempt_status previous_status = attempt_status::success;

  friend constexpr bool operator==(const attempt_report&, const attempt_report&) = default;
};

/// What the executor and the simulator require of a retry budget used with generator type G.
/// Every call must be thread-safe when the budget is shared between threads.
///  - try_admit(now, g): a logical request asks to send its first attempt. false = rejected
///    locally, no attempt is sent. Counts the request (ratio_budget deposits here).
///  - try_withdraw(now, status, g): may one retry be sent now, after a failed attempt that ended
///    with `status` (failure or timeout)? true spends it; false means fail fast.
///  - record(now, report): an attempt ended (every attempt, first or retry).
///
/// Two more members are optional, for a budget that bounds what is in flight (see
/// budget_protocol.hpp, which calls them exactly once each): retry_ended(now), when a granted
/// retry's attempt ends or the request ends before it runs, and request_ended(now), when an
/// admitted logical request ends, however it ends. Executors never call the budget directly:
/// they go through stormguard::request_budget, so that every executor calls it in one order.
template <class B, class G = random_generator>
concept retry_budget = bit_generator<G> &&
    requires(B& b, time_point now, G& g, attempt_status s, const attempt_report& report) {
  { b.try_admit(now, g) } -> std::same_as<bool>;
  { b.try_withdraw(now, s, g) } -> std::same_as<bool>;
  b.record(now, report);
};

/// The absent budget: admits every request and grants every retry. Free: every call inlines to
/// nothing.
struct no_budget {
  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "none";
  /// It is its own options and its own class.
  using budget_type = no_budget;
  /// The options it is built from: itself (every budget class names its options type).
  using options_type = no_budget;
  /// No settings (see ratio_budget_options::fields).
  template <class Self, class F>
  static constexpr void fields(Self&, F&&) noexcept {}

  template <class G>
  /// Admits every first attempt: returns true.
  [[nodiscard]] constexpr bool try_admit(time_point, G&) noexcept {
    return true;
  }
  template <class G>
  /// Grants every retry: returns true.
  [[nodiscard]] constexpr bool try_withdraw(time_point, attempt_status, G&) noexcept {
    return true;
  }
  /// Does nothing.
  constexpr void record(time_point, const attempt_report&) noexcept {}
  friend constexpr bool operator==(const no_budget&, const no_budget&) noexcept = default;
};

/// The settings of a ratio_budget. Defaults: 10 % (the Google SRE book, chapter 21) over 10 s, and
/// a floor of 10 retries per second (Finagle's RetryBudget and Linkerd's window and floor).
struct ratio_budget_options {
  /// Retries allowed per logical request, over the window: 0.1 = 10 %. In [0, 1000] (Finagle's
  /// range); resolved to 1e-6 (a deposit is round(ratio · 10^6) micro-retries). A non-zero ratio
  /// that rounds to 0 (below 5e-7) is rejected rather than treated as 0. ratio 0 is valid and
  /// means "only the floor": no deposits, so the retries are exactly the reserve of
  /// min_retries_per_second (with a floor of 0 as well, no retry is ever granted).
  double ratio = 0.1;
  /// The sliding window over which deposits and withdrawals count. In [1 s, 60 s] (Finagle's
  /// range); kept as slices of window/10, so the window moves in steps of window/10 (see
  /// ratio_budget).
  duration window = std::chrono::seconds(10);
  /// Retries allowed per second even with no deposits (the reserve is min_retries_per_second ·
  /// window, in seconds, per window). >= 0 and <= 1,000,000. Per budget instance: a fleet of N
  /// clients, each with its own budget, adds up to N · min_retries_per_second retries per second.
  std::int64_t min_retries_per_second = 10;

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "ratio";
  /// The class these options build.
  using budget_type = ratio_budget;
  /// Calls f(name, field, lo, hi) for each setting, in file order: its name in policy files,
  /// a reference to it (const when `o` is), and its valid range [lo, hi] (of the field's type).
  /// A range may depend on a setting listed before it. Policy files are read and written
  /// through this list (stormguard::config); the class constructor's validation stays the rule.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("ratio", o.ratio, 0.0, 1000.0);
    f("window", o.window, duration(std::chrono::seconds(1)), duration(std::chrono::seconds(60)));
    f("min_retries_per_second", o.min_retries_per_second, std::int64_t{0}, std::int64_t{1'000'000});
  }

  friend bool operator==(const ratio_budget_options&, const ratio_budget_options&) = default;
};

/// The retry budget of Finagle (com.twitter.finagle.service.RetryBudget) and Linkerd.
///
/// Over a sliding window of `window`, in integer micro-retries:
///
/// \code{.unparsed}
///  balance = Σ deposits − Σ withdrawals (both within the window) + reserve
///  deposit  = round(ratio · 10^6) per logical request
///  withdraw = 10^6 per retry, allowed only while balance >= 10^6
///  reserve  = min_retries_per_second · window(s) · 10^6
/// \endcode
///
/// The window is kept as slices of window/10 (rounded up to a nanosecond) in a ring of 11: the
/// current slice and the 10 whole slices before it. A deposit or a withdrawal therefore counts
/// for at least window and at most window + window/10. Because a withdrawal counts for at least
/// window, the last retry granted in any span of window was granted against a balance that included
/// all the others, so with t the instant of that last retry, the retries granted in the span are at
/// most
///
/// \code{.unparsed}
///  ratio · (requests in (t − window − window/10, t]) + min_retries_per_second · window
/// \endcode
///
/// With steady traffic: ratio · (requests in the window and the window/10 before it) + the reserve.
///
/// Thread-safe: deposit and try_withdraw take one short critical section (a mutex around the
/// 11-slot ring). Times passed in may come from several threads slightly out of order; a time
/// older than the newest seen counts in the newest slice. Consequently one time far ahead of the
/// others (time_point::max(), a clock from another epoch) moves the window there, and nothing
/// expires until the times passed in catch up: pass times from one steady clock.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp ratio_budget
class STORMGUARD_EXPORT ratio_budget {
 public:
  /// The options type that builds it (its kind: ratio_budget_options::kind).
  using options_type = ratio_budget_options;
  /// The scale of the integer arithmetic: one retry = 10^6 micro-retries.
  static constexpr std::int64_t k_scale = 1'000'000;
  /// The number of slices the window is kept as (Finagle's WindowedAdder uses 10).
  static constexpr int k_slices = 10;
  /// The slots of the ring: the current, partly elapsed slice plus k_slices whole ones. With only
  /// k_slices slots a retry granted late in a slice expired up to a slice early, so two
  /// reserves' worth of retries fitted in less than one window (found by budget_test's window
  /// bound).
  static constexpr int k_ring = k_slices + 1;

  /// Validates `options`; throws std::invalid_argument naming the field and the value when
  /// ratio is NaN, outside [0, 1000] or non-zero but below 5e-7, window is outside [1 s, 60 s], or
  /// min_retries_per_second is outside [0, 1,000,000].
  /// `ratio_budget({})` is the same as `ratio_budget()`.
  explicit ratio_budget(ratio_budget_options options = {});
  /// \cond
  // `ratio_budget({})`: the defaults, as ratio_budget().
  ratio_budget(detail::empty_braces) : ratio_budget(ratio_budget_options{}) {}
  /// \endcond

  ratio_budget(const ratio_budget&) = delete;
  ratio_budget& operator=(const ratio_budget&) = delete;

  /// Records one logical request at `now`: adds the ratio's deposit to the current slice.
  void deposit(time_point now) noexcept;
  /// Records `count` logical requests at `now` at once, as `count` calls of deposit(now) would
  /// (count <= 0: nothing; above 10^9 it is taken as 10^9, so the sum cannot overflow).
  void deposit(time_point now, std::int64_t count) noexcept;

  /// Asks for one retry at `now`. Returns true and withdraws one retry when the balance holds at
  /// least one; returns false (and changes nothing) otherwise.
  [[nodiscard]] bool try_withdraw(time_point now) noexcept;

  /// deposit(deposit_at, count) and then try_withdraw(now) under one critical section, for a
  /// caller that batches first attempts (a server's retry admission: one lock per retry instead
  /// of two). Same ranges as the two calls; count <= 0 deposits nothing.
  [[nodiscard]] bool deposit_and_try_withdraw(time_point deposit_at, std::int64_t count,
                                              time_point now) noexcept;

  /// retry_budget: deposit(now), then true (a ratio budget never rejects a first attempt).
  template <class G>
  [[nodiscard]] bool try_admit(time_point now, G&) noexcept {
    deposit(now);
    return true;
  }
  /// retry_budget: try_withdraw(now); the status and the generator play no part.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point now, attempt_status, G&) noexcept {
    return try_withdraw(now);
  }
  /// retry_budget: nothing (Finagle's budget counts requests and retries, not their outcomes).
  void record(time_point, const attempt_report&) noexcept {}

  /// The whole retries that try_withdraw would grant at `now`, if nothing else happened
  /// (floor(balance / 10^6), never negative). For observability; thread-safe.
  [[nodiscard]] std::int64_t balance(time_point now) const noexcept;

  /// The retries it would grant now (balance(now)), for the budget level gauge.
  [[nodiscard]] double level(time_point now) const noexcept {
    return static_cast<double>(balance(now));
  }

  /// The validated settings.
  [[nodiscard]] const ratio_budget_options& options() const noexcept { return options_; }

 private:
  ratio_budget_options options_;
  std::int64_t deposit_amount_;
  std::int64_t reserve_;

  bool withdraw_locked(time_point now) noexcept STORMGUARD_REQUIRES(mutex_);

  mutable detail::mutex mutex_;
  mutable detail::sliding_window<std::int64_t, k_slices> window_ STORMGUARD_GUARDED_BY(mutex_);
};

/// The settings of a token_bucket_throttle: gRPC's retryThrottling service-config object. The
/// defaults are gRPC's documented example (maxTokens 10, tokenRatio 0.1); gRPC itself has none.
struct token_bucket_throttle_options {
  /// The bucket's size; it starts full. In (0, 1000] with at most 3 decimal places (gRFC A6);
  /// more decimals are an error, not rounded.
  double max_tokens = 10.0;
  /// Tokens added by each success. > 0, at most 1000, at most 3 decimal places.
  double token_ratio = 0.1;

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "token_bucket";
  /// The class these options build.
  using budget_type = token_bucket_throttle;
  /// Calls f(name, field, lo, hi) for each setting, in file order: its name in policy files,
  /// a reference to it (const when `o` is), and its valid range [lo, hi] (of the field's type).
  /// A range may depend on a setting listed before it. Policy files are read and written
  /// through this list (stormguard::config); the class constructor's validation stays the rule.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("max_tokens", o.max_tokens, 0.001, 1000.0);
    f("token_ratio", o.token_ratio, 0.001, 1000.0);
  }

  friend bool operator==(const token_bucket_throttle_options&,
                         const token_bucket_throttle_options&) = default;
};

/// gRPC's client-side retry throttling (gRFC A6 "gRPC Retry Design", section "Throttling Retry
/// Attempts and Hedged RPCs"), per server:
///
/// \code{.unparsed}
///  tokens starts at max_tokens and stays in [0, max_tokens]
///  each failed attempt (failure or timeout)   tokens -= 1
///  each successful attempt                    tokens += token_ratio
///  a retry is allowed only while              tokens > max_tokens / 2
/// \endcode
///
/// As in gRPC, a failure the classifier does not retry (not_retryable) changes nothing, the
/// failure is recorded before the retry is asked for (record, then try_withdraw), and a retry
/// consumes nothing by itself: it is its failure that drains the bucket. First attempts are
/// never throttled. With every attempt failing from a full bucket, exactly
/// ceil(max_tokens / 2) − 1 retries are granted (4 with the defaults), then none until
/// successes refill the bucket above half.
///
/// Kept in integer milli-tokens (gRFC A6's three decimals), in one std::atomic: lock-free,
/// thread-safe; no clock involved (time plays no part in gRPC's algorithm).
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp token_bucket_throttle
class STORMGUARD_EXPORT token_bucket_throttle {
 public:
  /// The options type that builds it (its kind: token_bucket_throttle_options::kind).
  using options_type = token_bucket_throttle_options;
  /// Validates `options`; throws std::invalid_argument naming the field and the value when
  /// max_tokens is NaN or outside (0, 1000], token_ratio is NaN or outside (0, 1000], or either
  /// has more than 3 decimal places.
  /// `token_bucket_throttle({})` is the same as `token_bucket_throttle()`.
  explicit token_bucket_throttle(token_bucket_throttle_options options = {});
  /// \cond
  // `token_bucket_throttle({})`: the defaults, as token_bucket_throttle().
  token_bucket_throttle(detail::empty_braces)
      : token_bucket_throttle(token_bucket_throttle_options{}) {}
  /// \endcond

  token_bucket_throttle(const token_bucket_throttle&) = delete;
  token_bucket_throttle& operator=(const token_bucket_throttle&) = delete;

  /// retry_budget: always true (gRPC throttles retries and hedges, never first attempts).
  template <class G>
  [[nodiscard]] bool try_admit(time_point, G&) noexcept {
    return true;
  }
  /// retry_budget: true while tokens > max_tokens / 2; changes nothing.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point, attempt_status, G&) noexcept {
    return retry_allowed();
  }
  /// retry_budget: success adds token_ratio (up to max_tokens); failure and timeout take 1 (down
  /// to 0); not_retryable changes nothing.
  void record(time_point now, const attempt_report& report) noexcept;

  /// True while tokens > max_tokens / 2.
  [[nodiscard]] bool retry_allowed() const noexcept;
  /// The tokens now, in milli-tokens (exact), in [0, max_tokens · 1000].
  [[nodiscard]] std::int64_t milli_tokens() const noexcept;
  /// The tokens now (milli_tokens() / 1000).
  [[nodiscard]] double tokens() const noexcept;
  /// max_tokens in milli-tokens (exact).
  [[nodiscard]] std::int64_t max_milli_tokens() const noexcept { return max_milli_; }

  /// tokens(), for the budget level gauge.
  [[nodiscard]] double level(time_point) const noexcept { return tokens(); }

  /// The validated settings.
  [[nodiscard]] const token_bucket_throttle_options& options() const noexcept { return options_; }

 private:
  token_bucket_throttle_options options_;
  std::int64_t max_milli_;
  std::int64_t ratio_milli_;
  std::atomic<std::int64_t> milli_tokens_;
};

/// The settings of a retry_quota. Defaults: the AWS SDKs' "standard" retry mode (the AWS SDKs
/// and Tools Reference Guide, "Retry behavior"; e.g. aws-sdk-go-v2 retry.NewStandard).
struct retry_quota_options {
  /// The quota's capacity; it starts full. In [1, 1,000,000,000]. AWS: 500.
  std::int64_t max_tokens = 500;
  /// Tokens a retry costs after a failure other than a timeout. In [0, max_tokens]. AWS: 5.
  /// 0 makes such retries free: the quota then never denies them.
  std::int64_t retry_cost = 5;
  /// Tokens a retry costs after a timeout. In [0, max_tokens]. AWS: 10. 0 makes them free.
  std::int64_t timeout_cost = 10;
  /// Tokens a success on the first attempt returns. In [0, max_tokens]. AWS: 1.
  std::int64_t no_retry_increment = 1;

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "quota";
  /// The class these options build.
  using budget_type = retry_quota;
  /// Calls f(name, field, lo, hi) for each setting, in file order: its name in policy files,
  /// a reference to it (const when `o` is), and its valid range [lo, hi] (of the field's type).
  /// A range may depend on a setting listed before it. Policy files are read and written
  /// through this list (stormguard::config); the class constructor's validation stays the rule.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("max_tokens", o.max_tokens, std::int64_t{1}, std::int64_t{1'000'000'000});
    f("retry_cost", o.retry_cost, std::int64_t{0}, std::int64_t{o.max_tokens});
    f("timeout_cost", o.timeout_cost, std::int64_t{0}, std::int64_t{o.max_tokens});
    f("no_retry_increment", o.no_retry_increment, std::int64_t{0}, std::int64_t{o.max_tokens});
  }

  friend bool operator==(const retry_quota_options&, const retry_quota_options&) = default;
};

/// The AWS SDKs' client-side retry quota ("standard" retry mode), per client:
///
/// \code{.unparsed}
///  tokens starts at max_tokens and stays in [0, max_tokens]
///  a retry after a failure      costs retry_cost (5); after a timeout timeout_cost (10);
///                               denied (fail fast) when tokens < cost, and then costs nothing
///  a success on a first attempt returns no_retry_increment (1)
///  a success on a retry         returns what that retry cost (5 or 10)
///  a failure                    returns nothing
/// \endcode
///
/// With every attempt failing the quota grants floor(max_tokens / cost) retries in all, then
/// none until successes pay back. One std::atomic (compare-and-swap): lock-free, thread-safe; no
/// clock involved (the AWS algorithm has no time in it).
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp retry_quota
class STORMGUARD_EXPORT retry_quota {
 public:
  /// The options type that builds it (its kind: retry_quota_options::kind).
  using options_type = retry_quota_options;
  /// Validates `options`; throws std::invalid_argument naming the field and the value when
  /// max_tokens is outside [1, 1e9] or a cost or the increment is outside [0, max_tokens].
  /// `retry_quota({})` is the same as `retry_quota()`.
  explicit retry_quota(retry_quota_options options = {});
  /// \cond
  // `retry_quota({})`: the defaults, as retry_quota().
  retry_quota(detail::empty_braces) : retry_quota(retry_quota_options{}) {}
  /// \endcond

  retry_quota(const retry_quota&) = delete;
  retry_quota& operator=(const retry_quota&) = delete;

  /// retry_budget: always true (the quota prices retries only).
  template <class G>
  [[nodiscard]] bool try_admit(time_point, G&) noexcept {
    return true;
  }
  /// retry_budget: takes the retry's cost (timeout_cost after a timeout, retry_cost otherwise)
  /// when the quota holds it; otherwise false and nothing changes.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point, attempt_status status, G&) noexcept {
    return try_acquire(cost_of(status));
  }
  /// retry_budget: a success returns no_retry_increment (first attempt) or the cost of the retry
  /// it came on (report.previous_status), up to max_tokens; any other status changes nothing.
  void record(time_point now, const attempt_report& report) noexcept;

  /// What a retry after a failed attempt with `status` costs: timeout_cost for timeout,
  /// retry_cost otherwise.
  [[nodiscard]] std::int64_t cost_of(attempt_status status) const noexcept {
    return status == attempt_status::timeout ? options_.timeout_cost : options_.retry_cost;
  }
  /// The tokens now, in [0, max_tokens].
  [[nodiscard]] std::int64_t available() const noexcept;

  /// available(), for the budget level gauge.
  [[nodiscard]] double level(time_point) const noexcept { return static_cast<double>(available()); }

  /// The validated settings.
  [[nodiscard]] const retry_quota_options& options() const noexcept { return options_; }

 private:
  bool try_acquire(std::int64_t cost) noexcept;
  retry_quota_options options_;
  std::atomic<std::int64_t> tokens_;
};

/// The settings of an adaptive_throttle. Defaults: the SRE book's (2 minutes, K = 2).
struct adaptive_throttle_options {
  /// The window over which requests and accepts count. In [1 s, 1 h]; kept as 60 slices of
  /// window/60, so it moves in steps of window/60 (2 s by default). SRE book: 2 minutes.
  duration window = std::chrono::minutes(2);
  /// The multiplier K: the throttle starts rejecting once requests exceed K · accepts. In
  /// [1, 1000] (below 1 it would reject even when every request is accepted). SRE book: 2;
  /// lower is more aggressive.
  double k = 2.0;
  /// The term added to requests in the denominator. In [1, 1,000,000]. SRE book: 1. A larger
  /// padding damps rejections while the window holds few requests — at a cold start, when the
  /// first requests are still in flight (not yet accepted), the book's formula already rejects
  /// the second request with probability 1/2. gRPC's RLS client (grpc-go
  /// balancer/rls/internal/adaptive) uses 8.
  double requests_padding = 1.0;

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "adaptive";
  /// The class these options build.
  using budget_type = adaptive_throttle;
  /// Calls f(name, field, lo, hi) for each setting, in file order: its name in policy files,
  /// a reference to it (const when `o` is), and its valid range [lo, hi] (of the field's type).
  /// A range may depend on a setting listed before it. Policy files are read and written
  /// through this list (stormguard::config); the class constructor's validation stays the rule.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("window", o.window, duration(std::chrono::seconds(1)), duration(std::chrono::hours(1)));
    f("k", o.k, 1.0, 1000.0);
    f("requests_padding", o.requests_padding, 1.0, 1e6);
  }

  friend bool operator==(const adaptive_throttle_options&,
                         const adaptive_throttle_options&) = default;
};

/// Adaptive client-side throttling, Google SRE book (Beyer et al., 2016), chapter 21 "Handling
/// Overload", section "Client-side throttling". Over the last `window`:
///
/// \code{.unparsed}
///  requests  = attempts this client tried to send (first attempts and retries, including the
///              ones it then rejected locally)
///  accepts   = attempts the backend accepted: success, and not_retryable (the backend answered;
///              only failures the classifier retries, and timeouts, count as not accepted)
///  p         = max(0, (requests − K · accepts) / (requests + requests_padding))
/// \endcode
///
/// (requests_padding = 1 in the book; see adaptive_throttle_options for the cold-start effect.)
///
/// Every new attempt (try_admit for a first attempt, try_withdraw for a retry) is counted as a
/// request, then rejected locally with probability p (one draw of uniform_unit(g) when p > 0; no
/// draw at all when p = 0). A rejected first attempt ends the call with end_reason::throttled,
/// a rejected retry with budget_exhausted. p is computed from the counts before this request.
///
/// Thread-safe: one short critical section (a mutex around a 61-slot ring with running totals);
/// the draw happens outside it. As with ratio_budget, a time older than the newest seen counts in
/// the newest slice, so one time far ahead of the others freezes the window until the times
/// passed in catch up: pass times from one steady clock.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp adaptive_throttle
class STORMGUARD_EXPORT adaptive_throttle {
 public:
  /// The options type that builds it (its kind: adaptive_throttle_options::kind).
  using options_type = adaptive_throttle_options;
  /// The number of slices the window is kept as.
  static constexpr int k_slices = 60;

  /// Validates `options`; throws std::invalid_argument naming the field and the value when the
  /// window is outside [1 s, 1 h], k is NaN or outside [1, 1000], or requests_padding is NaN or
  /// outside [1, 1,000,000].
  /// `adaptive_throttle({})` is the same as `adaptive_throttle()`.
  explicit adaptive_throttle(adaptive_throttle_options options = {});
  /// \cond
  // `adaptive_throttle({})`: the defaults, as adaptive_throttle().
  adaptive_throttle(detail::empty_braces) : adaptive_throttle(adaptive_throttle_options{}) {}
  /// \endcond

  adaptive_throttle(const adaptive_throttle&) = delete;
  adaptive_throttle& operator=(const adaptive_throttle&) = delete;

  /// retry_budget: counts a request; rejects it with probability p (see the class).
  template <bit_generator G>
  [[nodiscard]] bool try_admit(time_point now, G& g) {
    const double p = count_request(now);
    return p <= 0.0 || uniform_unit(g) >= p;
  }
  /// retry_budget: the same as try_admit (a retry is a request too); the status plays no part.
  template <bit_generator G>
  [[nodiscard]] bool try_withdraw(time_point now, attempt_status, G& g) {
    return try_admit(now, g);
  }
  /// retry_budget: success and not_retryable count an accept; failure and timeout nothing.
  void record(time_point now, const attempt_report& report) noexcept;

  /// The probability that a request sent at `now` is rejected, in [0, 1).
  [[nodiscard]] double rejection_probability(time_point now) const noexcept;
  /// The requests counted in the window at `now`.
  [[nodiscard]] std::int64_t requests(time_point now) const noexcept;
  /// The accepts counted in the window at `now`.
  [[nodiscard]] std::int64_t accepts(time_point now) const noexcept;

  /// The validated settings.
  [[nodiscard]] const adaptive_throttle_options& options() const noexcept { return options_; }

  /// max(0, (requests − k · accepts) / (requests + padding)): the SRE book's formula, in one
  /// place. Expects what the class passes: requests >= 0, accepts >= 0, k >= 1, padding >= 1,
  /// for which the result is in [0, 1). Other arguments are not checked (the function is on the
  /// hot path and noexcept); the result is then meaningless (it may exceed 1, or be infinite).
  [[nodiscard]] static double probability(std::int64_t requests, std::int64_t accepts, double k,
                                          double padding = 1.0) noexcept;

 private:
  struct counts {
    std::int64_t requests = 0;
    std::int64_t accepts = 0;
    counts& operator+=(const counts& o) noexcept {
      requests += o.requests;
      accepts += o.accepts;
      return *this;
    }
    counts& operator-=(const counts& o) noexcept {
      requests -= o.requests;
      accepts -= o.accepts;
      return *this;
    }
  };
  // Counts one request at `now` and returns the rejection probability before it.
  double count_request(time_point now) noexcept;

  adaptive_throttle_options options_;
  mutable detail::mutex mutex_;
  mutable detail::sliding_window<counts, k_slices> window_ STORMGUARD_GUARDED_BY(mutex_);
};

/// The settings of a concurrency_budget. Defaults: Envoy's (envoy.config.cluster.v3.
/// CircuitBreakers.Thresholds.RetryBudget: budget_percent 20 %, min_retry_concurrency 3).
struct concurrency_budget_options {
  /// Retries in flight allowed, as a percentage of the active logical requests. In [0, 100]
  /// (Envoy's Percent type). Envoy: 20.
  double budget_percent = 20.0;
  /// Retries in flight always allowed, whatever the active requests. In [0, 1,000,000]. Envoy: 3.
  std::int64_t min_retry_concurrency = 3;

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "concurrency";
  /// The class these options build.
  using budget_type = concurrency_budget;
  /// Calls f(name, field, lo, hi) for each setting, in file order: its name in policy files,
  /// a reference to it (const when `o` is), and its valid range [lo, hi] (of the field's type).
  /// A range may depend on a setting listed before it. Policy files are read and written
  /// through this list (stormguard::config); the class constructor's validation stays the rule.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("budget_percent", o.budget_percent, 0.0, 100.0);
    f("min_retry_concurrency", o.min_retry_concurrency, std::int64_t{0}, std::int64_t{1'000'000});
  }

  friend bool operator==(const concurrency_budget_options&,
                         const concurrency_budget_options&) = default;
};

/// Envoy's retry budget (envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget;
/// Envoy's ResourceManagerImpl::RetryBudgetImpl): a limit on the retries *in flight*, not on a
/// rate:
///
/// \code{.unparsed}
///  limit  = max(min_retry_concurrency, floor(budget_percent / 100 · active))
///  a retry is granted only while retries in flight < limit
/// \endcode
///
/// "active" = logical requests admitted (try_admit) and not yet ended (request_ended): Envoy
/// counts its active plus pending requests. A retry is in flight from its grant (try_withdraw),
/// through its backoff, until its attempt ends or its request ends before it runs
/// (retry_ended), as Envoy's retry state holds its `retries` resource. Those two ends come from
/// the budget protocol (request_budget in budget_protocol.hpp), which every stormguard executor
/// uses: do not call them by hand.
///
/// Unlike the window-based budgets, nothing here depends on time, and a budget does not recover
/// "later": it frees a slot as soon as a retry ends. With few requests in flight the floor
/// (3 by default) is what bounds the retries; with many, 20 % of them.
///
/// Thread-safe and lock-free: two std::atomic counters; a grant is one compare-and-swap against
/// the limit computed from the active count read just before (so a grant racing with a request
/// that ends may exceed the new, lower limit by the number of racing grants, as in Envoy).
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp concurrency_budget
class STORMGUARD_EXPORT concurrency_budget {
 public:
  /// The options type that builds it (its kind: concurrency_budget_options::kind).
  using options_type = concurrency_budget_options;
  /// Validates `options`; throws std::invalid_argument naming the field and the value when
  /// budget_percent is NaN or outside [0, 100], or min_retry_concurrency is outside
  /// [0, 1,000,000].
  /// `concurrency_budget({})` is the same as `concurrency_budget()`.
  explicit concurrency_budget(concurrency_budget_options options = {});
  /// \cond
  // `concurrency_budget({})`: the defaults, as concurrency_budget().
  concurrency_budget(detail::empty_braces) : concurrency_budget(concurrency_budget_options{}) {}
  /// \endcond

  concurrency_budget(const concurrency_budget&) = delete;
  concurrency_budget& operator=(const concurrency_budget&) = delete;

  /// retry_budget: counts the request as active; always true.
  template <class G>
  [[nodiscard]] bool try_admit(time_point, G&) noexcept {
    active_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  /// retry_budget: grants a retry (one more in flight) while fewer than limit() are in flight.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point, attempt_status, G&) noexcept {
    return try_acquire();
  }
  /// retry_budget: nothing (only what is in flight counts).
  void record(time_point, const attempt_report&) noexcept {}
  /// budget protocol: a granted retry ended (its attempt ended, or its request ended first).
  void retry_ended(time_point) noexcept { retries_.fetch_sub(1, std::memory_order_relaxed); }
  /// budget protocol: an admitted request ended.
  void request_ended(time_point) noexcept { active_.fetch_sub(1, std::memory_order_relaxed); }

  /// Logical requests admitted and not ended.
  [[nodiscard]] std::int64_t active() const noexcept {
    return active_.load(std::memory_order_relaxed);
  }
  /// Retries granted and not ended.
  [[nodiscard]] std::int64_t retries_in_flight() const noexcept {
    return retries_.load(std::memory_order_relaxed);
  }
  /// max(min_retry_concurrency, floor(budget_percent / 100 · active())).
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_for(active()); }
  /// The limit for `active` requests (the formula, in one place).
  [[nodiscard]] std::int64_t limit_for(std::int64_t active) const noexcept;

  /// limit() − retries_in_flight(): the retries it would grant now, for the budget level gauge.
  [[nodiscard]] double level(time_point) const noexcept {
    return static_cast<double>(limit() - retries_in_flight());
  }

  /// The validated settings.
  [[nodiscard]] const concurrency_budget_options& options() const noexcept { return options_; }

 private:
  bool try_acquire() noexcept;
  concurrency_budget_options options_;
  std::atomic<std::int64_t> active_{0};
  std::atomic<std::int64_t> retries_{0};
};

}  // namespace stormguard

#endif  // STORMGUARD_BUDGET_HPP
