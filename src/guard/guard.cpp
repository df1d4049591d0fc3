// SPDX-License-Identifier: Apache-2.0
// The idempotency guard's protocol (include/stormguard/guard/guard.hpp).
#include "stormguard/guard/guard.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "detail/json_writer.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/idempotency.hpp"

namespace stormguard::guard {

std::string_view to_string(store_kind kind) noexcept {
  switch (kind) {
    case store_kind::sqlite:
      return "sqlite";
    case store_kind::postgres:
      return "postgres";
    case store_kind::redis:
      return "redis";
  }
  return "unknown";
}

std::string_view to_string(decision d) noexcept {
  switch (d) {
    case decision::ran:
      return "ran";
    case decision::replayed:
      return "replayed";
    case decision::passed_through:
      return "passed_through";
    case decision::missing_key:
      return "missing_key";
    case decision::bad_key:
      return "bad_key";
    case decision::bad_principal:
      return "bad_principal";
    case decision::in_progress:
      return "in_progress";
    case decision::lease_lost:
      return "lease_lost";
    case decision::mismatch:
      return "mismatch";
    case decision::response_too_large:
      return "response_too_large";
    case decision::store_unavailable:
      return "store_unavailable";
  }
  return "unknown";
}

std::string_view to_string(store_failure_cause c) noexcept {
  switch (c) {
    case store_failure_cause::unreachable:
      return "unreachable";
    case store_failure_cause::access_denied:
      return "access_denied";
    case store_failure_cause::full:
      return "full";
    case store_failure_cause::timeout:
      return "timeout";
    case store_failure_cause::connection_lost:
      return "connection_lost";
    case store_failure_cause::other:
      return "other";
  }
  return "other";
}

store_failure_cause classify_store_failure(std::string_view message) noexcept {
  // No allocation (noexcept): a case-insensitive search for each lowercase text.
  const auto any = [&](std::initializer_list<std::string_view> texts) {
    return std::any_of(texts.begin(), texts.end(), [&](std::string_view t) {
      return std::search(message.begin(), message.end(), t.begin(), t.end(), [](char a, char b) {
               return detail::to_lower_ascii(a) == b;
             }) != message.end();
    });
  };
  // SQLite: "database or disk is full"; libpq: "No space left on device", "could not extend
  // file"; Redis: "OOM command not allowed", "MISCONF" (it cannot save to disk).
  if (any({"disk is full", "no space left", "could not extend file", "oom command", "misconf"})) {
    return store_failure_cause::full;
  }
  if (any({"authentication failed", "noauth", "wrongpass", "invalid password", "permission denied",
           "access denied", "readonly database"})) {
    return store_failure_cause::access_denied;
  }
  if (any({"timeout", "timed out", "temporarily unavailable"})) {
    return store_failure_cause::timeout;
  }
  if (any({"connection refused", "could not connect", "cannot connect", "no route to host",
           "network is unreachable", "could not translate host", "name or service not known",
           "unable to open database", "cannot open"})) {
    return store_failure_cause::unreachable;
  }
  if (any({"server closed the connection", "connection reset", "broken pipe", "eof",
           "terminating connection", "connection lost", "server closed", "no connection"})) {
    return store_failure_cause::connection_lost;
  }
  return store_failure_cause::other;
}

outcome<std::string, std::string> parse_idempotency_key(std::string_view field_value) {
  const std::string_view value = detail::trim_ows(field_value);
  auto bad = [&](std::string_view why) {
    return failure{std::string("Idempotency-Key ") + detail::quote_for_message(field_value) + ": " +
                   std::string(why)};
  };
  std::string key;
  if (!value.empty() && value.front() == '"') {
    // RFC 8941 §4.2.5 (Parsing a String): escapes only \" and \\, printable ASCII only, and the
    // closing DQUOTE ends the value.
    std::size_t i = 1;
    bool closed = false;
    for (; i < value.size(); ++i) {
      const char c = value[i];
      if (c == '\\') {
        if (i + 1 == value.size() || (value[i + 1] != '"' && value[i + 1] != '\\')) {
          return bad(
              "a '\\' in a quoted key must be followed by '\"' or '\\' (RFC 8941 sf-string)");
        }
        key.push_back(value[++i]);
      } else if (c == '"') {
        closed = true;
        break;
      } else if (c < 0x20 || c > 0x7e) {
        return bad("the key must be printable ASCII (0x20-0x7E)");
      } else {
        key.push_back(c);
      }
    }
    if (!closed) return bad("the quoted key has no closing '\"' (RFC 8941 sf-string)");
    if (i + 1 != value.size()) {
      return bad("text after the quoted key (one key per request; RFC 8941 sf-string)");
    }
  } else {
    // A ',' separates field values (RFC 9110 §5.3): "a, b" is two keys (or two fields joined),
    // never one.
    if (value.find(',') != std::string_view::npos) {
      return bad("two keys (one Idempotency-Key per request; a bare key has no ',')");
    }
    key.assign(value);
  }
  try {
    validate_idempotency_key(key);
  } catch (const std::invalid_argument& e) {
    return failure{std::string(e.what())};
  }
  return key;
}

namespace {

/// An RFC 9457 problem details body (application/problem+json), as the draft's examples
/// (draft-ietf-httpapi-idempotency-key-header-07 §2.7): title, status, detail, and `code`, the
/// decision's name, for programs.
stored_response error_response(int status, std::string_view code, std::string_view message) {
  stored_response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/problem+json");
  std::string title;
  switch (status) {
    case 400:
      title = "Bad Request";
      break;
    case 409:
      title = "Conflict";
      break;
    case 422:
      title = "Unprocessable Content";
      break;
    case 503:
      title = "Service Unavailable";
      break;
    default:
      title = "Internal Server Error";
      break;
  }
  // The one JSON writer (src/detail/json_writer.hpp): bad UTF-8 in a message becomes U+FFFD.
  r.body = detail::dump_json(nlohmann::ordered_json{{"title", title},
                                                    {"status", status},
                                                    {"code", std::string(code)},
                                                    {"detail", std::string(message)}});
  return r;
}

/// Whole seconds, rounded up, at least 1 (Retry-After's delay-seconds, RFC 9110 §10.2.3).
std::string retry_after_seconds(duration left) {
  if (left >= std::chrono::hours(24 * 366)) return std::to_string(366 * 24 * 3600);
  const auto s = std::chrono::ceil<std::chrono::seconds>(left).count();
  return std::to_string(std::max<std::int64_t>(1, s));
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return detail::to_lower_ascii(x) == detail::to_lower_ascii(y);
         });
}

