// SPDX-License-Identifier: Apache-2.0
// `stormguard exec`: runs a command with retries (instead of the `for i in 1 2 3; do … && break;
// sleep 5; done` loops of CI scripts). The retries go through the library's retrier: the
// operation runs the command once (cli/process.hpp), a classifier maps its exit status to
// retry/stop, and call_options carries the stop token (SIGINT/SIGTERM) and the --deadline.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <bitset>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "fleet_store.hpp"
#include "output.hpp"
#include "policy_flags.hpp"
#include "process.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/config/executors.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

/// SIGTERM to SIGKILL, when an attempt runs past its time limit.
constexpr duration k_kill_grace = std::chrono::seconds(2);

using exit_codes = std::bitset<256>;

struct exec_options {
  policy_flags policy;
  std::string attempt_timeout;
  std::string deadline;
  std::string retry_on_exit;
  std::string stop_on_exit;
  bool quiet = false;
  bool stats = false;
  std::vector<std::string> command;
  CLI::Option* attempt_timeout_option = nullptr;
  CLI::Option* deadline_option = nullptr;
  CLI::Option* retry_on_option = nullptr;
  CLI::Option* stop_on_option = nullptr;
};

// The options once converted and checked.
struct exec_settings {
  config::retrier_settings run;  // the policy, through the library's adapter
  bool only_listed = false;      // --retry-on-exit: retry only the listed statuses
  exit_codes retry_on;
  exit_codes stop_on;
};

void print_error(const std::string& message) { report_error("exec", message); }

// "75,111" → {75, 111}; each item a decimal exit status in 1..255. Throws CLI::ValidationError
// naming the flag and the text.
exit_codes parse_codes(std::string_view flag, const std::string& text) {
  exit_codes codes;
  const auto bad = [&](const std::string& why) {
    return CLI::ValidationError(std::string(flag), why + " in " + detail::quote_for_message(text) +
                                                       " (use a comma-separated list of exit "
                                                       "statuses 1..255, e.g. 75,111)");
  };
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = text.find(',', from);
    const std::string item = text.substr(from, comma - from);
    if (item.empty()) throw bad("empty exit status");
    int value = 0;
    for (char c : item) {
      if (c < '0' || c > '9' || value > 255) {
        throw bad("not an exit status 1..255: " + detail::quote_for_message(item));
      }
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 255) {
      throw bad("not an exit status 1..255: " + detail::quote_for_message(item));
    }
    codes.set(static_cast<std::size_t>(value));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return codes;
}

// A positive duration flag; duration::max() when the flag was not given.
duration parse_limit(const CLI::Option* option, std::string_view flag, const std::string& text) {
  if (option == nullptr || option->count() == 0) return duration::max();
  const duration d = parse_duration_flag(flag, text);
  if (d <= duration::zero()) {
    throw CLI::ValidationError(std::string(flag),
                               "must be > 0, got " + detail::quote_for_message(text));
  }
  return d;
}

// Converts and checks the options. Throws CLI::Error (a usage error) naming the flag and value.
exec_settings parse_settings(const exec_options& options) {
  exec_settings s;
  // Precedence: a flag typed > the --policy file's value > the default (policy_flags.hpp).
  config::policy policy = resolve_policy("exec", options.policy);
  if (policy.hedging) {
    throw CLI::ValidationError(
        "--policy", "the policy " + detail::quote_for_message(policy.name) +
                        " hedges (\"hedging\"): exec runs a command's attempts one after "
                        "another and never two copies of a command at once; give a policy with "
                        "retries (`stormguard http` hedges)");
  }
  if (typed(options.attempt_timeout_option)) {
    policy.attempt_timeout =
        parse_limit(options.attempt_timeout_option, "--attempt-timeout", options.attempt_timeout);
  }
  if (typed(options.deadline_option)) {
    policy.deadline = parse_limit(options.deadline_option, "--deadline", options.deadline);
  }
  s.run = config::retrier_settings_for(policy);
  s.only_listed = options.retry_on_option->count() > 0;
  if (s.only_listed) s.retry_on = parse_codes("--retry-on-exit", options.retry_on_exit);
  if (options.stop_on_option->count() > 0) {
    s.stop_on = parse_codes("--stop-on-exit", options.stop_on_exit);
  }
  return s;
}

// The delay as a log shows it: rounded down to microseconds ("3.141ms", not "3.141592653ms").
std::string log_duration(duration d) {
  return format_duration(std::chrono::floor<std::chrono::microseconds>(d));
}

