// SPDX-License-Identifier: Apache-2.0
// The guard's pure parts (stormguard/guard/guard.hpp): fingerprints, the Idempotency-Key field,
// option checks, store specs. The protocol on real stores: tests/guard_store_suite.hpp.
#include "stormguard/guard/guard.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "stormguard/guard/store.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

namespace sg = stormguard::guard;
using namespace std::chrono_literals;

std::string hex(const sg::fingerprint& f) {
  std::string out;
  char buf[3];
  for (const auto b : f) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    out += buf;
  }
  return out;
}

TEST(Fingerprint, IsSha256OfTheLengthPrefixedParts) {
  // Expected values from Python's hashlib over the same encoding:
  // sha256(b''.join(struct.pack('>Q', len(p)) + p for p in parts)).
  EXPECT_EQ(hex(sg::fingerprint_of("POST", "/charges", "{\"amount\":100}")),
            "0c5a3809724895e445d3a552efc5723ff36ebd199e2f4e58cf10dfd70a7cc275");
  EXPECT_EQ(hex(sg::fingerprint_of("", "", "")),
            "9d908ecfb6b256def8b49a7c504e6c889c4b0e41fe6ce3e01863dd7b61a20aa0");
}

TEST(Fingerprint, PartsCannotBeShiftedIntoOneAnother) {
  EXPECT_NE(sg::fingerprint_of("POST", "/ab", "c"), sg::fingerprint_of("POST", "/a", "bc"));
  EXPECT_NE(sg::fingerprint_of("POST", "", "x"), sg::fingerprint_of("POSTx", "", ""));
}

TEST(Fingerprint, HashesAHugeBody) {
  const std::string body(16U << 20U, 'x');  // 16 MiB
  EXPECT_NE(sg::fingerprint_of("POST", "/", body), sg::fingerprint_of("POST", "/", body + "y"));
}