void check_range(bool ok, std::string_view field, std::string_view value, std::string_view range) {
  if (!ok) {
    throw std::invalid_argument("guard_options." + std::string(field) + " " + std::string(value) +
                                ": must be " + std::string(range));
  }
}

const clock& time_source(const guard_options& o) {
  static const real_clock system;  // wall_now() is system_clock::now(); no state is touched
  return o.time != nullptr ? *o.time : system;
}

}  // namespace

idempotency_guard::idempotency_guard(guard::store& s, guard_options options)
    : store_(s), options_(std::move(options)), token_prefix_(make_idempotency_key()) {
  using namespace std::chrono_literals;
  const auto& o = options_;
  check_range(o.lease > duration::zero() && o.lease <= o.ttl, "lease", format_duration(o.lease),
              "> 0 and <= ttl");
  check_range(o.ttl >= 1s && o.ttl <= std::chrono::hours(24 * 366), "ttl", format_duration(o.ttl),
              "between 1s and 366 days");
  check_range(o.max_response_bytes >= 1 && o.max_response_bytes <= (std::size_t{64} << 20U),
              "max_response_bytes", std::to_string(o.max_response_bytes), "1..67108864 (64 MiB)");
  check_range(o.unavailable_retry_after >= 1s && o.unavailable_retry_after <= 24h,
              "unavailable_retry_after", format_duration(o.unavailable_retry_after),
              "between 1s and 24h");
  for (const auto& h : o.kept_headers) {
    check_range(!h.empty() && std::all_of(h.begin(), h.end(), detail::is_tchar), "kept_headers",
                detail::quote_for_message(h), "an HTTP field name (RFC 9110 token)");
  }
  // The key is not echoed: it is a secret.
  check_range(o.principal_key.size() <= 1024, "principal_key",
              "of " + std::to_string(o.principal_key.size()) + " bytes", "at most 1024 bytes");
  check_range(o.trip_after_failures >= 1 && o.trip_after_failures <= 1000, "trip_after_failures",
              std::to_string(o.trip_after_failures), "1..1000");
  check_range(o.probe_interval >= 100ms && o.probe_interval <= 1h, "probe_interval",
              format_duration(o.probe_interval), "between 100ms and 1h");
}

