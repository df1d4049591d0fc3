// SPDX-License-Identifier: Apache-2.0
// `stormguard lab payments`: charges through the retrying client, then the ledger audit
// (stormguard/lab/payments.hpp).
#include "stormguard/lab/payments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "lab/wire.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/http/client.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_after.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::lab {

namespace {

using namespace std::chrono_literals;

constexpr int k_max_concurrency = 256;
constexpr int k_customers = 100;  // principals per run

// Why one attempt of a charge failed: what classify_charge_attempt needs.
struct attempt_failure {
  std::optional<int> status;
  std::optional<transport_phase> phase;
  std::optional<duration> retry_after;
};

// What the client saw of one charge.
struct charge_record {
  std::string key;
  std::string principal;
  std::string charge_id;  // the 2xx's "id"
  bool started = false;
  bool ok = false;
};

std::string field_name(std::string_view field) {
  return "payments_run_options." + std::string(field);
}

std::int64_t amount_of(std::int64_t i) { return 100 + (i * 7919) % 99'900; }
const char* currency_of(std::int64_t i) { return i % 3 == 0 ? "usd" : "eur"; }

// Reports progress at most every 100 ms, from one thread at a time.
class progress_reporter {
 public:
  progress_reporter(const sim::progress_callback& callback, std::size_t total)
      : callback_(callback), total_(total) {}
  void ended() {
    const std::size_t done = done_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (!callback_) return;
    if (!mutex_.try_lock()) return;  // another thread is reporting
    const stormguard::detail::lock hold(mutex_, std::adopt_lock);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < 100ms && done != total_) return;
    last_ = now;
    callback_(done, total_);
  }

 private:
  const sim::progress_callback& callback_;
  std::size_t total_;
  std::atomic<std::size_t> done_{0};
  stormguard::detail::mutex mutex_;
  std::chrono::steady_clock::time_point last_ STORMGUARD_GUARDED_BY(mutex_){};
};

struct counters {
  std::atomic<std::int64_t> attempts{0};
  std::atomic<std::int64_t> replayed{0};
  std::atomic<std::int64_t> conflicts{0};
  std::atomic<std::int64_t> unavailable{0};
  std::atomic<std::int64_t> dropped{0};
};

struct ledger_entry {
  std::string principal;
  std::string key;
};

// A wire message (lab/wire.hpp) from a response body; nullopt when it is not one.
template <class Message>
std::optional<Message> parse_wire(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  try {
    return j.get<Message>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The client that reads the servers' /stats and /ledger (GETs, with the default retries; after
// an interruption one attempt of at most 1 s, so that SIGINT ends the run at once even when a
// server's store hangs).
http::client reading_client(duration attempt_timeout, bool quick = false) {
  http::client_options options;
  options.attempt_timeout = quick ? duration(1s) : std::max(attempt_timeout, duration(60s));
  options.connect_timeout = quick ? duration(1s) : duration(5s);
  if (quick) options.retry.max_retries = 0;
  options.max_body_bytes = std::size_t{1} << 30;
  return http::client(options);
}

// The servers' payments counters, summed: POST /charges read, and committed charges left
// unanswered (GET /stats "charges", "charges_dropped"); an error naming the first server that
// cannot be read or does not say.
struct server_counters {
  std::int64_t charges = 0;
  std::int64_t dropped = 0;
  std::vector<std::uint64_t> instances;  // each server's GET /stats "instance" (0: not said)
};
outcome<server_counters, std::string> read_counters(http::client& client,
                                                    const std::vector<std::string>& servers) {
  server_counters sum;
  for (const std::string& base : servers) {
    http::request req;
    req.url = base + "stats";
    const http::result r = client.perform(req);
    if (!r.response) {
      return failure{"cannot reach the server " + base + ": " +
                     (r.error ? r.error->message : std::string("no response"))};
    }
    if (r.response->status != 200) {
      return failure{"the server " + base + " answered GET /stats with " +
                     std::to_string(r.response->status)};
    }
    const auto stats = parse_wire<wire::stats_message>(r.response->body);
    if (!stats) {
      return failure{"the server " + base +
                     " is not a stormguard serve with the payments endpoint (GET /stats has no "
                     "\"charges\")"};
    }
    sum.charges += stats->stats.charges;
    sum.dropped += stats->stats.charges_dropped;
    sum.instances.push_back(stats->stats.instance);
  }
  return sum;
}

// Every server's ledger, each row once (by its charge id), and the first server's store name.
outcome<std::pair<std::unordered_map<std::string, ledger_entry>, std::string>, std::string>
read_ledgers(http::client& client, const std::vector<std::string>& servers,
             const std::string& token) {
  std::unordered_map<std::string, ledger_entry> rows;
  std::string store;
  for (const std::string& base : servers) {
    // Page by page (at most wire::k_ledger_max_limit rows each), each page's "next" the `after`
    // of the one that follows, until a page has none.
    std::string after;
    do {
      http::request req;
      req.url = base + "ledger?limit=" + std::to_string(wire::k_ledger_max_limit) +
                (after.empty() ? std::string() : "&after=" + after);
      if (!token.empty()) req.headers.push_back({"Authorization", "Bearer " + token});
      const http::result r = client.perform(req);
      if (!r.ok() || !r.response || r.response->status != 200) {
        const int status = r.response ? r.response->status : 0;
        // 404: the server has no operator token; 401: not this one (serve --ledger-token-file).
        const char* hint = status == 404   ? " (GET /ledger is off: start the server with "
                                             "--ledger-token-file and give the run the same file)"
                           : status == 401 ? " (the server wants another operator token: give "
                                             "the run its --ledger-token-file)"
                                           : "";
        return failure{fmt::format(
            "cannot read the ledger of {}: {}{}", base,
            r.response ? fmt::format("status {}", status)
                       : (r.error ? r.error->message : std::string(to_string(r.reason))),
            hint)};
      }
      auto ledger = parse_wire<wire::ledger_message>(r.response->body);
      if (!ledger || (!ledger->next.empty() && ledger->next == after)) {
        return failure{fmt::format(
            "the ledger of {} is not {{\"store\": ..., \"rows\": [...], \"next\": ...}}", base)};
      }
      if (store.empty()) store = ledger->store;
      for (wire::ledger_row& row : ledger->rows) {
        rows.try_emplace(std::move(row.id),
                         ledger_entry{std::move(row.principal), std::move(row.key)});
      }
      after = std::move(ledger->next);
    } while (!after.empty());
  }
  return std::pair{std::move(rows), std::move(store)};
}

void check_options(const payments_run_options& o) {
  if (o.servers.empty()) throw std::invalid_argument(field_name("servers") + ": none given");
  if (o.charges < 1) {
    throw std::invalid_argument(field_name("charges") + " " + std::to_string(o.charges) +
                                ": must be >= 1");
  }
  if (o.concurrency < 1 || o.concurrency > k_max_concurrency) {
    throw std::invalid_argument(field_name("concurrency") + " " + std::to_string(o.concurrency) +
                                ": must be in 1..256");
  }
  if (o.max_consecutive_unavailable < 0) {
    throw std::invalid_argument(field_name("max_consecutive_unavailable") + " " +
                                std::to_string(o.max_consecutive_unavailable) + ": must be >= 0");
  }
  if (o.attempt_timeout <= duration::zero()) {
    throw std::invalid_argument(field_name("attempt_timeout") + " " +
                                format_duration(o.attempt_timeout) + ": must be > 0");
  }
  if (o.deadline <= duration::zero()) {
    throw std::invalid_argument(field_name("deadline") + " " + format_duration(o.deadline) +
                                ": must be > 0");
  }
}

/// The audit proper: this run's charges against the ledger's rows (rows of other runs counted
/// apart), into `a`'s charges, succeeded, failed, ledger_rows, other_rows, duplicates, lost and
/// unconfirmed.
void count_ledger(const std::vector<charge_record>& records,
                  const std::unordered_map<std::string, ledger_entry>& rows, payments_audit& a) {
  const std::size_t n = records.size();
  std::unordered_map<std::string_view, std::size_t> by_key;
  for (std::size_t i = 0; i < n; ++i) {
    if (!records[i].started) continue;
    ++a.charges;
    if (records[i].ok) {
      ++a.succeeded;
    } else {
      ++a.failed;
    }
    by_key.emplace(records[i].key, i);
  }
  std::vector<std::int64_t> rows_of(n, 0);
  std::unordered_set<std::string_view> ids;
  for (const auto& [id, row] : rows) {
    const auto it = by_key.find(row.key);
    // The keys are random UUIDs, new for each charge of this run: the key alone tells this
    // run's rows apart (the servers show principals only as a keyed digest).
    if (it == by_key.end()) {
      ++a.other_rows;
      continue;
    }
    ++a.ledger_rows;
    ++rows_of[it->second];
    ids.insert(id);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const charge_record& rec = records[i];
    if (!rec.started) continue;
    if (rows_of[i] > 1) a.duplicates += rows_of[i] - 1;
    if (rec.ok && !ids.contains(rec.charge_id)) ++a.lost;
    if (!rec.ok && rows_of[i] > 0) ++a.unconfirmed;
  }
}

}  // namespace

retry_options default_payments_retry() noexcept {
  retry_options r;
  r.max_retries = 9;
  r.backoff.base = 5ms;
  r.backoff.cap = 200ms;
  r.backoff.multiplier = 2.0;
  r.backoff.jitter = jitter::full;
  return r;
}

classification classify_charge_attempt(std::optional<int> status,
                                       std::optional<transport_phase> phase,
                                       std::optional<duration> retry_after,
                                       const retryable_statuses& statuses) {
  // The library's HTTP rules for a POST with an Idempotency-Key: a 409 (the key in progress) and
  // a connection closed after the request was sent are retried, as a 503 is.
  if (status) return classify_http_status(*status, "POST", true, retry_after, statuses);
  if (!phase) return classification::stop();
  return classify_transport_failure(*phase, "POST", true);
}

std::string describe_payments_retry(const retry_options& retry, const budget_options& budget) {
  const auto& b = retry.backoff;
  return fmt::format("{} retries, {} jitter {}..{} x{}, Retry-After up to {}, {}",
                     retry.max_retries, to_string(b.jitter), format_duration(b.base),
                     format_duration(b.cap), detail::format_double(b.multiplier),
                     format_duration(retry.max_retry_after),
                     std::holds_alternative<no_budget>(budget)
                         ? std::string("no retry budget")
                         : fmt::format("a {} retry budget", budget_kind(budget)));
}

namespace {

// One run of run_payments: the charges' records and counters, shared by the worker threads.
class payments_run {
 public:
  explicit payments_run(const payments_run_options& o)
      : o_(o),
        policy_(o.retry),   // validates
        budget_(o.budget),  // one for the run, shared by every charge
        // A run id in the principals, so that a shared ledger tells this run's customers apart.
        run_(make_idempotency_key().substr(0, 8)),
        records_(static_cast<std::size_t>(o.charges)),
        progress_(o.progress, static_cast<std::size_t>(o.charges)) {}

  // Sends every charge from o.concurrency threads; the time it took, or why not. The caller's
  // stop flag is watched every 20 ms and turned into a stop request that cancels the attempts
  // in flight and the backoff sleeps (a flag set by a signal handler cannot request it itself).
  outcome<duration, std::string> send_all() {
    const auto began = std::chrono::steady_clock::now();
    {
      std::jthread watcher;
      if (o_.stop != nullptr) {
        watcher = std::jthread([this](const std::stop_token& done) {
          while (!done.stop_requested() && !stop_.stop_requested()) {
            if (o_.stop->load()) {
              stop_.request_stop();
              break;
            }
            std::this_thread::sleep_for(20ms);
          }
        });
      }
      std::vector<std::jthread> threads;
      const int workers = static_cast<int>(std::min<std::int64_t>(o_.concurrency, o_.charges));
      threads.reserve(static_cast<std::size_t>(workers));
      for (int t = 0; t < workers; ++t) threads.emplace_back([this] { work(); });
      threads.clear();  // joins the workers, then the watcher is asked to end and joined
    }
    const auto sent_time = std::chrono::steady_clock::now() - began;
    const stormguard::detail::lock hold(error_mutex_);
    if (!setup_error_.empty()) return failure{setup_error_};
    return std::chrono::duration_cast<duration>(sent_time);
  }

  // The audit's client-side figures.
  [[nodiscard]] payments_audit client_side(duration elapsed) const {
    payments_audit a;
    a.servers = static_cast<int>(o_.servers.size());
    a.policy = describe_payments_retry(o_.retry, o_.budget);
    a.elapsed = elapsed;
    a.gave_up = gave_up_.load();
    a.interrupted = !a.gave_up && stop_.stop_requested();
    a.client_attempts = count_.attempts.load();
    a.attempts = a.client_attempts;
    a.replayed = count_.replayed.load();
    a.conflicts = count_.conflicts.load();
    a.unavailable = count_.unavailable.load();
    a.no_response = count_.dropped.load();
    return a;
  }

  [[nodiscard]] const std::vector<charge_record>& records() const noexcept { return records_; }
  /// The run was cut short (interrupted, or gave up).
  [[nodiscard]] bool cut() const noexcept { return stop_.stop_requested(); }

 private:
  // One worker thread: its own HTTP client and retrier, then charges until none is left.
  void work() {
    std::optional<http::client> client;
    try {
      http::client_options options;
      options.retry.max_retries = 0;  // one attempt per perform(): the retrier below retries
      options.attempt_timeout = o_.attempt_timeout;
      options.connect_timeout = std::min(o_.attempt_timeout, duration(5s));
      client.emplace(options);
    } catch (const std::exception& e) {
      const stormguard::detail::lock hold(error_mutex_);
      if (setup_error_.empty()) {
        setup_error_ = std::string("cannot set up the HTTP client: ") + e.what();
      }
      return;
    }
    real_clock clock;
    random_generator random;  // the jitter: OS-seeded, one per thread
    retrier<random_generator, any_budget> retry(policy_, clock, random, budget_);
    while (!stop_.stop_requested()) {
      const std::int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= o_.charges) break;
      charge(*client, retry, i);
      progress_.ended();
    }
  }

  // Charge i, with its retries.
  void charge(http::client& client, retrier<random_generator, any_budget>& retry, std::int64_t i) {
    charge_record& rec = records_[static_cast<std::size_t>(i)];
    rec.started = true;
    rec.key = make_idempotency_key();
    rec.principal = fmt::format("cus_{}_{}", run_, i % k_customers);
    const std::string body =
        fmt::format(R"({{"amount": {}, "currency": "{}"}})", amount_of(i), currency_of(i));
    bool replay = false;
    const auto classify = [&](const attempt_failure& f) {
      return classify_charge_attempt(f.status, f.phase, f.retry_after, o_.statuses);
    };
    call_options call{
        .stop =
            stop_.get_token()};  // and the charge's deadline, on the retrier's clock (real_clock)
    if (o_.deadline != duration::max()) {
      call.deadline = stormguard::detail::saturating_add(real_clock().now(), o_.deadline);
    }
    auto ended = retry(
        [&](const attempt_context& ctx) {
          const std::string& base =
              o_.servers[static_cast<std::size_t>(i + ctx.attempt - 1) % o_.servers.size()];
          return attempt(client, base, rec, body, replay);
        },
        classify, call);
    if (ended.ok()) {
      rec.ok = true;
      if (replay) count_.replayed.fetch_add(1, std::memory_order_relaxed);
      const nlohmann::json j = nlohmann::json::parse(*ended.value, nullptr, false);
      if (j.is_object()) rec.charge_id = j.value("id", "");
    }
  }

  // One POST /charges to `base`: the 2xx's body, or what failed.
  outcome<std::string, attempt_failure> attempt(http::client& client, const std::string& base,
                                                const charge_record& rec, const std::string& body,
                                                bool& replay) {
    http::request req;
    req.method = "POST";
    req.url = base + "charges";
    // A new connection per attempt: libcurl resends a request by itself, to the same server,
    // when a reused connection closes before any byte of the response — the fault this run
    // injects — and the retry must be the retrier's, on another replica.
    req.headers = {{"Authorization", "Bearer " + rec.principal},
                   {"Content-Type", "application/json"},
                   {"Connection", "close"}};
    req.body = body;
    req.idempotency = http::key::use(rec.key);
    count_.attempts.fetch_add(1, std::memory_order_relaxed);
    http::result r = client.perform(req, call_options{.stop = stop_.get_token()});
    if (r.reason == end_reason::cancelled && !r.response) {
      // Stopped: the run ends (the request may have reached the server: the audit tells).
      if (r.attempts == 0) count_.attempts.fetch_sub(1, std::memory_order_relaxed);
      return failure{attempt_failure{std::nullopt, std::nullopt, std::nullopt}};
    }
    if (!r.response) {
      count_.dropped.fetch_add(1, std::memory_order_relaxed);
      return failure{
          attempt_failure{std::nullopt, r.error ? r.error->phase : std::nullopt, std::nullopt}};
    }
    const int status = r.response->status;
    note_store_answer(status);
    if (status >= 200 && status < 300) {
      replay = r.response->header_value("Idempotent-Replayed") == "true";
      return std::move(r.response->body);
    }
    if (status == 409) count_.conflicts.fetch_add(1, std::memory_order_relaxed);
    if (status == 503 && count_.unavailable.fetch_add(1, std::memory_order_relaxed) == 0 &&
        o_.on_first_unavailable) {
      o_.on_first_unavailable(
          "a server answered 503 (" + base +
          "): its idempotency store is unavailable; the charges wait and retry, so the run "
          "lasts as long as the outage or the retries");
    }
    std::optional<duration> retry_after;
    if (const auto field = r.response->header_value("Retry-After")) {
      retry_after = parse_retry_after(*field, std::chrono::system_clock::now());
    }
    return failure{attempt_failure{status, std::nullopt, retry_after}};
  }

  // Counts consecutive 503s (the store unavailable); gives up at the options' limit.
  void note_store_answer(int status) {
    if (status != 503) {
      consecutive_unavailable_.store(0, std::memory_order_relaxed);
      return;
    }
    const std::int64_t n = consecutive_unavailable_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (o_.max_consecutive_unavailable > 0 && n >= o_.max_consecutive_unavailable &&
        !gave_up_.exchange(true)) {
      stop_.request_stop();
    }
  }

  const payments_run_options& o_;
  std::stop_source stop_;  // the run's: the caller's flag, or giving up
  std::atomic<std::int64_t> consecutive_unavailable_{0};
  std::atomic<bool> gave_up_{false};
  const retry_policy policy_;
  any_budget budget_;
  const std::string run_;
  std::vector<charge_record> records_;
  counters count_;
  progress_reporter progress_;
  std::atomic<std::int64_t> next_{0};
  stormguard::detail::mutex error_mutex_;
  std::string setup_error_ STORMGUARD_GUARDED_BY(error_mutex_);
};

}  // namespace

outcome<payments_audit, std::string> run_payments(const payments_run_options& o) {
  check_options(o);
  payments_run run(o);
  http::client reader = reading_client(o.attempt_timeout);
  // Every server answers before the first charge: a dead or wrong --server fails at once.
  const outcome<server_counters, std::string> before = read_counters(reader, o.servers);
  if (!before) return failure{before.error()};
  const auto sent = run.send_all();
  if (!sent) return failure{sent.error()};

  payments_audit a = run.client_side(*sent);
  // After a cut run, one quick attempt per read: an interrupted run must end at once.
  if (run.cut()) reader = reading_client(o.attempt_timeout, true);
  if (const outcome<server_counters, std::string> after = read_counters(reader, o.servers); after) {
    if ((*after).charges < (*before).charges || (*after).dropped < (*before).dropped ||
        (*after).instances != (*before).instances) {
      // A server restarted during the run (its counters began again at 0; its instance
      // changed, which also shows a restart whose counters grew past the earlier ones): its
      // difference means nothing. The client's own count stands in.
      a.counters_reset = true;
      a.dropped.reset();
    } else {
      a.attempts = (*after).charges - (*before).charges;
      a.dropped = (*after).dropped - (*before).dropped;
    }
  }
  auto ledger = read_ledgers(reader, o.servers, o.ledger_token);
  if (!ledger) {
    if (a.gave_up) {
      return failure{fmt::format(
          "gave up after {} consecutive 503s (the servers' idempotency store stayed down), and "
          "{}",
          o.max_consecutive_unavailable, ledger.error())};
    }
    return failure{(a.interrupted ? "interrupted, and " : "") + ledger.error()};
  }
  auto& [rows, store] = *ledger;
  a.store = store;
  count_ledger(run.records(), rows, a);
  return a;
}

}  // namespace stormguard::lab
