// SPDX-License-Identifier: Apache-2.0
// The payments endpoint of lab::server (server_options::payments; docs/idempotency.md):
// `POST /charges` writes one ledger row behind the idempotency guard, `GET /ledger` returns the
// ledger. No libevent here: the server hands over the request's fields and sends (or, for a fault,
// does not send) the answer.
//
//   lab::detail::charges_endpoint endpoint({.idempotency = "sqlite:/tmp/ledger.db"});
//   lab::detail::charge_answer a = endpoint.charge({.authorization = "Bearer cus_1",
//                                                   .idempotency_key = "\"k-1\"",
//                                                   .target = "/charges",
//                                                   .body = R"({"amount": 1234, "currency":
//                                                   "eur"})"});
//   // a.response: 201 {"id":"ch_...","object":"charge","amount":1234,"currency":"eur"}
//
// A charge, in order (Stripe's "Idempotent requests": a request that fails validation has not
// started executing, so its key is not used up and the client may correct it and send it again):
//   1. Authorization: absent → the anonymous principal ""; "Bearer TOKEN" (RFC 6750 §2.1, the
//      scheme case-insensitive, TOKEN a b64token) → TOKEN; anything else → 401 invalid_token.
//   2. The body: a JSON object with exactly "amount" (an integer in 1..99,999,999, the smallest
//      currency unit) and "currency" (three lowercase ASCII letters) → else 400 invalid_body.
//   3. The guard (guard::idempotency_guard, key required): 400 without a key or with a bad one,
//      409 while in progress, 422 for another request with the same key, the stored response
//      replayed, 503 when the store is down — or the handler runs, and writes the row through the
//      guard's transaction (SQL: INSERT INTO stormguard_ledger; Redis: RPUSH stormguard_ledger),
//      so the row and the stored response commit together.
//   With idempotency "off": steps 1 and 2, then the row is appended to a ledger in memory, every
//   time (with the key's value if there is one, or ""): the double charge a retry causes.
//
// Thread-safety: charge() from one thread at a time (the server's charge worker), ledger() from
// one thread at a time (its ledger worker), the two at once: the ledger is read through a store
// connection of its own, so a ledger read never waits behind a charge's store calls nor holds
// them (with idempotency off, a mutex guards the ledger in memory).
#ifndef STORMGUARD_SRC_LAB_CHARGES_HPP
#define STORMGUARD_SRC_LAB_CHARGES_HPP

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "lab/wire.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/metrics/guard.hpp"
#include "stormguard/random.hpp"

namespace stormguard::lab::detail {

/// The name of the ledger's table (SQL) or list (Redis).
inline constexpr std::string_view ledger_table = "stormguard_ledger";

/// The fields of a `POST /charges` request the endpoint reads. Views valid during charge().
struct charge_request {
  std::optional<std::string_view> authorization;    ///< the Authorization field, if any
  std::optional<std::string_view> idempotency_key;  ///< the Idempotency-Key field, if any
  std::string_view target = "/charges";             ///< the request target (fingerprinted)
  std::string_view body;
  /// When the loop received it (steady clock): guard::request::arrived.
  std::optional<time_point> arrived{};
};

/// What to do with a charge.
struct charge_answer {
  guard::stored_response response;
  bool committed = false;          ///< the handler ran and its row committed (or was appended: off)
  bool replayed = false;           ///< the guard replayed an earlier response
  bool store_unavailable = false;  ///< the guard answered 503: the store is down
  bool drop = false;               ///< fault_after_commit: close the connection, send nothing
};

using wire::ledger_message;
using wire::ledger_row;

/// One page of GET /ledger: rows after the cursor `after` (0: from the first), at most `limit`.
struct ledger_query {
  std::int64_t after = 0;
  std::int64_t limit = wire::k_ledger_max_limit;
};

/// The query of GET /ledger (name, value pairs, decoded): `after` (the `next` of the page before:
/// decimal digits) and `limit` (1..wire::k_ledger_max_limit), each at most once; or the reason
/// it is refused, naming the parameter and quoting its value.
[[nodiscard]] outcome<ledger_query, std::string> read_ledger_query(
    const std::vector<std::pair<std::string, std::string>>& parameters);

/// The 400 (problem details, code "invalid_query") of a query read_ledger_query refused.
[[nodiscard]] guard::stored_response ledger_query_error(const std::string& message);

/// A guard_observer that keeps the store's last failure for the operator
/// (lab::server::last_store_failure) and passes every callback on to `next`. Thread-safe (one
/// mutex, held to copy a string).
class store_failure_log final : public guard::guard_observer {
 public:
  /// `next` must outlive it.
  explicit store_failure_log(guard::guard_observer& next) noexcept : next_(next) {}
  void on_decision(guard::decision d, bool took_over) noexcept override {
    next_.on_decision(d, took_over);
  }
  void on_store_call(guard::store_operation op, duration latency, bool failed) noexcept override {
    next_.on_store_call(op, latency, failed);
  }
  void on_store_error(guard::store_operation op, std::string_view message) noexcept override;
  void on_store_state(bool down) noexcept override { next_.on_store_state(down); }
  /// "CAUSE (OPERATION): MESSAGE" of the last failure; "" before the first.
  [[nodiscard]] std::string last() const;