std::string_view to_string(store_operation op) noexcept {
  switch (op) {
    case store_operation::begin:
      return "begin";
    case store_operation::find:
      return "find";
    case store_operation::complete:
      return "complete";
    case store_operation::release:
      return "release";
  }
  return "unknown";
}

std::string idempotency_guard::stored_principal(std::string_view principal) const {
  return principal_digest(principal, options_.principal_key);
}

namespace {

/// The response with only the kept headers, and its stored size (body + kept headers).
std::pair<stored_response, std::size_t> keep(stored_response r,
                                             const std::vector<std::string>& kept) {
  std::erase_if(r.headers, [&](const auto& h) {
    return std::none_of(kept.begin(), kept.end(),
                        [&](const std::string& k) { return iequals(k, h.first); });
  });
  std::size_t size = r.body.size();
  for (const auto& [name, value] : r.headers) size += name.size() + value.size();
  return {std::move(r), size};
}

struct too_large {
  std::size_t size;
};

/// 503 + Retry-After with a generic detail: the cause stays on the server (the observer).
result store_down(duration retry_after) {
  result r{error_response(503, "store_unavailable",
                          "the idempotency store is unavailable; retry after "
                          "the Retry-After delay"),
           decision::store_unavailable};
  r.response.headers.emplace_back("Retry-After", retry_after_seconds(retry_after));
  return r;
}

/// The answer to a request whose key already has a live record (`found`, not ours).
result existing_record(const begin_result& found, const fingerprint& fp, wall_time_point now) {
  if (found.fingerprint != fp) {
    return {error_response(422, "mismatch",
                           "this Idempotency-Key was used with a different request (method, "
                           "target or body); use a new key for a new request"),
            decision::mismatch};
  }
  if (found.outcome == begin_outcome::completed) {
    stored_response r = found.response.value_or(stored_response{});
    r.headers.emplace_back(replayed_header, "true");
    return {std::move(r), decision::replayed};
  }
  result r{error_response(409, "in_progress",
                          "a request with this Idempotency-Key is in progress; retry after "
                          "the Retry-After delay"),
           decision::in_progress};
  r.response.headers.emplace_back("Retry-After", retry_after_seconds(found.lease_expires - now));
  return r;
}

/// No key and keys optional: the handler runs with its statements in autocommit.
result run_unguarded(store& s, const idempotency_guard::handler& h) {
  class direct final : public transaction {
   public:
    explicit direct(store& st) : s_(st) {}
    [[nodiscard]] store_kind kind() const noexcept override { return s_.kind(); }
    std::vector<row> execute(std::string_view statement,
                             std::span<const std::string_view> params) override {
      return s_.query(statement, params);
    }
    using transaction::execute;

   private:
    store& s_;
  } tx(s);
  return {h(tx), decision::passed_through};
}

enum class call_outcome : std::uint8_t { ok, failed, neither };

}  // namespace

// --- the short circuit ---

std::optional<duration> idempotency_guard::admit() {
  const stormguard::detail::lock hold(circuit_mutex_);
  if (!circuit_.down) return std::nullopt;
  const time_point now = time_source(options_).now();
  if (now >= circuit_.probe_at && !circuit_.probing) {
    circuit_.probing = true;  // this request is the probe
    return std::nullopt;
  }
  return std::max(circuit_.probe_at - now, duration::zero());
}

bool idempotency_guard::store_held_down() const {
  const stormguard::detail::lock hold(circuit_mutex_);
  return circuit_.down;
}

bool idempotency_guard::queued_behind_timeout(time_point arrived) const {
  const stormguard::detail::lock hold(circuit_mutex_);
  return circuit_.timed_out_at && arrived < *circuit_.timed_out_at;
}