TEST(ParseIdempotencyKey, AcceptsTheDraftsSfStringAndStripesBareForm) {
  EXPECT_EQ(*sg::parse_idempotency_key("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""),
            "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(*sg::parse_idempotency_key("8e03978e-40d5"), "8e03978e-40d5");
  EXPECT_EQ(*sg::parse_idempotency_key("  \"a\\\"b\\\\c\"\t"), "a\"b\\c");
  EXPECT_EQ(*sg::parse_idempotency_key("\"with space\""), "with space");
}

TEST(ParseIdempotencyKey, RejectsWhatIsNotOneValidKeyAndSaysWhy) {
  auto why = [](std::string_view v) {
    auto r = sg::parse_idempotency_key(v);
    return r ? std::string("accepted: ") + *r : r.error();
  };
  EXPECT_NE(why("\"open").find("no closing"), std::string::npos);
  EXPECT_NE(why("\"a\"b").find("text after"), std::string::npos);
  EXPECT_NE(why("\"a\\nb\"").find("must be followed"), std::string::npos);
  EXPECT_NE(why("\"caf\xc3\xa9\"").find("printable ASCII"), std::string::npos);
  EXPECT_NE(why("caf\xc3\xa9").find("idempotency key"), std::string::npos);
  EXPECT_NE(why(std::string(256, 'k')).find("idempotency key"), std::string::npos);
  EXPECT_NE(why("").find("idempotency key"), std::string::npos);
  EXPECT_NE(why("\"\"").find("idempotency key"), std::string::npos);
  EXPECT_EQ((*sg::parse_idempotency_key(std::string(255, 'k'))).size(), 255U);
  // The message quotes the field value with control bytes escaped.
  EXPECT_NE(why("\"\x01\"").find("\\x01"), std::string::npos);
}

class null_store final : public sg::store {  // only for option checks: never called
 public:
  [[nodiscard]] sg::store_kind kind() const noexcept override { return sg::store_kind::sqlite; }
  sg::begin_result begin(const sg::record_key&, const sg::fingerprint&, std::string_view,
                         stormguard::wall_time_point, stormguard::duration,
                         stormguard::duration) override {
    throw sg::store_error("unused");
  }
  sg::complete_outcome complete(const sg::record_key&, std::string_view,
                                stormguard::wall_time_point, stormguard::duration,
                                const work&) override {
    throw sg::store_error("unused");
  }
  void release(const sg::record_key&, std::string_view) override {}
  std::size_t purge_expired(stormguard::wall_time_point) override { return 0; }
  std::vector<sg::row> query(std::string_view, std::span<const std::string_view>) override {
    return {};
  }
  using store::query;
};

TEST(GuardOptions, OutOfRangeValuesNameTheField) {
  null_store s;
  auto message = [&](sg::guard_options o) {
    try {
      sg::idempotency_guard g(s, std::move(o));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message({.lease = 0s}), "guard_options.lease 0s: must be > 0 and <= ttl");
  EXPECT_EQ(message({.lease = 2h, .ttl = 1h}), "guard_options.lease 7200s: must be > 0 and <= ttl");
  EXPECT_NE(message({.lease = 100ms, .ttl = 500ms}).find("guard_options.ttl"), std::string::npos);
  EXPECT_NE(message({.max_response_bytes = 0}).find("guard_options.max_response_bytes 0"),
            std::string::npos);
  EXPECT_NE(message({.max_response_bytes = (64U << 20U) + 1}).find("max_response_bytes"),
            std::string::npos);
  EXPECT_EQ(message({.max_response_bytes = 64U << 20U}), "accepted");
  EXPECT_NE(message({.kept_headers = {"Bad Header"}}).find("guard_options.kept_headers"),
            std::string::npos);
  EXPECT_NE(message({.unavailable_retry_after = 0s}).find("unavailable_retry_after"),
            std::string::npos);
  EXPECT_NE(message({.trip_after_failures = 0}).find("guard_options.trip_after_failures 0"),
            std::string::npos);
  EXPECT_NE(message({.probe_interval = 10ms}).find("guard_options.probe_interval"),
            std::string::npos);
  const std::string long_key(1025, 's');
  EXPECT_EQ(message({.principal_key = long_key}),
            "guard_options.principal_key of 1025 bytes: must be at most 1024 bytes");
  EXPECT_EQ(message({}), "accepted");
}

TEST(GuardWithoutKey, RunsUnguardedWhenKeysAreOptional) {
  null_store s;
  sg::idempotency_guard g(s, {.require_key = false});
  int runs = 0;
  const auto r = g.handle({"p", "POST", "/", "", std::nullopt}, [&](sg::transaction& tx) {
    EXPECT_EQ(tx.kind(), sg::store_kind::sqlite);
    ++runs;
    return sg::stored_response{200, {}, "ok"};
  });
  EXPECT_EQ(r.decision, sg::decision::passed_through);
  EXPECT_EQ(runs, 1);
}

TEST(GuardStoreDown, A503WithRetryAfterAndNoRun) {
  null_store s;  // begin throws store_error
  sg::idempotency_guard g(s, {.unavailable_retry_after = 1500ms});
  int runs = 0;
  const auto r = g.handle({"p", "POST", "/", "", "k"}, [&](sg::transaction&) {
    ++runs;
    return sg::stored_response{};
  });
  EXPECT_EQ(r.response.status, 503);
  EXPECT_EQ(r.decision, sg::decision::store_unavailable);
  EXPECT_EQ(runs, 0);
  ASSERT_FALSE(r.response.headers.empty());
  EXPECT_EQ(r.response.headers.back().first, "Retry-After");
  EXPECT_EQ(r.response.headers.back().second, "2");  // 1.5 s rounded up
}

TEST(GuardErrors, AreProblemDetailsInValidJsonEvenForHostileKeys) {
  null_store s;
  sg::idempotency_guard g(s);
  for (const std::string& key : {std::string("\"\x01\x7f\""), std::string("caf\xc3\xa9"),
                                 std::string("bad\xff\xfe"), std::string(300, '"')}) {
    const auto r = g.handle({"p", "POST", "/", "", key},
                            [](sg::transaction&) { return sg::stored_response{}; });
    ASSERT_EQ(r.response.status, 400);
    EXPECT_EQ(r.response.headers.at(0).second, "application/problem+json");
    const auto body = nlohmann::json::parse(r.response.body);  // throws if not valid JSON
    EXPECT_EQ(body.at("status"), 400);
    EXPECT_EQ(body.at("code"), "bad_key");
    EXPECT_FALSE(body.at("detail").get<std::string>().empty());
  }
}

TEST(GuardErrors, ABadUtf8KeyIsNamedEscapedInAValidUtf8Body) {
  null_store s;
  sg::idempotency_guard g(s);
  const auto r = g.handle({"p", "POST", "/", "", std::string("bad\xff\xfe")},
                          [](sg::transaction&) { return sg::stored_response{}; });
  ASSERT_EQ(r.response.status, 400);
  // No raw byte of the key: the body is valid UTF-8 (parse() rejects it otherwise), its members
  // in the draft's order, and the detail names the bytes escaped.
  EXPECT_EQ(r.response.body.find('\xff'), std::string::npos) << r.response.body;
  EXPECT_EQ(r.response.body.rfind(R"({"title":"Bad Request","status":400,"code":"bad_key",)", 0),
            0U)
      << r.response.body;
  const auto body = nlohmann::json::parse(r.response.body);
  EXPECT_NE(body.at("detail").get<std::string>().find(R"(bad\xff\xfe)"), std::string::npos)
      << r.response.body;
}

// --- the guard on an in-memory store: secrets, the short circuit, the observer ---

/// A store in memory (the contract of store.hpp, without concurrency), that fails with
/// store_error while `down` is set and advances `clock` by `latency` per call.
class memory_store final : public sg::store {
 public:
  struct record {
    sg::fingerprint fp{};
    bool completed = false;
    std::string token;
    stormguard::wall_time_point lease_expires{};
    stormguard::wall_time_point expires{};
    sg::stored_response response;
  };
  using key = std::pair<std::string, std::string>;

  std::map<key, record> records;
  bool down = false;
  std::string down_message = "memory store: down";
  int calls = 0;
  stormguard::testing::manual_clock* clock = nullptr;
  stormguard::duration latency{};

  [[nodiscard]] sg::store_kind kind() const noexcept override { return sg::store_kind::sqlite; }
  sg::begin_result begin(const sg::record_key& id, const sg::fingerprint& fp,
                         std::string_view token, stormguard::wall_time_point now,
                         stormguard::duration lease, stormguard::duration ttl) override {
    enter();
    const key k{std::string(id.principal), std::string(id.key)};
    sg::begin_result out;
    if (auto it = records.find(k); it != records.end() && now < it->second.expires) {
      const record& r = it->second;
      if (r.completed || now < r.lease_expires) return state_of(r);
      out.took_over = true;
    }
    records[k] = record{fp, false, std::string(token), now + lease, now + ttl, {}};
    return out;
  }
  sg::complete_outcome complete(const sg::record_key& id, std::string_view token,
                                stormguard::wall_time_point now, stormguard::duration ttl,
                                const work& w) override {
    enter();
    const auto it = records.find({std::string(id.principal), std::string(id.key)});
    if (it == records.end() || it->second.completed || it->second.token != token) {
      return sg::complete_outcome::lease_lost;
    }
    class no_tx final : public sg::transaction {
     public:
      [[nodiscard]] sg::store_kind kind() const noexcept override { return sg::store_kind::sqlite; }
      std::vector<sg::row> execute(std::string_view, std::span<const std::string_view>) override {
        return {};
      }
      using transaction::execute;
    } tx;
    it->second.response = w(tx);
    it->second.completed = true;
    it->second.expires = now + ttl;
    return sg::complete_outcome::completed;
  }
  void release(const sg::record_key& id, std::string_view token) override {
    enter();
    const auto it = records.find({std::string(id.principal), std::string(id.key)});
    if (it != records.end() && !it->second.completed && it->second.token == token) {
      records.erase(it);
    }
  }
  std::optional<sg::begin_result> find(const sg::record_key& id,
                                       stormguard::wall_time_point now) override {
    enter();
    const auto it = records.find({std::string(id.principal), std::string(id.key)});
    if (it == records.end() || now >= it->second.expires) return std::nullopt;
    if (!it->second.completed && now >= it->second.lease_expires) return std::nullopt;
    return state_of(it->second);
  }
  std::size_t purge_expired(stormguard::wall_time_point) override { return 0; }
  std::vector<sg::row> query(std::string_view, std::span<const std::string_view>) override {
    return {};
  }
  using store::query;

 private:
  void enter() {
    ++calls;
    if (clock != nullptr) clock->advance(latency);
    if (down) throw sg::store_error(down_message);
  }
  static sg::begin_result state_of(const record& r) {
    sg::begin_result out;
    out.outcome = r.completed ? sg::begin_outcome::completed : sg::begin_outcome::in_progress;
    out.fingerprint = r.fp;
    out.lease_expires = r.lease_expires;
    if (r.completed) out.response = r.response;
    return out;
  }
};

/// Counts what a guard reports. Thread-safe (one mutex).
class recording_observer final : public sg::guard_observer {
 public:
  void on_decision(sg::decision d, bool) noexcept override {
    const std::lock_guard lock(mutex);
    decisions.push_back(d);
  }
  void on_store_call(sg::store_operation op, stormguard::duration latency,
                     bool failed) noexcept override {
    const std::lock_guard lock(mutex);
    calls.push_back({op, latency, failed});
  }
  void on_store_error(sg::store_operation, std::string_view message) noexcept override {
    const std::lock_guard lock(mutex);
    errors.emplace_back(message);
  }
  void on_store_state(bool down) noexcept override {
    const std::lock_guard lock(mutex);
    states.push_back(down);
  }
  struct call {
    sg::store_operation op;
    stormguard::duration latency;
    bool failed;
  };
  std::mutex mutex;
  std::vector<sg::decision> decisions;
  std::vector<call> calls;
  std::vector<std::string> errors;
  std::vector<bool> states;
};

sg::stored_response charged() { return {201, {{"Content-Type", "application/json"}}, "{}"}; }

TEST(PrincipalDigest, IsPrefixedDomainSeparatedHmacSha256UnderTheKeyOrSha256WithoutOne) {
  // Python's hmac/hashlib over "stormguard principal v1" NUL + the principal.
  EXPECT_EQ(sg::principal_digest("what do ya want for nothing?", "Jefe"),
            "sg1:3e6b097b27459e6a40d37072e38b50b30d96e0f1969091e66adceb85db77f349");
  EXPECT_EQ(sg::principal_digest("abc", ""),
            "sg1:f56eadb7753fa881ef2db84d6a0b65cba0e2d6c8484656456ba6c50f8875f932");
}

TEST(PrincipalDigest, TheUnprefixedFormIsPlainHmacSha256OrSha256) {
  // RFC 4231 test case 2: HMAC-SHA-256(key "Jefe", "what do ya want for nothing?").
  EXPECT_EQ(sg::unprefixed_principal_digest("what do ya want for nothing?", "Jefe"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // FIPS 180-2: SHA-256("abc").
  EXPECT_EQ(sg::unprefixed_principal_digest("abc", ""),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(PrincipalDigest, EveryStoredFormHasTheDigestFormAndNoBearerTokenHasThePrefix) {
  for (const std::string key : {"", "k"}) {
    EXPECT_TRUE(sg::has_principal_digest_form(sg::principal_digest("alice", key)));
    EXPECT_TRUE(sg::has_principal_digest_form(sg::unprefixed_principal_digest("alice", key)));
  }
  EXPECT_TRUE(sg::has_principal_digest_form("SG1:anything"));
  EXPECT_TRUE(sg::has_principal_digest_form(std::string(64, 'A')));
  EXPECT_FALSE(sg::has_principal_digest_form(std::string(63, 'a')));
  EXPECT_FALSE(sg::has_principal_digest_form(std::string(65, 'a')));
  EXPECT_FALSE(sg::has_principal_digest_form(std::string(63, 'a') + "g"));
  EXPECT_FALSE(sg::has_principal_digest_form("sk_live_4eC39HqLyjWDarjtT1zdp7dc"));
  EXPECT_FALSE(sg::has_principal_digest_form(""));
  // RFC 6750 §2.1 b64token: ALPHA DIGIT - . _ ~ + / and trailing '='; never ':'.
  EXPECT_EQ(sg::principal_digest_prefix.back(), ':');
}

TEST(GuardSecrets, RecordsHoldTheKeyedHashNeverThePrincipal) {
  memory_store s;
  const std::string token = "Bearer sk_live_4eC39HqLyjWDarjtT1zdp7dc";
  for (const std::string key : {"", "fleet-wide secret"}) {
    s.records.clear();
    sg::idempotency_guard g(s, {.principal_key = key});
    const auto r = g.handle({token, "POST", "/charges", "{}", "k1"},
                            [](sg::transaction&) { return charged(); });
    ASSERT_EQ(r.decision, sg::decision::ran);
    ASSERT_EQ(s.records.size(), 1U);
    const std::string& stored = s.records.begin()->first.first;
    EXPECT_EQ(stored, sg::principal_digest(token, key));
    EXPECT_EQ(stored, g.stored_principal(token));
    EXPECT_EQ(stored.size(), 68U);
    EXPECT_TRUE(stored.starts_with("sg1:")) << stored;
    EXPECT_EQ(stored.find("sk_live"), std::string::npos);
    // The same principal and key again: replayed (the hash is stable).
    EXPECT_EQ(g.handle({token, "POST", "/charges", "{}", "k1"},
                       [](sg::transaction&) { return charged(); })
                  .decision,
              sg::decision::replayed);
  }
  EXPECT_NE(sg::principal_digest(token, "a"), sg::principal_digest(token, "b"));
}

TEST(GuardSecrets, ARecordWrittenBeforePrincipalsWereHashedIsFoundOnlyWhenTheMigrationIsOn) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  const auto fp = sg::fingerprint_of("POST", "/charges", "{}");
  const auto now = clock.wall_now();
  s.records[{"alice-token", "k0"}] = {fp, true, "", now, now + 24h, charged()};
  s.records[{"alice-token", "k1"}] = {fp, true, "", now, now + 24h, charged()};
  s.records[{"alice-token", "k2"}] = {fp, false, "t", now + 30s, now + 24h, {}};
  int runs = 0;
  auto handler = [&](sg::transaction&) {
    ++runs;
    return charged();
  };
  {
    // Off by default: the key is new under the hashed principal.
    sg::idempotency_guard by_default(s, {.time = &clock});
    EXPECT_FALSE(by_default.options().find_unhashed_records);
    EXPECT_EQ(by_default.handle({"alice-token", "POST", "/charges", "{}", "k0"}, handler).decision,
              sg::decision::ran);
    EXPECT_EQ(runs, 1);
  }
  sg::idempotency_guard g(s, {.time = &clock, .find_unhashed_records = true});
  const auto replay = g.handle({"alice-token", "POST", "/charges", "{}", "k1"}, handler);
  EXPECT_EQ(replay.decision, sg::decision::replayed);
  EXPECT_EQ(replay.response.status, 201);
  EXPECT_EQ(g.handle({"alice-token", "POST", "/charges", "{}", "k2"}, handler).decision,
            sg::decision::in_progress);
  EXPECT_EQ(g.handle({"alice-token", "POST", "/charges", "{other}", "k1"}, handler).decision,
            sg::decision::mismatch);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(s.records.size(), 4U);  // the three old records and k0's; ours were released
  // With the lookup off (after one ttl), the key is new under the hashed principal.
  sg::idempotency_guard later(s, {.time = &clock, .find_unhashed_records = false});
  EXPECT_EQ(later.handle({"alice-token", "POST", "/charges", "{}", "k1"}, handler).decision,
            sg::decision::ran);
}

TEST(GuardSecrets, ARecordOfTheUnprefixedDigestIsFoundByItsPrincipalAndByNoOther) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  const auto fp = sg::fingerprint_of("POST", "/charges", "{}");
  const auto now = clock.wall_now();
  const std::string old = sg::unprefixed_principal_digest("alice-token", "key");
  s.records[{old, "k1"}] = {fp, true, "", now, now + 24h, {201, {}, "alice's charge"}};
  int runs = 0;
  auto handler = [&](sg::transaction&) {
    ++runs;
    return sg::stored_response{201, {}, "new charge"};
  };
  for (const bool migrating : {false, true}) {
    sg::idempotency_guard g(
        s, {.time = &clock, .principal_key = "key", .find_unhashed_records = migrating});
    // The digest itself, sent as the principal: a principal of its own, never alice's record.
    const auto attack = g.handle({old, "POST", "/charges", "{}", "k1"}, handler);
    EXPECT_EQ(attack.decision, sg::decision::ran) << migrating;
    EXPECT_EQ(attack.response.body, "new charge");
    const auto alice = g.handle({"alice-token", "POST", "/charges", "{}", "k1"}, handler);
    EXPECT_EQ(alice.decision, sg::decision::replayed) << migrating;
    EXPECT_EQ(alice.response.body, "alice's charge");
    s.records.erase({g.stored_principal(old), "k1"});
  }
  EXPECT_EQ(runs, 2);
  sg::idempotency_guard later(
      s, {.time = &clock, .principal_key = "key", .find_unprefixed_digest_records = false});
  EXPECT_EQ(later.handle({"alice-token", "POST", "/charges", "{}", "k1"}, handler).decision,
            sg::decision::ran);
}

TEST(GuardSecrets, AStoredDigestSentAsThePrincipalNeverGetsItsOwnersResponse) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  for (const bool migrating : {false, true}) {
    s.records.clear();
    sg::idempotency_guard g(s, {.time = &clock, .find_unhashed_records = migrating});
    const auto victim =
        g.handle({"alice-token", "POST", "/charges", "{}", "k"}, [](sg::transaction&) {
          return sg::stored_response{201, {}, "a"};
        });
    ASSERT_EQ(victim.decision, sg::decision::ran);
    const std::string stored = s.records.begin()->first.first;  // what a stolen store shows
    const auto attack = g.handle({stored, "POST", "/charges", "{}", "k"}, [](sg::transaction&) {
      return sg::stored_response{201, {}, "b"};
    });
    EXPECT_EQ(attack.decision, sg::decision::ran) << migrating;
    EXPECT_EQ(attack.response.body, "b") << migrating;
  }
}

TEST(StoreFailureCause, NamesTheCauseInTheDriversMessages) {
  const std::vector<std::pair<std::string, sg::store_failure_cause>> cases = {
      {"sqlite store \"/var/l.db\": INSERT: database or disk is full",
       sg::store_failure_cause::full},
      {"postgres store: query: ERROR:  could not extend file \"base/1/2\": No space left on device",
       sg::store_failure_cause::full},
      {"redis store redis://h:1: EVALSHA: OOM command not allowed when used memory > 'maxmemory'",
       sg::store_failure_cause::full},
      {"postgres store: connect: FATAL:  password authentication failed for user \"app\"",
       sg::store_failure_cause::access_denied},
      {"redis store redis://h:1: connect: AUTH: WRONGPASS invalid username-password pair",
       sg::store_failure_cause::access_denied},
      {"redis store redis://h:1: begin: Resource temporarily unavailable",
       sg::store_failure_cause::timeout},
      {"postgres store: query: no reply within 5s (reply timeout)",
       sg::store_failure_cause::timeout},
      {"redis store redis://127.0.0.1:6390: connect: Connection refused",
       sg::store_failure_cause::unreachable},
      {"postgres store: connect: connection to server at \"10.1.2.3\", port 5432 failed: could "
       "not connect",
       sg::store_failure_cause::unreachable},
      {"sqlite store \"/nope/l.db\": unable to open database file",
       sg::store_failure_cause::unreachable},
      {"postgres store: query: server closed the connection unexpectedly",
       sg::store_failure_cause::connection_lost},
      {"redis store redis://h:1: EVALSHA: Connection reset by peer",
       sg::store_failure_cause::connection_lost},
      {"redis store redis://h:1: EVALSHA: Server closed the connection",
       sg::store_failure_cause::connection_lost},
      {"sqlite store: a stored fingerprint is corrupt", sg::store_failure_cause::other},
      {"", sg::store_failure_cause::other},
  };
  for (const auto& [message, cause] : cases) {
    EXPECT_EQ(sg::to_string(sg::classify_store_failure(message)), sg::to_string(cause)) << message;
  }
}

TEST(GuardStoreDown, The503SaysNothingOfTheStoreAndTheObserverGetsTheCauseRedacted) {
  memory_store s;
  s.down = true;
  s.down_message =
      "postgres store: cannot connect: connection to server at \"10.1.2.3\", port 6543 failed "
      "(postgresql://app:hunter2@10.1.2.3:6543/app)";
  recording_observer seen;
  sg::idempotency_guard g(s, {.observer = &seen});
  const auto r = g.handle({"p", "POST", "/", "", "k"}, [](sg::transaction&) { return charged(); });
  ASSERT_EQ(r.response.status, 503);
  EXPECT_EQ(r.response.body.find("10.1.2.3"), std::string::npos) << r.response.body;
  EXPECT_EQ(r.response.body.find("6543"), std::string::npos);
  EXPECT_EQ(r.response.body.find("postgres"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(r.response.body).at("code"), "store_unavailable");
  ASSERT_EQ(seen.errors.size(), 1U);
  EXPECT_NE(seen.errors[0].find("10.1.2.3"), std::string::npos);
  EXPECT_NE(seen.errors[0].find("app:***@"), std::string::npos);
  EXPECT_EQ(seen.errors[0].find("hunter2"), std::string::npos);
}

TEST(GuardShortCircuit, FailsFastWhileTheStoreIsDownAndOneRequestProbesAfterTheInterval) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  s.down = true;
  recording_observer seen;
  sg::idempotency_guard g(s, {.unavailable_retry_after = 1s,
                              .time = &clock,
                              .trip_after_failures = 2,
                              .probe_interval = 5s,
                              .observer = &seen});
  int key = 0;
  auto charge = [&] {
    return g.handle({"p", "POST", "/", "", "k" + std::to_string(++key)},
                    [](sg::transaction&) { return charged(); });
  };
  EXPECT_EQ(charge().response.status, 503);
  EXPECT_FALSE(g.store_held_down());
  EXPECT_EQ(charge().response.status, 503);
  EXPECT_TRUE(g.store_held_down());
  EXPECT_EQ(s.calls, 2);
  clock.advance(2s);
  const auto fast = charge();  // fails fast: the store is not called
  EXPECT_EQ(fast.response.status, 503);
  EXPECT_EQ(fast.decision, sg::decision::store_unavailable);
  EXPECT_EQ(fast.response.headers.back(),
            (std::pair<std::string, std::string>{"Retry-After", "3"}));
  EXPECT_EQ(s.calls, 2);
  clock.advance(3s);  // the interval is over: one probe, which fails: down for 5 s more
  EXPECT_EQ(charge().response.status, 503);
  EXPECT_EQ(s.calls, 3);
  EXPECT_EQ(charge().response.status, 503);
  EXPECT_EQ(s.calls, 3);
  s.down = false;
  clock.advance(5s);  // the next probe succeeds: closed again
  EXPECT_EQ(charge().decision, sg::decision::ran);
  EXPECT_FALSE(g.store_held_down());
  EXPECT_EQ(charge().decision, sg::decision::ran);
  EXPECT_EQ(seen.states, (std::vector<bool>{true, false}));
}

TEST(GuardQueuedBehindATimeout, RequestsThatArrivedBeforeATimedOutCallEndedFailAtOnce) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  s.clock = &clock;
  s.latency = 5s;  // each store call takes 5 s of the manual clock, then times out
  s.down = true;
  s.down_message =
      "postgres store: query: no reply within 5s (postgres_options.reply_timeout): the server "
      "is hung or unreachable";
  recording_observer seen;
  sg::idempotency_guard g(s, {.time = &clock, .trip_after_failures = 3, .observer = &seen});
  int runs = 0;
  auto charge = [&](const std::string& key, stormguard::time_point arrived) {
    return g.handle({"p", "POST", "/charges", "{}", key, arrived}, [&](sg::transaction&) {
      ++runs;
      return charged();
    });
  };
  const stormguard::time_point t0 = clock.now();
  // Three charges arrive at t0, queued one behind the other: the first times out after 5 s.
  EXPECT_EQ(charge("k1", t0).response.status, 503);
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(clock.now(), t0 + 5s);
  for (const std::string key : {"k2", "k3"}) {  // at once: no store call, no clock advance
    const auto r = charge(key, t0);
    EXPECT_EQ(r.decision, sg::decision::store_unavailable) << key;
    EXPECT_EQ(r.response.headers.back(), (std::pair<std::string, std::string>{"Retry-After", "1"}));
  }
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(clock.now(), t0 + 5s);
  // They do not count toward the short circuit: one failure so far, of three.
  EXPECT_FALSE(g.store_held_down());
  // A charge that arrived after the timeout calls the store; two more failures trip it.
  EXPECT_EQ(charge("k4", clock.now()).response.status, 503);
  EXPECT_EQ(s.calls, 2);
  EXPECT_FALSE(g.store_held_down());
  EXPECT_EQ(charge("k5", clock.now()).response.status, 503);
  EXPECT_EQ(s.calls, 3);
  EXPECT_TRUE(g.store_held_down());
  // The store answers again: the probe succeeds, and a request that arrived long before runs.
  s.down = false;
  s.latency = 0s;
  clock.advance(1s);
  EXPECT_EQ(charge("k6", clock.now()).decision, sg::decision::ran);
  EXPECT_EQ(charge("k7", t0).decision, sg::decision::ran);
  EXPECT_EQ(runs, 2);
}

TEST(GuardQueuedBehindATimeout, AFailureThatIsNotATimeoutFailsNoOtherRequest) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  s.down = true;
  s.down_message = "redis store redis://127.0.0.1:1: connect: Connection refused";
  sg::idempotency_guard g(s, {.time = &clock});
  const stormguard::time_point t0 = clock.now();
  for (const std::string key : {"k1", "k2"}) {
    EXPECT_EQ(g.handle({"p", "POST", "/", "", key, t0}, [](sg::transaction&) { return charged(); })
                  .response.status,
              503);
  }
  EXPECT_EQ(s.calls, 2) << "each called the store";
}

TEST(GuardShortCircuit, ASuccessInBetweenResetsTheCount) {
  memory_store s;
  sg::idempotency_guard g(s, {.trip_after_failures = 2});
  auto charge = [&](const std::string& key) {
    return g.handle({"p", "POST", "/", "", key}, [](sg::transaction&) { return charged(); });
  };
  s.down = true;
  (void)charge("a");
  s.down = false;
  EXPECT_EQ(charge("b").decision, sg::decision::ran);
  s.down = true;
  (void)charge("c");
  EXPECT_FALSE(g.store_held_down());
}

TEST(GuardObserver, HearsEveryDecisionAndEveryStoreCallsLatency) {
  stormguard::testing::manual_clock clock;
  memory_store s;
  s.clock = &clock;
  s.latency = 7ms;
  recording_observer seen;
  sg::idempotency_guard g(s, {.time = &clock,
                              .find_unprefixed_digest_records = false,
                              .find_unhashed_records = false,
                              .observer = &seen});
  auto charge = [&](std::string_view body) {
    return g.handle({"p", "POST", "/", body, "k"}, [](sg::transaction&) { return charged(); });
  };
  (void)charge("a");  // acquired and ran
  (void)charge("a");  // replayed
  (void)charge("b");  // mismatch
  (void)g.handle({"p", "POST", "/", "", "bad key \x01"},
                 [](sg::transaction&) { return charged(); });
  EXPECT_EQ(seen.decisions,
            (std::vector<sg::decision>{sg::decision::ran, sg::decision::replayed,
                                       sg::decision::mismatch, sg::decision::bad_key}));
  ASSERT_EQ(seen.calls.size(), 4U);  // begin, complete, begin, begin
  EXPECT_EQ(seen.calls[0].op, sg::store_operation::begin);
  EXPECT_EQ(seen.calls[1].op, sg::store_operation::complete);
  for (const auto& c : seen.calls) {
    EXPECT_EQ(c.latency, 7ms);
    EXPECT_FALSE(c.failed);
  }
  EXPECT_EQ(sg::to_string(sg::store_operation::complete), "complete");
}

TEST(OpenStore, BadSpecsNameTheStoreAndQuoteTheSpec) {
  auto message = [](std::string_view spec) {
    try {
      (void)sg::open_store(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("keys.db"),
            "store \"keys.db\": expected sqlite:PATH, postgres:URL or redis:URL");
  EXPECT_EQ(message("sqlite:"), "store \"sqlite:\": nothing after 'sqlite:'");
  EXPECT_NE(message("mysql://x").find("unknown store 'mysql'"), std::string::npos);
}

TEST(DecisionNames, AreTheEnumeratorNames) {
  EXPECT_EQ(sg::to_string(sg::decision::store_unavailable), "store_unavailable");
  EXPECT_EQ(sg::to_string(sg::decision::replayed), "replayed");
  EXPECT_EQ(sg::to_string(sg::store_kind::postgres), "postgres");
}

}  // namespace
