// SPDX-License-Identifier: Apache-2.0
/// \file
/// Client profiles: what a client sends with its attempts and what it honours in the server's
/// answers, for the clients a fleet really runs — most of which run no stormguard code and cannot
/// be changed. The simulator and the lab play a strategy's retries through its profile; a server's
/// defences see only what the profile sends (docs/admission.md, "Clients nobody can change").
///
/// A profile says nothing about *how often* or *how long* a client retries: that is its retry
/// policy (the strategy's backoff, retries and attempt timeout). policies/clients.json holds the
/// policies that go with the built-in profiles (go-retryablehttp's and curl's defaults).
///
/// The built-in profiles, each taken from its client's source or documentation:
///
/// \code{.unparsed}
///  name              attempt label               deadline  pushback  Retry-After  reuse  retries
///  stormguard        x-envoy-attempt-count       yes       yes       minimum      yes    yes
///  envoy             none                        no        no        ignore       yes    yes
///  grpc              grpc-previous-rpc-attempts  yes       yes       ignore       yes    yes
///  go-retryablehttp  none                        no        no        replace      yes    yes
///  curl              none                        no        no        replace      no     yes
///  browser-fetch     none                        no        no        ignore       yes    no
/// \endcode
///
/// - stormguard: this library's HTTP clients (docs/http.md): the attempt number in
///   x-envoy-attempt-count, the attempt's remaining time in grpc-timeout, gRFC A6's
///   grpc-retry-pushback-ms honoured, Retry-After as a minimum delay (retry_policy::decide),
///   kept-alive connections.
/// - envoy: Envoy's router with a route retry_policy and its defaults: x-envoy-attempt-count only
///   when the route sets include_request_attempt_count (default false); the deadline it sends
///   (x-envoy-expected-rq-timeout-ms) is not grpc-timeout, which is what a server here reads;
///   Retry-After only with rate_limited_retry_back_off configured (default: its own
///   exponential back-off); no gRFC A6 pushback (Envoy docs, "Router", "x-envoy-attempt-count",
///   "config.route.v3.RetryPolicy").
/// - grpc: gRPC's own retries from a service config (gRFC A6 "gRPC Retry Design"): attempts after
///   the first carry grpc-previous-rpc-attempts, the call's deadline goes out as grpc-timeout,
///   grpc-retry-pushback-ms is honoured (negative: stop; else the delay), HTTP Retry-After plays
///   no part, one HTTP/2 channel.
/// - go-retryablehttp: hashicorp/go-retryablehttp 0.7 defaults (client.go, DefaultBackoff and
///   DefaultRetryPolicy): no label, no deadline header (http.Client.Timeout is local), no
///   pushback; on a 429 or 503 with an integer Retry-After it sleeps exactly that many seconds,
///   with no cap, instead of its backoff; Go's pooled transport keeps connections alive.
/// - curl: `curl --retry N` in a script, one process per request (curl(1), --retry: since 7.66.0
///   a Retry-After decides when the next retry goes; no header of its own; each process opens its
///   own connection).
/// - browser-fetch: a browser's fetch() (the Fetch Standard): no retry of an HTTP answer at all,
///   no label, no deadline, no pushback; the browser keeps connections alive.
///
/// Header-only and constexpr: thread-safe, no allocation.
#ifndef STORMGUARD_CLIENT_PROFILE_HPP
#define STORMGUARD_CLIENT_PROFILE_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stormguard {

/// How a client says which attempt a request is.
enum class attempt_label : std::uint8_t {
  none,                    ///< it does not: every attempt looks like a first one to a server
  envoy_attempt_count,     ///< `x-envoy-attempt-count: N` (1 for the first attempt)
  grpc_previous_attempts,  ///< `grpc-previous-rpc-attempts: N-1` (absent on the first attempt)
};

/// What a client does with a Retry-After on an answer it retries (RFC 9110 §10.2.3).
enum class retry_after_use : std::uint8_t {
  /// Waits at least Retry-After: max(its backoff, Retry-After) (stormguard: retry_policy::decide,
  /// which also ends the call when Retry-After exceeds max_retry_after).
  minimum,
  /// Waits exactly Retry-After instead of its backoff, with no cap (go-retryablehttp, curl).
  replace,
  /// Its own backoff, as if no Retry-After came (Envoy's default, gRPC, browsers).
  ignore,
};

