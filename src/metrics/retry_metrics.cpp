// SPDX-License-Identifier: Apache-2.0
// stormguard::metrics: the metric families of retry_metrics and the recording of one label set.
#include "stormguard/metrics/retry_metrics.hpp"

#include <prometheus/check_names.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace stormguard::metrics {

struct retry_metrics::families {
  prometheus::Family<prometheus::Counter>& attempts;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& calls;
  prometheus::Family<prometheus::Counter>& denials;
  prometheus::Family<prometheus::Counter>& retry_after;
  prometheus::Family<prometheus::Histogram>& delay;
  prometheus::Family<prometheus::Gauge>& budget_level;
  prometheus::Family<prometheus::Counter>& hedges_sent;
  prometheus::Family<prometheus::Counter>& hedges_won;
  prometheus::Family<prometheus::Counter>& hedges_refused;
  prometheus::Family<prometheus::Counter>& hedges_cancelled;
  std::string label;
  prometheus::Histogram::BucketBoundaries buckets;
};

namespace {

constexpr std::array<attempt_status, 4> k_statuses{attempt_status::success, attempt_status::failure,
                                                   attempt_status::timeout,
                                                   attempt_status::not_retryable};
constexpr std::array<end_reason, 9> k_reasons{end_reason::success,
                                              end_reason::not_retryable,
                                              end_reason::attempts_exhausted,
                                              end_reason::budget_exhausted,
                                              end_reason::retry_after_too_long,
                                              end_reason::deadline_exceeded,
                                              end_reason::cancelled,
                                              end_reason::throttled,
                                              end_reason::server_refused};

std::string status_name(attempt_status s) {
  switch (s) {
    case attempt_status::success:
      return "success";
    case attempt_status::failure:
      return "failure";
    case attempt_status::timeout:
      return "timeout";
    case attempt_status::not_retryable:
      return "not_retryable";
  }
  return "failure";
}

std::string checked_name(const std::string& prefix, const char* suffix) {
  std::string name = prefix + suffix;
  if (!prometheus::CheckMetricName(name)) {
    throw std::invalid_argument("metrics_options.prefix: not a valid Prometheus metric name: \"" +
                                prefix + "\"");
  }
  return name;
}

}  // namespace

retry_metrics::retry_metrics(prometheus::Registry& registry, metrics_options options) {
  if (!prometheus::CheckLabelName(options.label) || options.label == "outcome" ||
      options.label == "reason" || options.label == "budget") {
    throw std::invalid_argument(
        "metrics_options.label: not a valid Prometheus label name or a reserved one "
        "(outcome, reason, budget): \"" +
        options.label + "\"");
  }
  for (std::size_t i = 0; i < options.delay_buckets.size(); ++i) {
    if (i > 0 && !(options.delay_buckets[i] > options.delay_buckets[i - 1])) {
      throw std::invalid_argument("metrics_options.delay_buckets: not increasing at index " +
                                  std::to_string(i));
    }
  }
  const std::string& p = options.prefix;
  families_ = std::unique_ptr<families>(new families{
      prometheus::BuildCounter()
          .Name(checked_name(p, "_attempts_total"))
          .Help("Attempts sent by the retry executors, by outcome (success, failure, timeout, "
                "not_retryable)")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_retries_total"))
          .Help("Retries granted by the retry policy and the budget (each after one backoff)")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_calls_total"))
          .Help("Logical calls ended, by end_reason")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_budget_denials_total"))
          .Help("Retries (budget_exhausted) or first attempts (throttled) refused by the retry "
                "budget, by budget kind")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_retry_after_honoured_total"))
          .Help("Retries whose delay honoured a server's Retry-After")
          .Register(registry),
      prometheus::BuildHistogram()
          .Name(checked_name(p, "_backoff_delay_seconds"))
          .Help("Delays waited before retries, in seconds")
          .Register(registry),
      prometheus::BuildGauge()
          .Name(checked_name(p, "_budget_level"))
          .Help("Retries the retry budget would grant now (refreshed when a call retries or "
                "fails)")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_hedges_sent_total"))
          .Help("Hedged copies sent after the first copy of a call (each drew from the budget)")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_hedges_won_total"))
          .Help("Hedged calls whose answer came from a copy after the first")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_hedges_refused_total"))
          .Help("Hedged copies the retry budget refused (not sent), by budget kind")
          .Register(registry),
      prometheus::BuildCounter()
          .Name(checked_name(p, "_hedges_cancelled_total"))
          .Help("Copies of hedged calls cancelled in flight once the call was decided")
          .Register(registry),
      std::move(options.label), std::move(options.delay_buckets)});
}

