// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's connection layer (src/guard/postgres_connection.hpp).
#include "guard/postgres_connection.hpp"

#include <poll.h>

#include <cerrno>
#include <climits>
#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::guard::internal {

std::string one_line(const char* message) {
  std::string out = message != nullptr ? message : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  for (char& c : out) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return detail::escape_control(detail::redact(out), 1000);
}

void fail(std::string_view what, std::string_view why) {
  throw store_error("postgres store: " + std::string(what) + ": " + std::string(why));
}

// --- the connection ---

pg_connection::pg_connection(const pg_settings& s) : reply_timeout_(s.reply_timeout) {
  // dbname with expand_dbname = 1: the URL's own parameters, then ours, which override the
  // URL's (the store's bounds hold whatever the URL says); fallback_application_name does not
  // override application_name.
  const char* const keys[] = {"dbname",           "connect_timeout",           "keepalives",
                              "keepalives_idle",  "keepalives_interval",       "keepalives_count",
                              "tcp_user_timeout", "fallback_application_name", nullptr};
  const char* const values[] = {s.url.c_str(),
                                s.connect_timeout.c_str(),
                                "1",
                                s.keepalives_idle.c_str(),
                                s.keepalives_interval.c_str(),
                                "3",
                                s.tcp_user_timeout.c_str(),
                                "stormguard",
                                nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (conn_ == nullptr) fail("cannot connect", "libpq: out of memory");
  if (PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = one_line(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    fail("cannot connect", why);
  }
  // A library does not print the server's NOTICEs ("relation ... already exists, skipping");
  // a FATAL message that arrives while the connection is idle (the server shuts down, the
  // backend is terminated) is noted: the connection is about to close.
  PQsetNoticeReceiver(
      conn_,
      [](void* self, const PGresult* r) {
        const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity != nullptr && std::string_view(severity) == "FATAL") {
          static_cast<pg_connection*>(self)->closing_ = true;
        }
      },
      this);
}

bool pg_connection::still_connected() noexcept {
  if (timed_out_ || closing_ || PQstatus(conn_) != CONNECTION_OK) return false;
  // Whatever arrived while the connection was idle: a harmless ParameterStatus or NOTICE, or
  // (the server restarted, the backend was terminated) a FATAL message and then the end of the
  // stream, which the next read sees. A few rounds read both.
  for (int round = 0; round < 8; ++round) {
    pollfd p{PQsocket(conn_), POLLIN, 0};
    int rc = 0;
    do {
      rc = ::poll(&p, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc <= 0) return rc == 0 && PQstatus(conn_) == CONNECTION_OK;
    if (PQconsumeInput(conn_) != 1) return false;
    (void)PQisBusy(conn_);  // parses what arrived (notices, a FATAL error)
    if (closing_ || PQstatus(conn_) != CONNECTION_OK) return false;
  }
  return PQstatus(conn_) == CONNECTION_OK;
}

void pg_connection::await_result(std::chrono::steady_clock::time_point deadline,
                                 std::string_view what) {
  while (PQisBusy(conn_) != 0) {
    if (PQstatus(conn_) != CONNECTION_OK) return;  // PQgetResult reports it
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) {
      timed_out_ = true;  // the reply may still come: the connection is out of step, close it
      fail(what, "no reply within " + format_duration(reply_timeout_) +
                     " (postgres_options.reply_timeout): the server is hung or unreachable; "
                     "connection closed");
    }
    pollfd p{PQsocket(conn_), POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), INT_MAX)));
    if (rc < 0 && errno != EINTR) fail(what, "poll() on the connection's socket failed");
    if (rc > 0 && PQconsumeInput(conn_) != 1) return;  // broken: PQgetResult reports it
  }
}

// --- parameters ---

void bound_params::bytes(std::string_view field, std::string_view v) {
  if (v.size() > static_cast<std::size_t>(INT_MAX)) {
    throw std::invalid_argument("postgres store: " + std::string(field) + " of " +
                                std::to_string(v.size()) + " bytes: at most 2147483647");
  }
  // A null pointer would be SQL NULL: an empty value needs a valid one.
  values_.push_back(v.empty() ? "" : v.data());
  lengths_.push_back(static_cast<int>(v.size()));
  formats_.push_back(1);
}