/// What one kind of client sends with its attempts and honours in the server's answers.
struct client_profile {
  /// Its name: a built-in's ("go-retryablehttp"), or k_custom_client_profile ("custom") for one
  /// a policy or scenario file spelled out. Shown in reports. Views static text only.
  std::string_view name = "stormguard";
  /// The attempt label it sends (what a server's retry budget can read).
  attempt_label label = attempt_label::envoy_attempt_count;
  /// Whether each attempt carries its caller's deadline as grpc-timeout (what drop-expired reads).
  bool sends_deadline = true;
  /// Whether it stops at a "do not retry" pushback (gRFC A6 grpc-retry-pushback-ms < 0; end
  /// reason server_refused). false: such an answer is a plain 503 to it.
  bool honours_pushback = true;
  /// What it does with a Retry-After (retry_after_use).
  retry_after_use retry_after = retry_after_use::minimum;
  /// Whether its attempts reuse kept-alive connections. false: a new connection per attempt (the
  /// lab opens one; the simulator's server model has no connection cost, so it changes nothing
  /// there).
  bool reuses_connections = true;
  /// Whether it retries at all. false: every request is one attempt, whatever the policy says
  /// (its retries and hedging are not played).
  bool retries = true;

  friend constexpr bool operator==(const client_profile&, const client_profile&) = default;
};

/// The name of a profile a file spelled out field by field (not a built-in's name).
inline constexpr std::string_view k_custom_client_profile = "custom";

/// How many built-in profiles there are.
inline constexpr std::size_t k_client_profile_count = 6;

/// The built-in profiles, in the order of the file comment's table (the first, "stormguard", is
/// the default everywhere).
inline constexpr std::array<client_profile, k_client_profile_count> k_client_profiles{{
    {.name = "stormguard"},
    {.name = "envoy",
     .label = attempt_label::none,
     .sends_deadline = false,
     .honours_pushback = false,
     .retry_after = retry_after_use::ignore},
    {.name = "grpc",
     .label = attempt_label::grpc_previous_attempts,
     .retry_after = retry_after_use::ignore},
    {.name = "go-retryablehttp",
     .label = attempt_label::none,
     .sends_deadline = false,
     .honours_pushback = false,
     .retry_after = retry_after_use::replace},
    {.name = "curl",
     .label = attempt_label::none,
     .sends_deadline = false,
     .honours_pushback = false,
     .retry_after = retry_after_use::replace,
     .reuses_connections = false},
    {.name = "browser-fetch",
     .label = attempt_label::none,
     .sends_deadline = false,
     .honours_pushback = false,
     .retry_after = retry_after_use::ignore,
     .retries = false},
}};

/// The built-in profile called `name` (exact, case-sensitive), or nullopt.
[[nodiscard]] constexpr std::optional<client_profile> find_client_profile(
    std::string_view name) noexcept {
  for (const client_profile& p : k_client_profiles) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

/// The label's spelling in files: "none", or its header's name ("x-envoy-attempt-count",
/// "grpc-previous-rpc-attempts").
[[nodiscard]] constexpr std::string_view label_name(attempt_label l) noexcept {
  switch (l) {
    case attempt_label::envoy_attempt_count:
      return "x-envoy-attempt-count";
    case attempt_label::grpc_previous_attempts:
      return "grpc-previous-rpc-attempts";
    case attempt_label::none:
      break;
  }
  return "none";
}

/// The use's spelling in files: "minimum", "replace" or "ignore".
[[nodiscard]] constexpr std::string_view retry_after_use_name(retry_after_use u) noexcept {
  switch (u) {
    case retry_after_use::replace:
      return "replace";
    case retry_after_use::ignore:
      return "ignore";
    case retry_after_use::minimum:
      break;
  }
  return "minimum";
}

}  // namespace stormguard

#endif  // STORMGUARD_CLIENT_PROFILE_HPP