retry_metrics::~retry_metrics() = default;

client_metrics& retry_metrics::for_client(std::string_view client, std::string_view budget) {
  std::string key;
  key.reserve(client.size() + budget.size() + 1);
  key.append(client).push_back('\0');
  key.append(budget);
  const stormguard::detail::lock hold(mutex_);
  if (auto it = clients_.find(key); it != clients_.end()) return *it->second;
  auto m = std::unique_ptr<client_metrics>(new client_metrics());
  families& f = *families_;
  const std::string name(client);
  for (const attempt_status s : k_statuses) {
    m->attempts_[static_cast<std::size_t>(s)] =
        &f.attempts.Add({{f.label, name}, {"outcome", status_name(s)}});
  }
  for (const end_reason r : k_reasons) {
    m->calls_[static_cast<std::size_t>(r)] =
        &f.calls.Add({{f.label, name}, {"reason", std::string(to_string(r))}});
  }
  m->retries_ = &f.retries.Add({{f.label, name}});
  m->denials_ = &f.denials.Add({{f.label, name}, {"budget", std::string(budget)}});
  m->retry_after_ = &f.retry_after.Add({{f.label, name}});
  m->delay_ = &f.delay.Add({{f.label, name}}, f.buckets);
  m->budget_level_ = &f.budget_level.Add({{f.label, name}, {"budget", std::string(budget)}});
  m->hedges_sent_ = &f.hedges_sent.Add({{f.label, name}});
  m->hedges_won_ = &f.hedges_won.Add({{f.label, name}});
  m->hedges_refused_ = &f.hedges_refused.Add({{f.label, name}, {"budget", std::string(budget)}});
  m->hedges_cancelled_ = &f.hedges_cancelled.Add({{f.label, name}});
  client_metrics& ref = *m;
  clients_.emplace(std::move(key), std::move(m));
  return ref;
}

void client_metrics::record_attempt(const attempt_event& e) noexcept {
  attempts_[static_cast<std::size_t>(e.status)]->Increment();
  if (e.delay) record_retry(*e.delay, e.retry_after.has_value());
}

void client_metrics::record_retry(duration delay, bool honours_retry_after) noexcept {
  retries_->Increment();
  delay_->Observe(std::chrono::duration<double>(delay).count());
  if (honours_retry_after) retry_after_->Increment();
}

void client_metrics::record_end(end_reason reason) noexcept {
  const auto i = static_cast<std::size_t>(reason);
  if (i < calls_.size()) calls_[i]->Increment();
  if (reason == end_reason::budget_exhausted || reason == end_reason::throttled) {
    denials_->Increment();
  }
}

void client_metrics::record_hedged_call(end_reason reason, const hedge_report& report) noexcept {
  record_end(reason);
  if (report.sent > 1) hedges_sent_->Increment(static_cast<double>(report.sent - 1));
  if (report.winner > 1) hedges_won_->Increment();
  if (report.refused > 0) hedges_refused_->Increment(static_cast<double>(report.refused));
  if (report.cancelled > 0) hedges_cancelled_->Increment(static_cast<double>(report.cancelled));
}

}  // namespace stormguard::metrics
