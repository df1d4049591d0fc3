// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's connection layer (src/guard/postgres_store.cpp is the store): a libpq
// connection with bounded waits, parameters bound in binary, pipelined batches, and the errors
// they raise. Internal.
//
// Every wait for the server is bounded by the connection's reply timeout: libpq's blocking calls
// (PQexec, PQgetResult) would wait forever for a server that is stopped (SIGSTOP) or behind a
// partition that drops packets without a reset, so results are awaited with poll() on the socket
// and a connection that does not answer in time is closed (the call throws store_error).
#ifndef STORMGUARD_SRC_GUARD_POSTGRES_CONNECTION_HPP
#define STORMGUARD_SRC_GUARD_POSTGRES_CONNECTION_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stormguard/guard/store.hpp"

namespace stormguard::guard::internal {

// Type OIDs of the parameters of the store's own statements (pg_type.dat; fixed since 7.x).
inline constexpr Oid k_bytea = 17;
inline constexpr Oid k_int8 = 20;
inline constexpr Oid k_int4 = 23;

struct pg_result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using pg_result = std::unique_ptr<PGresult, pg_result_deleter>;

/// libpq's message on one line (trailing newline removed, tabs and newlines as spaces), control
/// bytes escaped and secrets redacted (detail::redact).
[[nodiscard]] std::string one_line(const char* message);

/// Throws store_error("postgres store: WHAT: WHY").
[[noreturn]] void fail(std::string_view what, std::string_view why);

/// How a connection is opened (postgres_options, checked).
struct pg_settings {
  std::string url;
  std::string connect_timeout;      ///< whole seconds, as libpq takes it
  std::string keepalives_idle;      ///< whole seconds
  std::string keepalives_interval;  ///< whole seconds
  std::string tcp_user_timeout;     ///< milliseconds
  std::chrono::milliseconds statement_timeout{};
  std::chrono::milliseconds reply_timeout{};
};

/// A connection and the handler statements prepared on it. Used by one thread at a time (the
/// pool lends it out).
class pg_connection {
 public:
  /// Connects (blocking, at most connect_timeout); throws store_error with libpq's reason.
  explicit pg_connection(const pg_settings& settings);
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;
  ~pg_connection() { PQfinish(conn_); }
  [[nodiscard]] PGconn* get() const noexcept { return conn_; }
  /// Usable for the next call: connected, outside any transaction, not in pipeline mode, and no
  /// reply timed out on it.
  [[nodiscard]] bool healthy() const noexcept {
    return !timed_out_ && !closing_ && PQstatus(conn_) == CONNECTION_OK &&
           PQtransactionStatus(conn_) == PQTRANS_IDLE && PQpipelineStatus(conn_) == PQ_PIPELINE_OFF;
  }
  /// Whether an idle pooled connection is still there: reads what the server sent while it was
  /// idle (after a server restart or pg_terminate_backend, a FATAL message and the end of the
  /// stream) without blocking. False: close it and take another, nothing was sent on it.
  [[nodiscard]] bool still_connected() noexcept;

  /// Waits (at most the reply timeout from `deadline`'s start) until PQgetResult would not block.
  /// Throws store_error, and marks the connection unhealthy, when the server does not answer.
  void await_result(std::chrono::steady_clock::time_point deadline, std::string_view what);
  /// The deadline of a call that starts now.
  [[nodiscard]] std::chrono::steady_clock::time_point deadline() const noexcept {
    return std::chrono::steady_clock::now() + reply_timeout_;
  }

  std::unordered_map<std::string, std::string> statements;  ///< handler statement -> its name
  std::uint64_t next_statement = 0;

 private:
  PGconn* conn_ = nullptr;
  std::chrono::milliseconds reply_timeout_;
  bool timed_out_ = false;
  bool closing_ = false;  ///< the server sent a FATAL message while the connection was idle
};

/// Parameters of one statement. Views passed to bytes() must outlive the statement's execution.
class bound_params {
 public:
  /// Binary (BYTEA, or TEXT's raw bytes).
  void bytes(std::string_view field, std::string_view v);
  /// Binary BIGINT (8 bytes, big-endian).
  void int8(std::int64_t v) { big_endian(static_cast<std::uint64_t>(v), 8); }
  /// Binary INTEGER (4 bytes, big-endian).
  void int4(std::int32_t v) { big_endian(static_cast<std::uint32_t>(v), 4); }
  /// Text, NUL-terminated (the handler's parameters; text cannot hold NUL).
  void text(std::string_view field, std::string_view v);

  [[nodiscard]] int size() const noexcept { return static_cast<int>(values_.size()); }
  [[nodiscard]] const char* const* values() const noexcept { return values_.data(); }
  [[nodiscard]] const int* lengths() const noexcept { return lengths_.data(); }
  [[nodiscard]] const int* formats() const noexcept { return formats_.data(); }

 private:
  void big_endian(std::uint64_t v, int n);

  std::deque<std::string> owned_;  // a deque: push_back never moves the strings already there
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

/// One command of a pipelined batch.
struct command {
  enum class kind : std::uint8_t { prepare, execute };
  kind what = kind::execute;
  const char* name = "";
  const char* text = nullptr;            ///< prepare: the statement
  std::span<const Oid> types{};          ///< prepare: the parameters' types (empty: inferred)
  const bound_params* params = nullptr;  ///< execute: its parameters (nullptr: none)
  int result_format = 1;                 ///< execute: 1 binary, 0 text
};

/// Sends `commands` in one pipeline (one round trip) and returns each one's result (a failed
/// command's result holds the error; the ones after it PGRES_PIPELINE_ABORTED). Throws
/// store_error when the connection fails or does not answer; the connection is then unhealthy.
[[nodiscard]] std::vector<pg_result> run_pipeline(pg_connection& conn,
                                                  std::span<const command> commands,
                                                  std::string_view what);

/// Runs one prepared statement and returns its result (PQexecPrepared, with the reply bounded).
/// Null when it could not be sent; check() reports it.
[[nodiscard]] pg_result exec_prepared(pg_connection& conn, const char* name,
                                      const bound_params* params, int result_format,
                                      std::string_view what);

/// Runs `sql` with the simple-query protocol (several statements, no parameters) and returns its
/// last result (PQexec, with the reply bounded).
[[nodiscard]] pg_result exec_simple(pg_connection& conn, const char* sql, std::string_view what);

[[nodiscard]] inline bool succeeded(const pg_result& r) noexcept {
  const ExecStatusType s = PQresultStatus(r.get());
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY;
}

/// The first error among `results` (the one that aborted the pipeline).
[[nodiscard]] std::string first_error(const std::vector<pg_result>& results);

/// Throws store_error unless `r` succeeded; `c`'s message when the connection failed.
void check(const pg_result& r, const pg_connection& conn, std::string_view what);

/// One column of a result, as bytes.
[[nodiscard]] inline std::string_view field(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
}

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_POSTGRES_CONNECTION_HPP