void idempotency_guard::record(bool failed, bool timed_out) {
  std::optional<bool> changed;  // the new state, when it changed
  {
    const stormguard::detail::lock hold(circuit_mutex_);
    const time_point now = time_source(options_).now();
    if (timed_out) circuit_.timed_out_at = now;
    if (!failed) {
      circuit_.timed_out_at.reset();
      circuit_.failures = 0;
      if (circuit_.down) changed = false;
      circuit_.down = false;
      circuit_.probing = false;
    } else if (circuit_.down) {
      if (circuit_.probing) {  // the probe failed (or a request admitted before the trip)
        circuit_.probing = false;
        circuit_.probe_at = now + options_.probe_interval;
      }
    } else if (++circuit_.failures >= options_.trip_after_failures) {
      circuit_.down = true;
      circuit_.probing = false;
      circuit_.probe_at = now + options_.probe_interval;
      changed = true;
    }
  }
  if (changed && options_.observer != nullptr) options_.observer->on_store_state(*changed);
}

template <class F>
auto idempotency_guard::call_store(store_operation op, F&& f) {
  const clock& time = time_source(options_);
  const time_point start = time.now();
  auto report = [&](call_outcome outcome, bool timed_out = false) {
    if (options_.observer != nullptr) {
      options_.observer->on_store_call(op, time.now() - start, outcome == call_outcome::failed);
    }
    if (outcome != call_outcome::neither) {
      record(outcome == call_outcome::failed, timed_out);
    } else {
      const stormguard::detail::lock hold(circuit_mutex_);
      circuit_.probing = false;  // no verdict: let the next request probe
    }
  };
  try {
    auto r = f();
    report(call_outcome::ok);
    return r;
  } catch (const statement_error&) {  // the handler's statement: the store answered
    report(call_outcome::ok);
    throw;
  } catch (const store_error& e) {
    if (options_.observer != nullptr)
      options_.observer->on_store_error(op, detail::redact(e.what()));
    report(call_outcome::failed, classify_store_failure(e.what()) == store_failure_cause::timeout);
    throw;
  } catch (const too_large&) {  // the handler's response: the store answered
    report(call_outcome::ok);
    throw;
  } catch (...) {  // the handler threw, or a bad argument: no verdict on the store
    report(call_outcome::neither);
    throw;
  }
}

result idempotency_guard::finish(result r) const {
  if (options_.observer != nullptr) options_.observer->on_decision(r.decision, r.took_over);
  return r;
}

result idempotency_guard::unavailable() {
  return finish(store_down(options_.unavailable_retry_after));
}

// --- the protocol ---

void idempotency_guard::release_quietly(const record_key& id, const std::string& token) noexcept {
  try {
    call_store(store_operation::release, [&] {
      store_.release(id, token);
      return 0;
    });
  } catch (...) {  // NOLINT(bugprone-empty-catch): the lease expires by itself
  }
}

/// We hold the lease on `id` under `token`: run the handler inside the store's atomic completion.
result idempotency_guard::run_acquired(const record_key& id, const std::string& token,
                                       bool took_over, const handler& h) {
  const guard_options& o = options_;
  const clock& time = time_source(o);
  stored_response produced;
  complete_outcome done{};
  try {
    done = call_store(store_operation::complete, [&] {
      return store_.complete(id, token, time.wall_now(), o.ttl, [&](transaction& tx) {
        auto [kept, size] = keep(h(tx), o.kept_headers);
        if (size > o.max_response_bytes) throw too_large{size};
        produced = kept;  // the one copy: the store keeps `kept`, the caller gets `produced`
        return kept;
      });
    });
  } catch (const too_large& t) {
    release_quietly(id, token);
    return finish(
        {error_response(500, "response_too_large",
                        "the handler's response (" + std::to_string(t.size) +
                            " bytes) exceeds max_response_bytes (" +
                            std::to_string(o.max_response_bytes) + "); nothing was committed"),
         decision::response_too_large});
  } catch (const statement_error&) {
    // A statement of the handler failed: the transaction certainly rolled back. As a handler
    // exception: release the key so that a corrected retry runs at once, and rethrow.
    release_quietly(id, token);
    throw;
  } catch (const store_error&) {
    // Nothing committed, or the commit's outcome is unknown: the record stays in progress under
    // our token until the lease expires, so a retry sees the stored response or takes over.
    return unavailable();
  } catch (...) {  // the handler threw: nothing committed
    release_quietly(id, token);
    throw;
  }
  if (done == complete_outcome::lease_lost) {
    result r{error_response(409, "lease_lost",
                            "the lease on this Idempotency-Key expired and was taken over; "
                            "nothing was committed by this request"),
             decision::lease_lost};
    r.response.headers.emplace_back("Retry-After", "1");
    return finish(std::move(r));
  }
  return finish({std::move(produced), decision::ran, took_over});
}

