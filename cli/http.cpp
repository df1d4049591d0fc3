// SPDX-License-Identifier: Apache-2.0
// `stormguard http`: a curl-like request with the retry rules built in. Thin: the request goes
// through stormguard::http::client (which retries through the library's retrier); this file
// parses the command line, prints the response and maps how the call ended to an exit status.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "fleet_store.hpp"
#include "http_hedge.hpp"
#include "output.hpp"
#include "policy_flags.hpp"
#include "process.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/http/client.hpp"
#include "stormguard/http/policy.hpp"
#include "stormguard/http/syntax.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/retry.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

/// The exit statuses of `stormguard http` beyond 0 (2xx/3xx), 1 (output failed) and 2 (usage).
enum http_exit : int {
  exit_http_error = 3,       ///< the final response is an HTTP error (not 2xx/3xx)
  exit_transport_error = 4,  ///< no response: the last attempt failed in transport
  exit_budget = 5,           ///< the retry budget denied a retry (or throttled the request)
  exit_out_of_time = 6,      ///< the --deadline ran out, or a Retry-After exceeded the limit
};

struct http_options {
  policy_flags policy;
  std::string method;
  std::vector<std::string> headers;
  std::string data;
  std::string idempotency_key;
  std::string key_format = "structured";
  std::string attempt_timeout = "30s";
  std::string connect_timeout = "10s";
  std::string max_retry_after = "60s";
  std::string deadline;
  std::string hedge;  // --hedge DELAY: hedged copies instead of retries
  int hedges = 2;
  bool include = false;
  bool verbose = false;
  bool stats = false;
  std::string url;
  CLI::Option* method_option = nullptr;
  CLI::Option* data_option = nullptr;
  CLI::Option* key_option = nullptr;
  CLI::Option* deadline_option = nullptr;
  CLI::Option* max_retry_after_option = nullptr;
  CLI::Option* attempt_timeout_option = nullptr;
  CLI::Option* hedge_option = nullptr;
  CLI::Option* hedges_option = nullptr;
};

void print_error(const std::string& message) { report_error("http", message); }

// "Name: value" -> header, by the HTTP syntax rules of stormguard/http/syntax.hpp. Throws
// CLI::ValidationError naming -H and the line.
http::header parse_header_line(const std::string& line) {
  const auto field = http::parse_field_line(line);
  if (!field) {
    throw CLI::ValidationError(
        "-H", "not a header line 'Name: value': " + detail::quote_for_message(line));
  }
  if (const auto problem = http::check_request_field(field->name, field->value)) {
    switch (*problem) {
      case http::field_problem::name_not_token:
        break;  // parse_field_line returns only token names
      case http::field_problem::value_has_control:
        throw CLI::ValidationError("-H", "the value contains a control byte (CR, LF, NUL, ...): " +
                                             detail::quote_for_message(line));
      case http::field_problem::content_length:
        throw CLI::ValidationError("-H", detail::quote_for_message(line) +
                                             ": Content-Length is computed from the body (-d); "
                                             "a different one would hang or split the request");
      case http::field_problem::idempotency_key:
        throw CLI::ValidationError(
            "-H", detail::quote_for_message(line) +
                      ": use --idempotency-key auto|KEY, so that stormguard knows the "
                      "request carries a key (and may retry it)");
    }
  }
  return http::header{std::string(field->name), std::string(field->value)};
}

/// The largest body -d @FILE reads (it is held in memory, and sent again on every attempt): a
/// larger file, or an endless one (/dev/zero, a pipe that never ends), is a usage error rather
/// than a process that eats all memory. 4x the client's default response limit.
constexpr std::size_t k_max_data_bytes = std::size_t{256} << 20;

// -d DATA, or -d @FILE (the file's bytes, unchanged; a pipe or FIFO is read to its end). Throws
// CLI::ValidationError naming -d and the file when it cannot be opened or read (a directory:
// EISDIR) or holds more than k_max_data_bytes.
std::string read_data(const std::string& data) {
  if (data.empty() || data.front() != '@') return data;
  const std::string path = data.substr(1);
  if (path.empty()) throw CLI::ValidationError("-d", "'@' needs a file name (-d @FILE)");
  const std::string quoted = detail::quote_for_message(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CLI::ValidationError("-d", "cannot read " + quoted + ": " + errno_text(errno));
  // A regular file's size is known: one over the limit is refused before a byte is read (reading
  // 1 GiB to refuse it cost seconds and the memory). Pipes and devices are counted as read.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::uintmax_t>(st.st_size) > k_max_data_bytes) {
    ::close(fd);
    throw CLI::ValidationError("-d", quoted + " holds more than " +
                                         std::to_string(k_max_data_bytes >> 20) +
                                         " MiB, the largest body -d @FILE sends");
  }
  std::string contents;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw CLI::ValidationError("-d", "cannot read " + quoted + ": " + errno_text(error));
    }
    if (n == 0) break;
    if (contents.size() + static_cast<std::size_t>(n) > k_max_data_bytes) {
      ::close(fd);
      throw CLI::ValidationError("-d", quoted + " holds more than " +
                                           std::to_string(k_max_data_bytes >> 20) +
                                           " MiB, the largest body -d @FILE sends");
    }
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return contents;
}

