#include "stormguard/sim/strategy.hpp"

#include <chrono>
#include <vector>

#include "stormguard/backoff.hpp"

namespace stormguard::sim {

namespace {

using namespace std::chrono_literals;

// The seed's backoff: base 100 ms, cap 3 s, ×2, with the given jitter.
retry_options exponential_with(jitter j) {
  retry_options options;
  options.max_retries = 3;
  options.backoff = backoff_options{100ms, 3s, 2.0, j};
  return options;
}

std::vector<strategy> make_table() {
  std::vector<strategy> table;

  retry_options none;
  none.max_retries = 0;
  table.push_back({"none", "no retries: every failure is final", none, no_budget{}});

  retry_options naive;
  naive.max_retries = 3;
  naive.backoff = backoff::constant(100ms, jitter::none).options();
  table.push_back({"naive",
                   "3 retries, constant 100 ms, no jitter (the seed's for-loop anti-pattern)",
                   naive, no_budget{}});

  table.push_back({"exponential", "3 retries, exponential 100 ms x2 capped at 3 s, no jitter",
                   exponential_with(jitter::none), no_budget{}});
  table.push_back({"equal", "3 retries, exponential 100 ms x2 capped at 3 s, equal jitter",
                   exponential_with(jitter::equal), no_budget{}});
  table.push_back({"full", "3 retries, exponential 100 ms x2 capped at 3 s, full jitter",
                   exponential_with(jitter::full), no_budget{}});
  table.push_back({"decorrelated", "3 retries, decorrelated jitter, base 100 ms, cap 3 s",
                   exponential_with(jitter::decorrelated), no_budget{}});
  table.push_back({"full+budget",
                   "full, plus a ratio retry budget per client (10 % over 10 s, floor 10/s)",
                   exponential_with(jitter::full), ratio_budget_options{}});
  table.push_back({"full+throttle",
                   "full, plus gRPC retry throttling per client (token bucket: 10 tokens, "
                   "0.1 per success; no retry at half or below)",
                   exponential_with(jitter::full), token_bucket_throttle_options{}});
  table.push_back({"full+quota",
                   "full, plus the AWS SDK retry quota per client (500 tokens; a retry costs 5, "
                   "10 after a timeout; a success pays back)",
                   exponential_with(jitter::full), retry_quota_options{}});
  table.push_back({"full+adaptive",
                   "full, plus SRE adaptive throttling per client (rejects requests locally "
                   "once requests > 2 x accepts over 2 min)",
                   exponential_with(jitter::full), adaptive_throttle_options{}});
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

std::string strategy_names() {
  std::string names;
  for (const auto& s : builtin_strategies()) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

}  // namespace stormguard::sim