// The real clock, telling `on_sleep` each backoff delay the retrier is about to wait: the only
// place where the delay the policy chose is visible without re-implementing the decision.
class logging_clock final : public clock {
 public:
  explicit logging_clock(std::function<void(duration)> on_sleep) : on_sleep_(std::move(on_sleep)) {}
  [[nodiscard]] time_point now() const noexcept override { return real_.now(); }
  [[nodiscard]] wall_time_point wall_now() const noexcept override { return real_.wall_now(); }
  bool sleep_for(duration d, const std::stop_token& stop) override {
    on_sleep_(d);
    return real_.sleep_for(d, stop);
  }

 private:
  real_clock real_;
  std::function<void(duration)> on_sleep_;
};

// The process exit status for how the call ended (the table in the --help text).
int exit_status_for(end_reason reason, const std::optional<child_status>& last, int signal) {
  if (reason == end_reason::success) return exit_success;
  if (signal != 0) return 128 + signal;
  if (reason == end_reason::deadline_exceeded) return k_exit_timed_out;
  if (last) return last->exit_status();
  return exit_failure;
}

// Why the call ended, for the "giving up" line. `left` is the time that was left before the
// deadline when the call ended (zero or less: it had passed).
std::string give_up_reason(end_reason reason, int signal, const exec_settings& s, duration left) {
  switch (reason) {
    case end_reason::cancelled:
      return fmt::format("stopped by signal {}", signal);
    case end_reason::deadline_exceeded:
      if (left > duration::zero()) {
        return fmt::format(
            "the next retry's delay would end past the --deadline of {} ({} left), so it was not "
            "made",
            format_duration(s.run.deadline), log_duration(left));
      }
      return fmt::format("the --deadline of {} ran out", format_duration(s.run.deadline));
    case end_reason::not_retryable:
      return "exit status not retried";
    case end_reason::attempts_exhausted:
      return fmt::format("no retries left (--retries {})", s.run.retry.max_retries);
    case end_reason::budget_exhausted:
      return fmt::format("the --policy budget ({}) refused the retry", budget_kind(s.run.budget));
    case end_reason::throttled:
      return fmt::format("the --policy budget ({}) rejected the first attempt",
                         budget_kind(s.run.budget));
    default:
      return std::string(to_string(reason));
  }
}

// Classifies one attempt's status: a time-out is always retried, a command that could not be
// started never; otherwise as --retry-on-exit / --stop-on-exit say (any failure by default).
classification classify_status(const child_status& status, const exec_settings& s) {
  switch (status.how) {
    case child_status::kind::spawn_failed:
      return classification::stop();
    case child_status::kind::timed_out:
      return classification::retry();
    case child_status::kind::exited:
    case child_status::kind::signaled:
      break;
  }
  const auto code = static_cast<std::size_t>(status.exit_status() & 0xff);
  if (s.only_listed)
    return s.retry_on.test(code) ? classification::retry() : classification::stop();
  return s.stop_on.test(code) ? classification::stop() : classification::retry();
}

int run_exec(const exec_options& options) {
  // Usage errors (exit 2) before anything runs.
  exec_settings settings;
  try {
    settings = parse_settings(options);
  } catch (const CLI::Error& e) {
    print_error(e.what());
    return exit_usage;
  }
  if (options.command.empty()) {
    print_error("no command to run (use: stormguard exec [options] -- CMD [ARGS...])");
    return exit_usage;
  }
  if (const auto warning = zero_delay_warning(settings.run.retry); warning && !options.quiet) {
    report_warning("exec", *warning);
  }

  // An inherited SIG_IGN for SIGCHLD would make the kernel reap the command before its status
  // can be read.
  (void)std::signal(SIGCHLD, SIG_DFL);
  interrupt_forwarder forwarder(k_kill_grace);
  int attempt = 0;
  std::optional<child_status> last;
  logging_clock clock([&](duration delay) {
    if (!options.quiet && last) {
      report_log("exec", fmt::format("attempt {} {}; retrying in {}", attempt, last->describe(),
                                     log_duration(delay)));
    }
  });
  random_generator random;
  any_budget budget(settings.run.budget);      // the policy's budget, any kind (none by default)
  fleet_syncers fleet("exec", options.quiet);  // a fleet budget's Redis syncer (fleet_store.hpp)
  fleet.attach(budget);
  retrier retry(settings.run.policy(), clock, random, budget);
  const auto run_once = [&](const attempt_context& context) -> outcome<int, child_status> {
    attempt = context.attempt;
    const duration limit = std::min(settings.run.attempt_timeout, context.time_left);
    last = run_process(options.command, limit, k_kill_grace, forwarder);
    if (last->how == child_status::kind::exited && last->value == 0) return 0;
    return failure{*last};
  };
  call_options call = settings.run.call(clock.now());
  call.stop = forwarder.token();

  const auto result = retry(
      run_once, [&](const child_status& s) { return classify_status(s, settings); }, call);
  fleet.flush();  // this call's spend reaches the fleet's store (bounded by its timeout)
  fleet.clear();
  const int signal = forwarder.received();
  const int status = exit_status_for(result.reason, last, signal);
  if (last && last->how == child_status::kind::spawn_failed) {
    print_error(fmt::format("cannot run {}: {}", detail::quote_for_message(options.command.front()),
                            std::strerror(last->value)));
  } else if (!options.quiet && !result.ok()) {
    const std::string what = last ? fmt::format("attempt {} {}", attempt, last->describe())
                                  : std::string("no attempt made");
    const duration left = call.deadline - clock.now();
    const std::string why = give_up_reason(result.reason, signal, settings, left);
    report_log("exec", fmt::format("{}; giving up: {}; exit status {}", what, why, status));
  }
  if (options.stats) report_stats("exec", result.attempts, result.reason, result.slept);
  return status;
}

