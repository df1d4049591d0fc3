// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retry policies as files — the one policy format of the library,
/// every command (`simulate --policy`, `plan`, `exec`, `http`) and the simulator — and the
/// importers of what teams already run: a gRPC service config (gRFC A6) and an Envoy route
/// retry_policy (JSON or YAML) with its cluster's retry_budget. The reverse, a policy written as
/// those formats and as a Linkerd ServiceProfile, is stormguard/config/export.hpp.
///
/// A policy file is JSON, read strictly: unknown and duplicate fields are errors, and every error
/// names the field path (`policies[0].backoff.base`), its valid range and the value as written.
/// The schema, every default and the import tables are in docs/policy.md.
///
/// \code{.unparsed}
///  {"policies": [{"name": "ours", "retries": 3,
///                 "backoff": {"base": "100ms", "cap": "3s", "jitter": "full"},
///                 "budget": {"kind": "ratio", "ratio": 0.1}}]}
/// \endcode
///
/// \code{.cpp}
///  auto policies = stormguard::config::load_policies("policies/recommended.json");
///  if (!policies) { std::cerr << policies.error().message << '\n'; return 2; }
///  auto selected = stormguard::config::select_policy(*policies, "ours");
///  if (!selected) { std::cerr << selected.error().message << '\n'; return 2; }
///  const stormguard::config::policy& p = *selected;
///  stormguard::retry_policy policy(p.retry);                 // backoff, retries, Retry-After
///  stormguard::any_budget budget(p.budget);                  // the budget of its kind
///  stormguard::http::client_options http;                    // or the HTTP client's options
///  http.retry = p.retry;
///  http.statuses = p.statuses;
/// \endcode
///
/// Errors are values: every parser and loader returns an outcome holding the policies or a
/// policy_error (stormguard::input_error: the field path and the message), and throws nothing for
/// bad input. Everything here is a plain value: thread-safe to read from several threads; the
/// functions keep no state.
#ifndef STORMGUARD_CONFIG_POLICY_HPP
#define STORMGUARD_CONFIG_POLICY_HPP

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/client_profile.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/config/grpc_codes.hpp"
#include "stormguard/config/hedging.hpp"
#include "stormguard/export.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/input_error.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::config {

/// A policy's retry budget: the options of the budget class a client gets (one instance per
/// client, or per host for the HTTP client). `budget.kind` in files: "none", "ratio",
/// "token_bucket", "quota", "adaptive", "concurrency" (in this order): the core's one list of
/// budget kinds (stormguard/budget_kinds.hpp), whose settings files read and write by name.
using budget_options = stormguard::budget_options;

/// The file name of a budget kind: "none", "ratio", "token_bucket", "quota", "adaptive" or
/// "concurrency" (stormguard::budget_kind).
using stormguard::budget_kind;

/// One named retry policy: what a retrier, the HTTP client and the simulator need.
struct policy {
  /// [name] 1 to 64 characters from A-Z a-z 0-9 and + - _ . / (a gRPC service/method); unique in
  /// its file. The simulator seeds each client's generator from it.
  std::string name;
  /// [description] free text, optional (at most 200 bytes).
  std::string description;
  /// [retries] (or [attempts] = retries + 1), [backoff], [max_retry_after]: retries in
  /// [0, 1000] (default 3); backoff base in [0, 1h] (100ms), cap in [base, 1h] (3s), multiplier
  /// in [1, 1000] (2), jitter none|equal|full|decorrelated (full); max_retry_after in (0, 24h]
  /// (60s).
  retry_options retry{};
  /// [budget] default none: {"kind": K, ...K's options} or just "K" (the library's defaults).
  budget_options budget{};
  /// [retryable_statuses] the HTTP statuses retried (100..599; default 429, 502, 503, 504). The
  /// simulator's failures are a 503 and a timeout: without 503 here, its 503s are not retried.
  retryable_statuses statuses{};
  /// [retryable_grpc_codes] optional: the gRPC status codes retried over gRPC (gRFC A6's
  /// retryPolicy.retryableStatusCodes), names as gRPC writes them ("UNAVAILABLE", upper case) or
  /// numbers 1..16, no repeats; OK, an unknown name or a name in another case is an error naming
  /// the element and quoting the value. nullopt (absent): the gRPC client retries its default,
  /// UNAVAILABLE (stormguard/grpc/policy.hpp). The HTTP executors and the simulator read
  /// `statuses`, never this. Not with `hedging` (its non_fatal_grpc_codes instead). The gRPC
  /// importer keeps every code of the service config here.
  std::optional<grpc_codes> retryable_grpc_codes;
  /// [attempt_timeout] optional, in (0, 1h]: the time limit of one attempt (`exec`, `http`; in
  /// the simulator it replaces the scenario's timeout for this policy). duration::max() = none
  /// (the field absent; the library's one spelling of "no limit", as in retrier_settings and
  /// call_options), and to_json leaves it out.
  duration attempt_timeout = duration::max();
  /// [deadline] optional, in (0, 24h]: the time limit of a whole call (`exec`, `http`).
  /// duration::max() = none (the field absent).
  duration deadline = duration::max();
  /// [hedging] optional (stormguard/config/hedging.hpp): hedged copies instead of retries; then
  /// `retry.max_retries` is 0 and `budget` is the budget the copies after the first draw from.
  std::optional<hedging_config> hedging;
  /// [client_profile] optional: the kind of client that runs this policy (a built-in's name,
  /// "go-retryablehttp", or an object of its fields; stormguard/client_profile.hpp). The
  /// simulator and the lab play the policy's retries as that client does; nullopt (absent): the
  /// scenario's client_profile. The gRPC importer sets "grpc", the Envoy importer "envoy".
  std::optional<client_profile> client;
  /// Not in the file: what an importer could not map (one sentence each, naming the field), for
  /// the command to print as warnings. Empty for stormguard's own format.
  std::vector<std::string> warnings;