duration positive_duration(std::string_view flag, const std::string& text) {
  const duration d = parse_duration_flag(flag, text);
  if (d <= duration::zero()) {
    throw CLI::ValidationError(std::string(flag),
                               "must be > 0, got " + detail::quote_for_message(text));
  }
  return d;
}

// The delay as a log shows it: rounded down to microseconds.
std::string log_duration(duration d) {
  return format_duration(std::chrono::floor<std::chrono::microseconds>(d));
}

// "transport error 7 (Failed to connect ...)", "response too large 56 (...)", ...
std::string describe_error(const http::transport_error& e) {
  return fmt::format("{} {} ({})", http::to_string(e.kind), e.curl_code,
                     printable_message(e.message));
}

// "a" or "an" before `word` ("a POST", "an ACL"), by its first letter.
std::string_view indefinite_article(std::string_view word) {
  const char c = word.empty() ? 'x' : static_cast<char>(word.front() | 0x20);
  return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' ? "an" : "a";
}

// What the request was, for explaining a decision: the method, and whether it carries a key.
struct request_facts {
  std::string method;
  bool has_key = false;
  retryable_statuses statuses;
};

// Why an attempt that got `status` or `error` was not retried (end_reason::not_retryable), in the
// terms of stormguard::classify_http_status and classify_transport_failure.
std::string not_retried_why(const std::optional<int>& status,
                            const std::optional<http::transport_error>& error,
                            const request_facts& facts) {
  if (status && !facts.statuses.contains(*status)) {
    const std::vector<int> retried = facts.statuses.to_vector();
    return fmt::format("HTTP {} is not retried: only {} are", *status, fmt::join(retried, ", "));
  }
  if (error && error->kind != http::failure_kind::transport) {
    // "invalid request: ...": the kind as a label, never after an article ("a invalid").
    return fmt::format("{}: the same request would fail the same way again",
                       http::to_string(error->kind));
  }
  if (!may_resend(facts.method, facts.has_key)) {
    return fmt::format(
        "{} {} without --idempotency-key is not retried: the server may already have processed "
        "it, and a retry could repeat it; --idempotency-key auto makes it safe to retry",
        indefinite_article(facts.method), facts.method);  // a token (checked by parse_call)
  }
  return "the classification said stop";
}

std::string end_text(end_reason reason, const std::optional<int>& status,
                     const std::optional<http::transport_error>& error,
                     const request_facts& facts) {
  if (reason != end_reason::not_retryable) return std::string(to_string(reason));
  return fmt::format("{} ({})", to_string(reason), not_retried_why(status, error, facts));
}

// `label` names the attempt: "attempt" (retries) or "copy" (hedged copies, numbered from 1).
std::string describe_attempt(const http::attempt_info& a, const request_facts& facts,
                             std::string_view label = "attempt") {
  std::string text = fmt::format("{} {}: ", label, a.attempt);
  if (a.status) {
    text += fmt::format("HTTP {}", *a.status);
  } else if (a.error) {
    text += describe_error(*a.error);
  }
  if (a.retry_after) {
    // The server's text: escaped and cut as every echoed value (a header may hold ESC or BEL).
    const std::string value = detail::escape_control(*a.retry_after, detail::k_max_echo);
    text += a.retry_after_delay
                ? fmt::format(", Retry-After: {} ({})", value, log_duration(*a.retry_after_delay))
                : fmt::format(", Retry-After: {} (unparsable: own backoff)", value);
  }
  if (a.idempotency_key) {
    text += fmt::format(", Idempotency-Key: {}",
                        detail::escape_control(*a.idempotency_key, detail::k_max_echo));
  }
  if (a.delay) {
    text += fmt::format("; retrying in {}", log_duration(*a.delay));
  } else if (a.reason) {
    text += "; " + end_text(*a.reason, a.status, a.error, facts);
  }
  return text;
}