constexpr const char* k_description =
    "Run a command (after --), retrying it with backoff when it fails.\n"
    "\n"
    "Any non-zero exit is retried unless --retry-on-exit or --stop-on-exit says otherwise; a\n"
    "command killed by signal N counts as exit status 128+N. An attempt that runs past\n"
    "--attempt-timeout (or past the --deadline) gets SIGTERM, then SIGKILL 2s later; the command\n"
    "runs in its own process group and the signals go to the whole group. A time-out is always\n"
    "retried. SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to stormguard are forwarded to the command's\n"
    "group and no further attempt starts; a second signal, or 2s without the command ending,\n"
    "sends SIGKILL to the group, and so does the command's end: what it leaves in its group (a\n"
    "background job ignores SIGINT) is killed too, before stormguard exits 128+S. Options are\n"
    "read only before CMD: everything from CMD on (options included) is the command's. stdin,\n"
    "stdout and stderr are the command's; stormguard logs one line per retry to stderr (--quiet\n"
    "silences it; a failed write to stderr is ignored).";

constexpr const char* k_exit_statuses =
    "Exit status:\n"
    "  0        an attempt succeeded\n"
    "  N        the last attempt's exit status (retries exhausted, or a status not retried)\n"
    "  128+N    the last attempt was killed by signal N\n"
    "  124      the last attempt timed out (--attempt-timeout), or the --deadline ran out (also\n"
    "           when the next retry's delay would end past it)\n"
    "  127      the command could not be found or executed (never retried)\n"
    "  128+S    stormguard received signal S: 130/143 for SIGINT/SIGTERM, 129/131 for\n"
    "           SIGHUP/SIGQUIT (unless an attempt then succeeded: 0)\n"
    "  2        bad command line\n"
    "\n"
    "Example: stormguard exec --retries 5 --attempt-timeout 30s --stop-on-exit 2 -- make deploy";

}  // namespace

command add_exec_command(CLI::App& parent) {
  auto options = std::make_shared<exec_options>();
  CLI::App* sub = parent.add_subcommand("exec", "Run a command with retries (exec -- CMD ARGS...)");
  sub->description(k_description);
  sub->footer(k_exit_statuses);
  // Options end at CMD: `exec echo hi --retries 9` runs `echo hi --retries 9` (as with `--`).
  sub->positionals_at_end();
  add_policy_flags(*sub, options->policy);
  options->attempt_timeout_option = add_typed_option(
      *sub, "--attempt-timeout", options->attempt_timeout,
      "Time limit of each attempt (default: none); then SIGTERM, SIGKILL 2s later", "D");
  options->deadline_option = add_typed_option(
      *sub, "--deadline", options->deadline,
      "Time limit of the whole call, attempts and delays (default: none); exit 124 "
      "when it runs out",
      "D");
  options->retry_on_option =
      add_typed_option(*sub, "--retry-on-exit", options->retry_on_exit,
                       "Retry only these exit statuses (comma-separated, 1..255)", "CODES");
  options->stop_on_option =
      add_typed_option(*sub, "--stop-on-exit", options->stop_on_exit,
                       "Never retry these exit statuses (comma-separated, 1..255)", "CODES")
          ->excludes(options->retry_on_option);
  sub->add_flag("--quiet,-q", options->quiet, "Do not log the retries on stderr");
  sub->add_flag("--stats", options->stats,
                "Print a one-line summary on stderr, also on success (even with --quiet): "
                "attempts, retries, reason, time slept");
  add_typed_option(
      *sub, "command", options->command,
      "The command and its arguments (everything from CMD on is the command's; -- is optional)",
      "CMD [ARGS...]")
      ->required();
  return command{sub, [options] { return run_exec(*options); }};
}

}  // namespace stormguard::cli
