// The guard's pure parts (stormguard/guard/guard.hpp): fingerprints, the Idempotency-Key field,
// option checks, store specs. The protocol on real stores: tests/guard_store_suite.hpp.
#include "stormguard/guard/guard.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "stormguard/guard/store.hpp"

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