int exit_status_for(const http::result& r, int signal) {
  switch (r.reason) {
    case end_reason::success:
      return exit_success;
    case end_reason::cancelled:
      return 128 + (signal != 0 ? signal : 2);
    case end_reason::budget_exhausted:
    case end_reason::throttled:  // only with a budget that rejects first attempts (adaptive)
      return exit_budget;
    case end_reason::deadline_exceeded:
    case end_reason::retry_after_too_long:
      return exit_out_of_time;
    case end_reason::not_retryable:
    case end_reason::attempts_exhausted:
    case end_reason::server_refused:  // the server's "do not retry": an HTTP error like any other
      break;
  }
  if (r.error && r.error->kind == http::failure_kind::invalid_request) return exit_usage;
  return r.response ? exit_http_error : exit_transport_error;
}

// What the command line asks for, converted and checked.
struct http_call {
  http::client_options client;
  http::request request;
  /// The policy the flags and --policy make (its deadline: http::call_options_for).
  config::policy policy;
  std::optional<config::hedging_settings> hedging;  // hedged copies instead of retries
};

// --idempotency-key auto|KEY. Throws CLI::ValidationError.
void set_idempotency_key(const http_options& o, http_call& call) {
  if (o.key_option->count() == 0) return;
  if (o.idempotency_key == "auto") {
    call.request.idempotency = http::key::generate();
    return;
  }
  if (http::iequals_ascii(o.idempotency_key, "auto")) {
    // "AUTO" would be sent as a literal key, the same on every run: the server would answer
    // every later request with the first one's stored response.
    throw CLI::ValidationError(
        "--idempotency-key",
        detail::quote_for_message(o.idempotency_key) +
            " would be sent as a literal key, the same for every request; write auto (in "
            "lowercase) for a new key per request");
  }
  try {
    (void)idempotency_key_field_value(o.idempotency_key, call.client.key_format);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--idempotency-key", printable_message(e.what()));
  }
  call.request.idempotency = http::key::use(o.idempotency_key);
}

// Converts and checks every option, before any request. Throws CLI::Error (a usage error).
http_call parse_call(const http_options& o) {
  http_call call;
  http::client_options& client = call.client;
  // Precedence: a flag typed > the --policy file's value > the default (policy_flags.hpp).
  config::policy& policy = call.policy;
  policy = resolve_policy("http", o.policy);
  const bool file = typed(o.policy.policy_option);
  if (!file || typed(o.max_retry_after_option)) {
    policy.retry.max_retry_after = positive_duration("--max-retry-after", o.max_retry_after);
  }
  if (!file || typed(o.attempt_timeout_option) || policy.attempt_timeout == duration::max()) {
    policy.attempt_timeout = positive_duration("--attempt-timeout", o.attempt_timeout);
  }
  if (typed(o.deadline_option)) {
    policy.deadline = positive_duration("--deadline", o.deadline);
  } else if (!file) {
    policy.deadline = duration::max();
  }
  // Without --policy, the client's own default: a ratio budget per host. With one, its budget
  // of any kind, "none" included.
  if (!file) policy.budget = ratio_budget_options{};
  client = http::client_options_for(policy, client);
  call.hedging = hedging_of(policy, o.hedge_option, o.hedge, o.hedges_option, o.hedges);
  client.connect_timeout = positive_duration("--connect-timeout", o.connect_timeout);
  if (o.key_format == "structured") {
    client.key_format = idempotency_key_format::structured;
  } else if (o.key_format == "bare") {
    client.key_format = idempotency_key_format::bare;
  } else {
    throw CLI::ValidationError(
        "--key-format",
        "unknown format " + detail::quote_for_message(o.key_format) + " (use structured or bare)");
  }
  http::request& req = call.request;
  for (const std::string& line : o.headers) req.headers.push_back(parse_header_line(line));
  if (o.data_option->count() > 0) req.body = read_data(o.data);
  req.method = o.method_option->count() > 0 ? o.method
               : o.data_option->count() > 0 ? "POST"
                                            : "GET";
  if (!http::is_token(req.method)) {
    throw CLI::ValidationError("-X", "not an HTTP method (a token such as GET or POST): " +
                                         detail::quote_for_message(req.method));
  }
  set_idempotency_key(o, call);
  req.url = o.url;
  return call;
}

