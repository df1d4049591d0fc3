// SPDX-License-Identifier: Apache-2.0
/// \file
/// stormguard/input_error.hpp: the one error of every parser and loader of the library.
///
/// Every function that reads input a user wrote — a policy file (`config::parse_policies`,
/// `config::load_policies`), a scenario (`sim::parse_scenario`), a `--defence` value
/// (`sim::parse_defences`), a `--policy` reference — returns `stormguard::outcome<T, input_error>`
/// and never throws for bad input (std::bad_alloc aside), as Abseil's `absl::StatusOr` does. The
/// small value parsers that have nothing to say but "not valid" (`parse_duration`,
/// `parse_retry_after`, `parse_grpc_timeout`) return `std::optional<T>`.
///
///     auto policies = stormguard::config::load_policies("policies/recommended.json");
///     if (!policies) {
///       std::cerr << policies.error().message << '\n';  // "policies[0].backoff.cap: ..."
///       return 2;
///     }
///     for (const auto& p : *policies) use(p);
#ifndef STORMGUARD_INPUT_ERROR_HPP
#define STORMGUARD_INPUT_ERROR_HPP

#include <string>

namespace stormguard {

/// Why an input was rejected: the field and a complete sentence. A plain value type.
struct input_error {
  /// Where: the JSON path of the offending field ("server.workers", "policies[0].backoff.cap"),
  /// or the name of what was read ("defence", "scale"); empty for the document as a whole (bad
  /// JSON, an unreadable file).
  std::string field;
  /// A complete sentence that names the field and quotes the value as written, e.g.
  /// `server.workers: must be an integer in [1, 1000000], got -3`; prefixed with the file's path
  /// when the input came from a file.
  std::string message;

  friend bool operator==(const input_error&, const input_error&) = default;
};

}  // namespace stormguard

#endif  // STORMGUARD_INPUT_ERROR_HPP
