// SPDX-License-Identifier: Apache-2.0
#include "policy_flags.hpp"

#include <stdexcept>
#include <string>

#include "manpage.hpp"
#include "numbers.hpp"
#include "policy_file.hpp"
#include "stormguard/backoff.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The library's message without its "stormguard::backoff: " prefix, and the flag it is about
// (the library names fields: base, cap, multiplier, jitter, max_retries).
CLI::ValidationError library_error(const std::invalid_argument& e) {
  std::string_view message = e.what();
  if (starts_with(message, "stormguard::")) {
    const std::size_t colon = message.find(": ");
    if (colon != std::string_view::npos) message.remove_prefix(colon + 2);
  }
  std::string flag = "policy";
  if (starts_with(message, "base") || starts_with(message, "decorrelated jitter needs base")) {
    flag = "--base";
  } else if (starts_with(message, "cap")) {
    flag = "--cap";
  } else if (starts_with(message, "multiplier")) {
    flag = "--multiplier";
  } else if (starts_with(message, "jitter")) {
    flag = "--jitter";
  } else if (starts_with(message, "max_retries")) {
    flag = "--retries";
  }
  return CLI::ValidationError(flag, std::string(message));
}

// --base above --cap, blaming the flag the user typed: '--base: "5s" is above the cap 3s (the
// default --cap); give a larger --cap too', '--cap: "50ms" is below the base 100ms (the default
// --base)...', or '--cap: "1s" is below --base "2s"...' when both were given. `source` says
// where the other value came from ("the default --cap", "the --policy file's cap").
CLI::ValidationError base_above_cap(const policy_flags& flags, const backoff_options& b,
                                    bool from_file) {
  const std::string base = detail::quote_for_message(flags.base);
  const std::string cap = detail::quote_for_message(flags.cap);
  if (typed(flags.base_option) && !typed(flags.cap_option)) {
    return CLI::ValidationError(
        "--base", base + " is above the cap " + format_duration(b.cap) +
                      (from_file ? " (the --policy file's)" : " (the default --cap)") +
                      "; give a larger --cap too");
  }
  if (typed(flags.cap_option) && !typed(flags.base_option)) {
    return CLI::ValidationError(
        "--cap", cap + " is below the base " + format_duration(b.base) +
                     (from_file ? " (the --policy file's)" : " (the default --base)") +
                     "; give a smaller --base too");
  }
  return CLI::ValidationError("--cap", cap + " is below --base " + base +
                                           ": the cap is the largest delay, at least the base");
}

}  // namespace

bool typed(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

void add_policy_flags(CLI::App& app, policy_flags& flags) {
  flags.policy_option =
      add_typed_option(app, "--policy", flags.policy,
                       "A policy file ([grpc:|envoy:]FILE[:NAME]; " + doc_path("policy.md") +
                           "); the flags below, when typed, override its values",
                       "FILE[:NAME]");
  flags.base_option =
      add_typed_option(
          app, "--base", flags.base,
          "Ceiling of the first retry's delay, a duration with a unit (ns us ms s m h)", "D")
          ->capture_default_str();
  flags.cap_option = add_typed_option(app, "--cap", flags.cap,
                                      "Largest delay ever waited, a duration >= --base", "D")
                         ->capture_default_str();
  flags.multiplier_option =
      app.add_option(
             "--multiplier", flags.multiplier,
             "Growth of the ceiling per retry: ceiling(n) = min(cap, base * X^(n-1)), X >= 1")
          ->transform(decimal_number())
          ->type_name("X")
          ->capture_default_str();
  flags.jitter_option =
      add_typed_option(app, "--jitter", flags.jitter,
                       "Spread of each delay below its ceiling: none, equal, full or decorrelated",
                       "NAME")
          ->capture_default_str();
  flags.retries_option =
      app.add_option("--retries", flags.retries, "Retries after the first attempt")
          ->transform(whole_number())
          ->type_name("N")
          ->capture_default_str();
}

std::optional<std::string> zero_delay_warning(const retry_options& options) {
  if (options.max_retries == 0 || options.backoff.base != duration::zero()) return std::nullopt;
  return std::string(options.backoff.cap == duration::zero() ? "--base and --cap are 0s"
                                                             : "--base is 0s") +
         ": every retry starts at once, with no delay";
}

duration parse_duration_flag(std::string_view flag, std::string_view text) {
  const std::optional<duration> d = parse_duration(text);
  if (!d) {
    throw CLI::ValidationError(
        std::string(flag),
        "not a duration: " + detail::quote_for_message(text) + " (" + duration_error(text) + ")");
  }
  return *d;
}

namespace {

// Applies the flags to `options`: every flag when `all`, else only those typed.
void apply_flags(const policy_flags& flags, retry_options& options, bool all) {
  if (all || typed(flags.retries_option)) options.max_retries = flags.retries;
  if (all || typed(flags.base_option)) {
    options.backoff.base = parse_duration_flag("--base", flags.base);
  }
  if (all || typed(flags.cap_option)) options.backoff.cap = parse_duration_flag("--cap", flags.cap);
  if (all || typed(flags.multiplier_option)) options.backoff.multiplier = flags.multiplier;
  if (all || typed(flags.jitter_option)) {
    const std::optional<stormguard::jitter> j = parse_jitter(flags.jitter);
    if (!j) {
      throw CLI::ValidationError("--jitter", "unknown jitter " +
                                                 detail::quote_for_message(flags.jitter) +
                                                 " (use none, equal, full or decorrelated)");
    }
    options.backoff.jitter = *j;
  }
  if (options.backoff.base > options.backoff.cap) {
    throw base_above_cap(flags, options.backoff, !all);
  }
  try {
    (void)retry_policy(options);  // the library's own validation, one source of truth
  } catch (const std::invalid_argument& e) {
    throw library_error(e);
  }
}

}  // namespace

retry_options to_retry_options(const policy_flags& flags) {
  retry_options options;
  apply_flags(flags, options, true);
  return options;
}

config::policy resolve_policy(std::string_view command, const policy_flags& flags) {
  if (!typed(flags.policy_option)) {
    config::policy p;
    p.name = "flags";
    p.retry = to_retry_options(flags);
    return p;
  }
  config::policy p = load_one_policy(command, flags.policy);
  apply_flags(flags, p.retry, false);
  return p;
}

}  // namespace stormguard::cli