// Writes the response (with -i, its status line and headers first) to stdout; false (errno set)
// when it could not be written.
bool print_response(const http::response& response, bool include) {
  std::string out;
  if (include) {
    out += response.status_line + "\r\n";
    for (const auto& h : response.headers) out += h.name + ": " + h.value + "\r\n";
    out += "\r\n";
  }
  out += response.body;
  return write_all(stdout, out);
}

int run_http(const http_options& o) {
  // Usage errors (exit 2) before any request.
  http_call parsed;
  try {
    parsed = parse_call(o);
  } catch (const CLI::Error& e) {
    print_error(e.what());
    return exit_usage;
  }
  if (const auto warning = zero_delay_warning(parsed.client.retry)) {
    report_warning("http", *warning);
  }
  const request_facts facts{parsed.request.method,
                            parsed.request.idempotency.what() != http::key::kind::none,
                            parsed.client.statuses};
  if (o.verbose && parsed.hedging) {
    // A hedged copy is one attempt, numbered as its x-envoy-attempt-count says; its own end is
    // not the call's (said once, after the copies).
    parsed.client.on_attempt = [&facts](const http::attempt_info& a) {
      http::attempt_info copy = a;
      copy.reason.reset();
      report_log("http", describe_attempt(copy, facts, "copy"));
    };
  } else if (o.verbose) {
    parsed.client.on_attempt = [&facts](const http::attempt_info& a) {
      report_log("http", describe_attempt(a, facts));
    };
  }
  interrupt_forwarder interrupts;
  // A fleet budget naming a store: each host's budget gets its Redis syncer (fleet_store.hpp).
  fleet_syncers fleet("http", false);
  parsed.client.attach_budget = fleet.host_hook();
  // SIGPIPE is ignored process-wide (main.cpp): a reader that went away (`stormguard http URL |
  // head -c 10`) gives exit 1 and a message, as documented.
  http::client client(parsed.client);
  call_options call = http::call_options_for(parsed.policy, real_clock().now());
  call.stop = interrupts.token();

  http::result r;
  std::optional<hedge_report> hedged;
  try {
    if (parsed.hedging) {
      hedged_http_call h =
          perform_hedged(parsed.client, parsed.request, call, *parsed.hedging, fleet);
      r = std::move(h.result);
      hedged = h.report;
    } else {
      r = client.perform(parsed.request, call);
    }
  } catch (const CLI::Error& e) {
    print_error(e.what());
    return exit_usage;
  } catch (const std::invalid_argument& e) {
    // The library's own validation (the URL, above all): a usage error.
    std::string_view message = e.what();
    if (message.substr(0, 12) == "stormguard::") {
      const std::size_t colon = message.find(": ");
      if (colon != std::string_view::npos) message.remove_prefix(colon + 2);
    }
    print_error(printable_message(message));
    return exit_usage;
  }

  fleet.flush();  // this call's spend reaches the fleet's store (bounded by its timeout)
  if (r.response && !print_response(*r.response, o.include)) {
    print_error("cannot write the response to stdout: " + errno_text(errno));
    return exit_failure;
  }
  const int status = exit_status_for(r, interrupts.received());
  if (!r.ok()) {
    const std::string last = r.response ? fmt::format("HTTP {}", r.response->status)
                             : r.error  ? describe_error(*r.error)
                                        : std::string("no attempt made");
    const std::optional<int> last_status =
        r.response ? std::optional<int>(r.response->status) : std::nullopt;
    report_log("http", fmt::format("{} after {} attempt{}: {}; exit status {}", last, r.attempts,
                                   r.attempts == 1 ? "" : "s",
                                   end_text(r.reason, last_status, r.error, facts), status));
  }
  if (o.stats) report_stats("http", r.attempts, r.reason, r.slept);
  if (hedged && (o.stats || o.verbose)) {
    report_log("http", fmt::format("hedged: {} sent, {}, {} refused by the budget, {} cancelled",
                                   hedged->sent,
                                   hedged->winner > 0 ? fmt::format("winner {}", hedged->winner)
                                                      : std::string("no copy won"),
                                   hedged->refused, hedged->cancelled));
  }
  return status;
}

