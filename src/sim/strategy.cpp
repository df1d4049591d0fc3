#include "stormguard/sim/strategy.hpp"

#include <chrono>
#include <vector>

#include "stormguard/backoff.hpp"

namespace stormguard::sim {

namespace {

using namespace std::chrono_literals;

// The default backoff: base 100 ms, cap 3 s, ×2 (docs/design.md, the essay's Go engine), with the
// given jitter.
retry_options exponential_with(jitter j) {
  retry_options options;
  options.max_retries = 3;
  options.backoff = backoff_options{100ms, 3s, 2.0, j};
  return options;
}

// A built-in: the scenario's timeout, 503 retried, a scenario's max_retries applies.
strategy builtin(std::string name, std::string description, retry_options retry,
                 budget_config budget) {
  strategy s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.retry = retry;
  s.budget = budget;
  return s;
}

std::vector<strategy> make_table() {
  std::vector<strategy> table;

  retry_options none;
  none.max_retries = 0;
  table.push_back(builtin("none", "no retries: every failure is final", none, no_budget{}));

  retry_options naive;
  naive.max_retries = 3;
  naive.backoff = backoff::constant(100ms, jitter::none).options();
  table.push_back(builtin("naive",
                          "3 retries, constant 100 ms, no jitter (the for-loop anti-pattern)",
                          naive, no_budget{}));

  table.push_back(builtin("exponential",
                          "3 retries, exponential 100 ms x2 capped at 3 s, no jitter",
                          exponential_with(jitter::none), no_budget{}));
  table.push_back(builtin("equal", "3 retries, exponential 100 ms x2 capped at 3 s, equal jitter",
                          exponential_with(jitter::equal), no_budget{}));
  table.push_back(builtin("full", "3 retries, exponential 100 ms x2 capped at 3 s, full jitter",
                          exponential_with(jitter::full), no_budget{}));
  table.push_back(builtin("decorrelated", "3 retries, decorrelated jitter, base 100 ms, cap 3 s",
                          exponential_with(jitter::decorrelated), no_budget{}));
  table.push_back(builtin("full+budget",
                          "full, plus a ratio retry budget per client (10 % over 10 s, floor 10/s)",
                          exponential_with(jitter::full), ratio_budget_options{}));
  table.push_back(builtin("full+throttle",
                          "full, plus gRPC retry throttling per client (token bucket: 10 tokens, "
                          "0.1 per success; no retry at half or below)",
                          exponential_with(jitter::full), token_bucket_throttle_options{}));
  table.push_back(
      builtin("full+quota",
              "full, plus the AWS SDK retry quota per client (500 tokens; a retry costs 5, "
              "10 after a timeout; a success pays back)",
              exponential_with(jitter::full), retry_quota_options{}));
  table.push_back(builtin("full+adaptive",
                          "full, plus SRE adaptive throttling per client (rejects requests locally "
                          "once requests > 2 x accepts over 2 min)",
                          exponential_with(jitter::full), adaptive_throttle_options{}));
  table.push_back(builtin("full+envoy",
                          "full, plus Envoy's retry budget per client (retries in flight <= max(3, "
                          "20 % of the requests in flight))",
                          exponential_with(jitter::full), concurrency_budget_options{}));
  return table;
}

}  // namespace

std::span<const strategy> builtin_strategies() {
  static const std::vector<strategy> table = make_table();
  return table;
}

const strategy* find_strategy(std::string_view name) noexcept {
  for (const auto& s : builtin_strategies()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

strategy from_policy(const config::policy& p) {
  strategy s = builtin(p.name, p.description, p.retry, p.budget);
  s.attempt_timeout = p.attempt_timeout;
  s.retries_503 = p.statuses.contains(503);
  s.scenario_retries = false;
  return s;
}

std::string strategy_names() {
  std::string names;
  for (const auto& s : builtin_strategies()) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

}  // namespace stormguard::sim