/// We acquired `hashed` (a key new under the stored principal): a record of the same key written
/// in an older form (guard_options::find_unprefixed_digest_records, find_unhashed_records)
/// answers instead (our record is released).
std::optional<result> idempotency_guard::find_old_record(const request& req, const std::string& key,
                                                         const fingerprint& fp,
                                                         const record_key& hashed,
                                                         const std::string& token) {
  // record_key holds views: `unprefixed` outlives them.
  const std::string unprefixed =
      options_.find_unprefixed_digest_records
          ? unprefixed_principal_digest(req.principal, options_.principal_key)
          : std::string();
  std::vector<record_key> old_forms;
  if (options_.find_unprefixed_digest_records) old_forms.push_back({unprefixed, key});
  // Never as is when the principal has a digest's form: it would name another principal's record.
  if (options_.find_unhashed_records && !has_principal_digest_form(req.principal)) {
    old_forms.push_back({req.principal, key});
  }
  const clock& time = time_source(options_);
  for (const record_key& legacy : old_forms) {
    std::optional<begin_result> old;
    try {
      old = call_store(store_operation::find, [&] { return store_.find(legacy, time.wall_now()); });
    } catch (const store_error&) {
      release_quietly(hashed, token);
      return unavailable();
    }
    if (!old || old->outcome == begin_outcome::acquired) continue;
    release_quietly(hashed, token);
    return finish(existing_record(*old, fp, time.wall_now()));
  }
  return std::nullopt;
}

result idempotency_guard::handle(const request& req, const handler& h) {
  if (req.principal.size() > max_principal_length) {
    return finish({error_response(400, "bad_principal",
                                  "principal of " + std::to_string(req.principal.size()) +
                                      " bytes: at most 255"),
                   decision::bad_principal});
  }
  if (!req.idempotency_key) {
    if (!options_.require_key) return finish(run_unguarded(store_, h));
    return finish({error_response(400, "missing_key",
                                  "this endpoint requires an Idempotency-Key header "
                                  "(draft-ietf-httpapi-idempotency-key-header-07 §2.7)"),
                   decision::missing_key});
  }
  auto key = parse_idempotency_key(*req.idempotency_key);
  if (!key) return finish({error_response(400, "bad_key", key.error()), decision::bad_key});
  if (req.arrived && queued_behind_timeout(*req.arrived)) {
    return finish(store_down(options_.unavailable_retry_after));  // not a call: not counted
  }
  if (const auto wait = admit()) {
    return finish(store_down(std::max(*wait, options_.unavailable_retry_after)));
  }

  const fingerprint fp = fingerprint_of(req.method, req.target, req.body);
  const std::string principal = stored_principal(req.principal);
  const record_key id{principal, *key};
  const clock& time = time_source(options_);
  const std::string token =
      token_prefix_ + "-" + std::to_string(token_counter_.fetch_add(1, std::memory_order_relaxed));
  begin_result begun;
  try {
    begun = call_store(store_operation::begin, [&] {
      return store_.begin(id, fp, token, time.wall_now(), options_.lease, options_.ttl);
    });
  } catch (const store_error&) {
    return unavailable();
  }
  if (begun.outcome != begin_outcome::acquired) {
    return finish(existing_record(begun, fp, time.wall_now()));
  }
  if (!begun.took_over) {
    if (auto old = find_old_record(req, *key, fp, id, token)) return std::move(*old);
  }
  return run_acquired(id, token, begun.took_over, h);
}

}  // namespace stormguard::guard
