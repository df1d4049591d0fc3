// The idempotency guard's protocol (include/stormguard/guard/guard.hpp).
#include "stormguard/guard/guard.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/http_syntax.hpp"
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

namespace {

struct md_ctx_deleter {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};

void digest_part(EVP_MD_CTX* ctx, std::string_view part) {
  std::array<unsigned char, 8> length{};
  auto n = static_cast<std::uint64_t>(part.size());
  for (int i = 7; i >= 0; --i) {
    length[static_cast<std::size_t>(i)] = static_cast<unsigned char>(n & 0xffU);
    n >>= 8U;
  }
  if (EVP_DigestUpdate(ctx, length.data(), length.size()) != 1 ||
      EVP_DigestUpdate(ctx, part.data(), part.size()) != 1) {
    throw std::runtime_error("fingerprint: EVP_DigestUpdate failed");
  }
}

}  // namespace

fingerprint fingerprint_of(std::string_view method, std::string_view target,
                           std::string_view body) {
  std::unique_ptr<EVP_MD_CTX, md_ctx_deleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("fingerprint: EVP_DigestInit_ex(SHA-256) failed");
  }
  digest_part(ctx.get(), method);
  digest_part(ctx.get(), target);
  digest_part(ctx.get(), body);
  fingerprint out{};
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &size) != 1 || size != out.size()) {
    throw std::runtime_error("fingerprint: EVP_DigestFinal_ex failed");
  }
  return out;
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
  // JSON string escaping; the messages are valid UTF-8 (detail::quote_for_message escapes the
  // rest).
  auto json_string = [](std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        static constexpr char hex[] = "0123456789abcdef";
        out += "\\u00";
        out += hex[(static_cast<unsigned char>(c) >> 4U) & 0xfU];
        out += hex[static_cast<unsigned char>(c) & 0xfU];
      } else {
        out += c;
      }
    }
    return out + "\"";
  };
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
  r.body = "{\"title\":" + json_string(title) + ",\"status\":" + std::to_string(status) +
           ",\"code\":" + json_string(code) + ",\"detail\":" + json_string(message) + "}";
  return r;
}

/// Whole seconds, rounded up, at least 1 (Retry-After's delay-seconds, RFC 9110 §10.2.3).
std::string retry_after_seconds(duration left) {
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

}  // namespace

namespace {

result unavailable(const store_error& e, duration retry_after) {
  result r{error_response(503, "store_unavailable",
                          std::string("the idempotency store is unavailable: ") + e.what()),
           decision::store_unavailable};
  r.response.headers.emplace_back("Retry-After", retry_after_seconds(retry_after));
  return r;
}

/// Deletes our in-progress record after a failure that committed nothing; when the store fails
/// too, the lease expires by itself.
void release_quietly(store& s, const record_key& id, std::string_view token) noexcept {
  try {
    s.release(id, token);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the lease expires by itself
  }
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

/// We hold the lease on `id` under `token`: run the handler inside the store's atomic completion.
result run_acquired(store& s, const guard_options& o, const clock& time, const record_key& id,
                    const std::string& token, bool took_over, const idempotency_guard::handler& h) {
  stored_response produced;
  complete_outcome done{};
  try {
    done = s.complete(id, token, time.wall_now(), o.ttl, [&](transaction& tx) {
      auto [kept, size] = keep(h(tx), o.kept_headers);
      if (size > o.max_response_bytes) throw too_large{size};
      produced = kept;  // the one copy: the store keeps `kept`, the caller gets `produced`
      return kept;
    });
  } catch (const too_large& t) {
    release_quietly(s, id, token);
    return {error_response(500, "response_too_large",
                           "the handler's response (" + std::to_string(t.size) +
                               " bytes) exceeds max_response_bytes (" +
                               std::to_string(o.max_response_bytes) + "); nothing was committed"),
            decision::response_too_large};
  } catch (const statement_error&) {
    // A statement of the handler failed: the transaction certainly rolled back. As a handler
    // exception: release the key so that a corrected retry runs at once, and rethrow.
    release_quietly(s, id, token);
    throw;
  } catch (const store_error& e) {
    // Nothing committed, or the commit's outcome is unknown: the record stays in progress under
    // our token until the lease expires, so a retry sees the stored response or takes over.
    return unavailable(e, o.unavailable_retry_after);
  } catch (...) {  // the handler threw: nothing committed
    release_quietly(s, id, token);
    throw;
  }
  if (done == complete_outcome::lease_lost) {
    result r{error_response(409, "lease_lost",
                            "the lease on this Idempotency-Key expired and was taken over; "
                            "nothing was committed by this request"),
             decision::lease_lost};
    r.response.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return {std::move(produced), decision::ran, took_over};
}

}  // namespace

result idempotency_guard::handle(const request& req, const handler& h) {
  if (req.principal.size() > max_principal_length) {
    return {error_response(
                400, "bad_principal",
                "principal of " + std::to_string(req.principal.size()) + " bytes: at most 255"),
            decision::bad_principal};
  }
  if (!req.idempotency_key) {
    if (!options_.require_key) return run_unguarded(store_, h);
    return {error_response(400, "missing_key",
                           "this endpoint requires an Idempotency-Key header "
                           "(draft-ietf-httpapi-idempotency-key-header-07 §2.7)"),
            decision::missing_key};
  }
  auto key = parse_idempotency_key(*req.idempotency_key);
  if (!key) return {error_response(400, "bad_key", key.error()), decision::bad_key};

  const fingerprint fp = fingerprint_of(req.method, req.target, req.body);
  const record_key id{req.principal, *key};
  const clock& time = time_source(options_);
  const std::string token =
      token_prefix_ + "-" + std::to_string(token_counter_.fetch_add(1, std::memory_order_relaxed));
  begin_result begun;
  try {
    begun = store_.begin(id, fp, token, time.wall_now(), options_.lease, options_.ttl);
  } catch (const store_error& e) {
    return unavailable(e, options_.unavailable_retry_after);
  }
  if (begun.outcome != begin_outcome::acquired && begun.fingerprint != fp) {
    return {error_response(422, "mismatch",
                           "this Idempotency-Key was used with a different request (method, "
                           "target or body); use a new key for a new request"),
            decision::mismatch};
  }
  switch (begun.outcome) {
    case begin_outcome::completed: {
      stored_response r = begun.response.value_or(stored_response{});
      r.headers.emplace_back(replayed_header, "true");
      return {std::move(r), decision::replayed};
    }
    case begin_outcome::in_progress: {
      result r{error_response(409, "in_progress",
                              "a request with this Idempotency-Key is in progress; retry after "
                              "the Retry-After delay"),
               decision::in_progress};
      r.response.headers.emplace_back("Retry-After",
                                      retry_after_seconds(begun.lease_expires - time.wall_now()));
      return r;
    }
    case begin_outcome::acquired:
      break;
  }
  return run_acquired(store_, options_, time, id, token, begun.took_over, h);
}

}  // namespace stormguard::guard