constexpr const char* k_description =
    "Send one HTTP request (libcurl), retrying it with backoff and jitter when the failure is\n"
    "worth another attempt: 429, 502, 503, 504 (honouring Retry-After, RFC 9110 §10.2.3) and\n"
    "transport errors. A request that may already have reached the server (reset, empty reply,\n"
    "time-out waiting for the response) is retried only for idempotent methods (GET, HEAD,\n"
    "OPTIONS, TRACE, PUT, DELETE) or with --idempotency-key; a POST or PATCH without a key is\n"
    "never retried after it may have been sent. The key is the same on every attempt. Redirects\n"
    "are not followed; only http:// and https:// URLs. The body goes to stdout (-i adds the\n"
    "status line and headers); -v logs each attempt to stderr. A response body over 64 MiB\n"
    "is not kept: the attempt fails, is not retried, and the exit status is 4. -d @FILE sends\n"
    "at most 256 MiB (a larger regular file is refused before it is read).";

constexpr const char* k_exit_statuses =
    "Exit status:\n"
    "  0    the final response is 2xx or 3xx\n"
    "  3    the final response is an HTTP error (4xx, 5xx): not retryable, or retries ran out\n"
    "  4    no response: the last attempt failed in transport (refused, reset, time-out, ...)\n"
    "  5    the retry budget denied a retry (fail fast), or throttled the request\n"
    "  6    the --deadline ran out (also when the next retry's delay would end past it), or a\n"
    "       Retry-After exceeded --max-retry-after\n"
    "  130  interrupted by SIGINT (143 SIGTERM): the transfer or the backoff is stopped at once\n"
    "  1    the response could not be written to stdout\n"
    "  2    bad command line (bad method, header, -d @FILE, URL, key, duration, --policy file)\n"
    "\n"
    "Example: stormguard http -X POST -d @order.json --idempotency-key auto -v "
    "https://api.example.com/orders";

}  // namespace

command add_http_command(CLI::App& parent) {
  auto options = std::make_shared<http_options>();
  CLI::App* sub = parent.add_subcommand("http", "Send an HTTP request with retries (http URL)");
  sub->description(k_description);
  sub->footer(k_exit_statuses);
  options->method_option =
      add_typed_option(*sub, "-X,--request", options->method,
                       "The method (default GET, or POST with -d); case-sensitive", "METHOD");
  add_typed_option(*sub, "-H,--header", options->headers,
                   "A header line 'Name: value' (repeatable)", "LINE");
  options->data_option =
      add_typed_option(*sub, "-d,--data", options->data,
                       "The body: DATA as is, or @FILE for a file's bytes", "DATA")
          ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  options->key_option = add_typed_option(
      *sub, "--idempotency-key", options->idempotency_key,
      "Send an Idempotency-Key: auto (a new UUID v4) or KEY (printable, <= 255)", "auto|KEY");
  add_typed_option(*sub, "--key-format", options->key_format,
                   "How the key is written: structured (\"key\", the IETF draft) or bare (Stripe)",
                   "FORMAT")
      ->capture_default_str();
  add_policy_flags(*sub, options->policy);
  options->max_retry_after_option =
      add_typed_option(*sub, "--max-retry-after", options->max_retry_after,
                       "The longest Retry-After honoured; a longer one ends the call (exit 6)", "D")
          ->capture_default_str();
  options->attempt_timeout_option =
      add_typed_option(*sub, "--attempt-timeout", options->attempt_timeout,
                       "Time limit of each attempt", "D")
          ->capture_default_str();
  add_typed_option(*sub, "--connect-timeout", options->connect_timeout,
                   "Time limit of the connect within an attempt", "D")
      ->capture_default_str();
  options->deadline_option = add_typed_option(
      *sub, "--deadline", options->deadline,
      "Time limit of the whole call, attempts and delays (default: none); exit 6", "D");
  options->hedge_option = add_typed_option(
      *sub, "--hedge", options->hedge,
      "Hedge instead of retrying: send another copy when none answered after D (0: all at once); "
      "the first good answer wins, the others are cancelled",
      "D");
  options->hedges_option =
      add_typed_option(*sub, "--hedges", options->hedges,
                       "With --hedge (or a --policy that hedges): copies in all, 2 to 5", "N")
          ->capture_default_str();
  sub->add_flag("-i,--include", options->include, "Print the status line and headers first");
  sub->add_flag("-v,--verbose", options->verbose, "Log each attempt to stderr");
  sub->add_flag("--stats", options->stats,
                "Print a one-line summary on stderr, also on success: attempts, retries, reason, "
                "time slept");
  add_typed_option(*sub, "url", options->url, "An http:// or https:// URL", "URL")->required();
  return command{sub, [options] { return run_http(*options); }};
}

}  // namespace stormguard::cli