  friend bool operator==(const policy&, const policy&) = default;
};

/// A rejected policy file or value (stormguard/input_error.hpp): `message` is the complete
/// sentence "<field>: <problem>" (the field path, its valid range and the value as written),
/// prefixed by the file's path when it came from a file; `field` is the path alone
/// ("policies[0].backoff.cap"; "" for the document).
using policy_error = input_error;

/// Policies read from a file or a text, or why they were rejected.
using policies_result = outcome<std::vector<policy>, policy_error>;

/// Which format a file is in.
enum class policy_format {
  stormguard,  ///< {"policies": [...]} (docs/policy.md)
  grpc,   ///< a gRPC service config, JSON (gRFC A6: methodConfig[].retryPolicy, retryThrottling)
  envoy,  ///< an Envoy route retry_policy or route configuration, JSON or YAML
};

/// The largest file read: 1 MiB (a larger one, or an endless one such as /dev/zero, is an error
/// after reading at most 1 MiB + 1 byte).
inline constexpr std::size_t k_max_policy_file_bytes = 1024 * 1024;

/// Parses the policies in `text` (`format`), in file order; never an empty list. A policy_error
/// for anything invalid (bad JSON/YAML with line and column, nesting deeper than 64 levels, a
/// field of the wrong type or out of range, an unknown or duplicate field, two policies with one
/// name). Never throws for bad input (std::bad_alloc aside).
[[nodiscard]] STORMGUARD_EXPORT policies_result
parse_policies(std::string_view text, policy_format format = policy_format::stormguard);

/// Reads `path` and parses it as parse_policies does; error messages start with the path.
/// Unreadable files (with the system's reason), directories and files above
/// k_max_policy_file_bytes are policy_errors too. Never throws for bad input.
[[nodiscard]] STORMGUARD_EXPORT policies_result
load_policies(const std::filesystem::path& path, policy_format format = policy_format::stormguard);

/// The policy called `name`, or the first when `name` is empty. A policy_error listing the names
/// in the file when there is none of that name, or when `policies` is empty.
[[nodiscard]] STORMGUARD_EXPORT outcome<policy, policy_error> select_policy(
    const std::vector<policy>& policies, std::string_view name);

/// A policy named on a command line: `[grpc:|envoy:]FILE[:NAME]`. The part after the last ':'
/// is NAME when FILE alone names no existing file (so a file whose name has a ':' still works).
struct policy_reference {
  /// How the file is read: a stormguard policy file, a gRPC service config or an Envoy route.
  policy_format format = policy_format::stormguard;
  /// The file's path, as given.
  std::filesystem::path file;
  std::string name;  ///< empty: every policy of the file (simulate) or the first (other commands)
};

/// Splits a `--policy` value (see policy_reference). A policy_error for an empty FILE or NAME.
[[nodiscard]] STORMGUARD_EXPORT outcome<policy_reference, policy_error> parse_policy_reference(
    std::string_view text);

/// Loads what `reference` names: every policy of the file when its name is empty, else the one
/// policy of that name. Never throws for bad input.
[[nodiscard]] STORMGUARD_EXPORT policies_result load_policies(const policy_reference& reference);

/// The policy in the file format, normalized: every field written out with its value, defaults
/// included, durations as format_duration gives them, keys in documented order (no "warnings").
/// parse_policies on {"policies": [to_json(p)]} gives back `p` (warnings aside).
[[nodiscard]] STORMGUARD_EXPORT std::string to_json(const policy& p);

/// Reads a client profile from JSON text: a built-in's name as a JSON string
/// ("\"go-retryablehttp\"") or an object with every field (docs/policy.md, "client_profile":
/// attempt_label "none" | "x-envoy-attempt-count" | "grpc-previous-rpc-attempts", deadline,
/// pushback, retry_after "minimum" | "replace" | "ignore", reuse_connections, retries). Errors
/// name the field under `field` ("client_profile.retry_after") and quote the value. Never throws
/// for bad input.
[[nodiscard]] STORMGUARD_EXPORT outcome<client_profile, policy_error> parse_client_profile(
    std::string_view text, const std::string& field = "client_profile");

/// The profile as JSON text: a built-in's name as a JSON string when it is that built-in,
/// else the object of its fields. parse_client_profile reads it back equal.
[[nodiscard]] STORMGUARD_EXPORT std::string to_json(const client_profile& p);

/// `{"policies": [...]}` for several policies, normalized as to_json(policy).
[[nodiscard]] STORMGUARD_EXPORT std::string to_json(const std::vector<policy>& policies);

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_POLICY_HPP