 private:
  guard::guard_observer& next_;
  mutable stormguard::detail::mutex mutex_;
  std::string last_ STORMGUARD_GUARDED_BY(mutex_);
};

/// The endpoint (see the file comment).
class charges_endpoint {
 public:
  /// Opens the store of `options.idempotency` (guard::open_store) and creates the ledger's
  /// table if absent. Throws std::invalid_argument for a bad spec or a fault_after_commit
  /// outside [0, 1], guard::store_error when the store cannot be opened or reached.
  explicit charges_endpoint(const payments_options& options);
  ~charges_endpoint();
  charges_endpoint(const charges_endpoint&) = delete;
  charges_endpoint& operator=(const charges_endpoint&) = delete;

  /// "sqlite", "postgres", "redis" or "off".
  [[nodiscard]] std::string_view store_name() const noexcept;

  /// Handles one `POST /charges` (see the file comment). Never throws except std::bad_alloc (a
  /// store that fails is the guard's 503).
  [[nodiscard]] charge_answer charge(const charge_request& request);

  /// The guard's Prometheus metrics (stormguard/metrics/guard.hpp: decisions, store errors,
  /// store latency, the short circuit) in the text exposition format; "" with idempotency off.
  /// Thread-safe (prometheus-cpp's registry): the loop thread reads it while the worker charges.
  [[nodiscard]] std::string guard_metrics_text() const;

  /// The store's last failure (store_failure_log::last); "" without one or with idempotency off.
  /// Thread-safe.
  [[nodiscard]] std::string last_store_failure() const;

  /// The body of `GET /ledger`: {"store": NAME, "rows": [{"id", "principal", "key", "amount",
  /// "currency"}, ...], "next": CURSOR} — one page of at most q.limit rows after q.after, in the
  /// order the rows were written, "next" only when more may follow — as a 200; a 503 when the
  /// store cannot be read. Reads through its own store connection (see the file comment).
  [[nodiscard]] guard::stored_response ledger(const ledger_query& q);
  /// Whether `GET /ledger` with this Authorization field may read the ledger: nullopt when it
  /// may; otherwise the answer: 404 (problem code "ledger_off") without a ledger_token, 401
  /// (code "ledger_token", WWW-Authenticate: Bearer) without the token or with another one.
  /// Compares keyed digests in constant time. Thread-safe (reads what the constructor set).
  [[nodiscard]] std::optional<guard::stored_response> ledger_refusal(
      std::optional<std::string_view> authorization) const;

 private:
  [[nodiscard]] ledger_message read_ledger(const ledger_query& q);

  payments_options options_;         // ledger_token emptied: ledger_token_digest_ keeps it
  std::string ledger_token_digest_;  // principal_digest(token, k_ledger_token_key); "" = off
  std::unique_ptr<guard::store> store_;
  // The guard's observer: declared before the guard, which holds its address.
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::guard_metrics> guard_metrics_;
  std::unique_ptr<store_failure_log> failure_log_;  // passes on to guard_metrics_
  std::unique_ptr<guard::idempotency_guard> guard_;
  std::unique_ptr<guard::store> ledger_store_;  // GET /ledger's own connection
  mutable stormguard::detail::mutex memory_mutex_;
  std::vector<ledger_row> memory_ STORMGUARD_GUARDED_BY(memory_mutex_);  // off
  random_generator faults_;
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_CHARGES_HPP