void bound_params::text(std::string_view field, std::string_view v) {
  if (v.find('\0') != std::string_view::npos) {
    throw std::invalid_argument("postgres store: " + std::string(field) + " " +
                                detail::quote_for_message(v) +
                                ": contains a NUL byte, which PostgreSQL text cannot hold");
  }
  owned_.emplace_back(v);
  values_.push_back(owned_.back().c_str());
  lengths_.push_back(0);
  formats_.push_back(0);
}

void bound_params::big_endian(std::uint64_t v, int n) {
  std::string& s = owned_.emplace_back(static_cast<std::size_t>(n), '\0');
  for (int i = n - 1; i >= 0; --i) {
    s[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xffU);
    v >>= 8U;
  }
  values_.push_back(s.data());
  lengths_.push_back(n);
  formats_.push_back(1);
}

// --- running statements ---

namespace {

void send(PGconn* c, const command& cmd, std::string_view what) {
  int sent = 0;
  if (cmd.what == command::kind::prepare) {
    sent = PQsendPrepare(c, cmd.name, cmd.text, static_cast<int>(cmd.types.size()),
                         cmd.types.empty() ? nullptr : cmd.types.data());
  } else if (cmd.params != nullptr) {
    sent = PQsendQueryPrepared(c, cmd.name, cmd.params->size(), cmd.params->values(),
                               cmd.params->lengths(), cmd.params->formats(), cmd.result_format);
  } else {
    sent = PQsendQueryPrepared(c, cmd.name, 0, nullptr, nullptr, nullptr, cmd.result_format);
  }
  if (sent != 1) fail(what, one_line(PQerrorMessage(c)));
}

/// Every result of the statement in flight, the first error kept (as PQexec would report it);
/// null when there was none.
pg_result collect(pg_connection& conn, std::string_view what) {
  const auto deadline = conn.deadline();
  pg_result kept;
  for (;;) {
    conn.await_result(deadline, what);
    pg_result r(PQgetResult(conn.get()));
    if (!r) return kept;
    if (!kept || (succeeded(kept) && !succeeded(r))) kept = std::move(r);
  }
}

}  // namespace

std::vector<pg_result> run_pipeline(pg_connection& conn, std::span<const command> commands,
                                    std::string_view what) {
  PGconn* c = conn.get();
  if (PQenterPipelineMode(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  for (const command& cmd : commands) send(c, cmd, what);
  if (PQpipelineSync(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  std::vector<pg_result> results(commands.size());
  std::size_t i = 0;
  const auto deadline = conn.deadline();
  for (;;) {
    conn.await_result(deadline, what);
    pg_result r(PQgetResult(c));
    if (!r) {  // the end of one command's results
      if (PQstatus(c) != CONNECTION_OK) fail(what, one_line(PQerrorMessage(c)));
      if (++i > commands.size()) fail(what, "libpq pipeline out of step");
      continue;
    }
    if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    if (PQstatus(c) != CONNECTION_OK) fail(what, one_line(PQerrorMessage(c)));
    if (i < results.size() && !results[i]) results[i] = std::move(r);
  }
  if (i != commands.size()) fail(what, "libpq pipeline out of step");
  if (PQexitPipelineMode(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  for (auto& r : results) {
    if (!r) fail(what, "libpq pipeline returned no result");
  }
  return results;
}

pg_result exec_prepared(pg_connection& conn, const char* name, const bound_params* params,
                        int result_format, std::string_view what) {
  const int sent =
      params != nullptr
          ? PQsendQueryPrepared(conn.get(), name, params->size(), params->values(),
                                params->lengths(), params->formats(), result_format)
          : PQsendQueryPrepared(conn.get(), name, 0, nullptr, nullptr, nullptr, result_format);
  if (sent != 1) return nullptr;
  return collect(conn, what);
}

pg_result exec_simple(pg_connection& conn, const char* sql, std::string_view what) {
  if (PQsendQuery(conn.get(), sql) != 1) return nullptr;
  return collect(conn, what);
}

std::string first_error(const std::vector<pg_result>& results) {
  for (const auto& r : results) {
    if (!succeeded(r) && PQresultStatus(r.get()) != PGRES_PIPELINE_ABORTED) {
      return one_line(PQresultErrorMessage(r.get()));
    }
  }
  return "aborted";
}

void check(const pg_result& r, const pg_connection& conn, std::string_view what) {
  if (!r) fail(what, one_line(PQerrorMessage(conn.get())));
  if (!succeeded(r)) {
    const char* m = PQresultErrorMessage(r.get());
    fail(what, one_line(m != nullptr && *m != '\0' ? m : PQerrorMessage(conn.get())));
  }
}

}  // namespace stormguard::guard::internal
