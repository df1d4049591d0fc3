// SPDX-License-Identifier: Apache-2.0
// stormguard/config/export.hpp: every built-in policy (policies/*.json, the simulator's built-ins
// in policies/builtin-strategies.json, and the imports of policies/grpc-service-config.json and
// the Envoy examples) exported to Envoy and gRPC and imported back: field by field, what the
// format holds comes back, and every field that does not has a warning naming it. The Linkerd
// output is valid YAML with the documented fields. gRPC status codes in policies (issue 34 item
// 2): their reading, their errors, and the importers that keep them.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "stormguard/config/export.hpp"
#include "stormguard/config/policy.hpp"
#include "support/policy_text.hpp"

namespace {

using namespace std::chrono_literals;
namespace config = stormguard::config;
using config::export_target;
using stormguard::test_support::error_of;
using stormguard::test_support::one;
using stormguard::test_support::parse;
using stormguard::test_support::value_of;

// Every built-in policy: the files of policies/ in stormguard's format, and the imports of the
// gRPC and Envoy examples there.
std::vector<config::policy> builtin_policies() {
  std::vector<config::policy> all;
  const auto add = [&all](const std::string& file, config::policy_format f) {
    for (auto& p : value_of(config::load_policies(STORMGUARD_SOURCE_DIR "/policies/" + file, f))) {
      p.warnings.clear();
      all.push_back(std::move(p));
    }
  };
  for (const char* file :
       {"builtin-strategies.json", "recommended.json", "seed-go-engine.json", "clients.json"}) {
    add(file, config::policy_format::stormguard);
  }
  add("grpc-service-config.json", config::policy_format::grpc);
  add("envoy-route.yaml", config::policy_format::envoy);
  add("envoy-bootstrap.yaml", config::policy_format::envoy);
  return all;
}

// The fields of `p` that act on a call and are not the same in `q` (what came back), by their
// path in the file format. Fields that do not act are not compared: backoff, statuses and codes
// of a policy without retries.
std::vector<std::string> differing_fields(const config::policy& p, const config::policy& q) {
  std::vector<std::string> out;
  const auto check = [&out](bool same, const char* field) {
    if (!same) out.emplace_back(field);
  };
  check(p.hedging.has_value() == q.hedging.has_value(), "hedging");
  check(p.retry.max_retries == q.retry.max_retries, "retries");
  if (p.retry.max_retries > 0) {
    check(p.retry.backoff.base == q.retry.backoff.base, "backoff.base");
    check(p.retry.backoff.cap == q.retry.backoff.cap, "backoff.cap");
    check(p.retry.backoff.multiplier == q.retry.backoff.multiplier, "backoff.multiplier");
    check(p.retry.backoff.jitter == q.retry.backoff.jitter, "backoff.jitter");
    check(p.statuses == q.statuses, "retryable_statuses");
    // Absent means the gRPC client's default, UNAVAILABLE: the same behaviour.
    const auto codes = [](const config::policy& x) {
      return x.retryable_grpc_codes.value_or(config::default_retryable_grpc_codes());
    };
    check(codes(p) == codes(q), "retryable_grpc_codes");
  }
  check(p.retry.max_retry_after == q.retry.max_retry_after, "max_retry_after");
  check(p.attempt_timeout == q.attempt_timeout, "attempt_timeout");
  check(p.deadline == q.deadline, "deadline");
  check(p.budget == q.budget, "budget");
  if (p.hedging && q.hedging) {
    const auto& h = *p.hedging;
    const auto& k = *q.hedging;
    check(h.options.max_attempts == k.options.max_attempts, "hedging.max_attempts");
    check(
        h.options.delay == k.options.delay && h.options.delay_quantile == k.options.delay_quantile,
        "hedging.delay");
    check(h.non_fatal_statuses == k.non_fatal_statuses, "hedging.non_fatal_statuses");
    check(h.non_fatal_grpc_codes.value_or(config::grpc_codes{}) ==
              k.non_fatal_grpc_codes.value_or(config::grpc_codes{}),
          "hedging.non_fatal_grpc_codes");
  }
  return out;
}

// True when a warning names `field` or the object that holds it ("backoff" for backoff.base).
bool warned(const std::vector<std::string>& warnings, const std::string& field) {
  std::vector<std::string> names = {field};
  if (const auto dot = field.find('.'); dot != std::string::npos) {
    names.push_back(field.substr(0, dot));
  }
  for (const auto& w : warnings) {
    for (const auto& n : names) {
      if (w.rfind(n + ":", 0) == 0 || w.rfind(n + ".", 0) == 0) return true;
    }
  }
  return false;
}

config::policy round_trip(const config::exported_policy& out, config::policy_format f) {
  const auto back = config::parse_policies(out.text, f);
  EXPECT_TRUE(back) << (back ? "" : back.error().message) << "\n" << out.text;
  if (!back) return {};
  EXPECT_EQ(back->size(), 1U) << out.text;
  return back->front();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

TEST(ExportRoundTrip, EveryBuiltInPolicyComesBackFromGrpcWithEveryLossWarned) {
  const auto all = builtin_policies();
  ASSERT_GE(all.size(), 20U);
  for (const auto& p : all) {
    SCOPED_TRACE("policy " + p.name);
    const auto out = config::export_grpc(p);
    const config::policy q = round_trip(out, config::policy_format::grpc);
    for (const auto& field : differing_fields(p, q)) {
      EXPECT_TRUE(warned(out.warnings, field))
          << field << " was lost without a warning; the warnings:\n"
          << joined(out.warnings) << out.text;
    }
    // What a service config always holds.
    EXPECT_EQ(q.deadline, p.deadline);
    EXPECT_EQ(q.hedging.has_value(), p.hedging.has_value());
    if (p.hedging) {
      EXPECT_EQ(q.hedging->options.max_attempts, p.hedging->options.max_attempts);
      if (p.hedging->options.delay_quantile == 0) {
        EXPECT_EQ(q.hedging->options.delay, p.hedging->options.delay);
      }
    } else if (p.retry.max_retries > 0) {
      EXPECT_EQ(q.retry.max_retries, std::min(p.retry.max_retries, 4));
      EXPECT_EQ(q.retry.backoff.base, p.retry.backoff.base);
      EXPECT_EQ(q.retry.backoff.cap, p.retry.backoff.cap);
      EXPECT_EQ(q.retry.backoff.multiplier, p.retry.backoff.multiplier);
      EXPECT_EQ(q.attempt_timeout, p.attempt_timeout);
      ASSERT_TRUE(q.retryable_grpc_codes.has_value());
      EXPECT_EQ(*q.retryable_grpc_codes,
                p.retryable_grpc_codes.value_or(config::default_retryable_grpc_codes()));
    } else {
      EXPECT_EQ(q.retry.max_retries, 0);
    }
    if (std::holds_alternative<stormguard::token_bucket_throttle_options>(p.budget) ||
        std::holds_alternative<stormguard::no_budget>(p.budget)) {
      EXPECT_EQ(q.budget, p.budget);
    }
    // Only a gRPC name ("package.Service" or "package.Service/Method") survives.
    static const std::regex grpc_name(R"(^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(/[A-Za-z_]\w*)?$)");
    EXPECT_EQ(q.name, std::regex_match(p.name, grpc_name) ? p.name : "default");
  }
}

TEST(ExportRoundTrip, EveryBuiltInPolicyComesBackFromEnvoyWithEveryLossWarned) {
  for (const auto& p : builtin_policies()) {
    SCOPED_TRACE("policy " + p.name);
    const auto out = config::export_envoy(p);
    const config::policy q = round_trip(out, config::policy_format::envoy);
    for (const auto& field : differing_fields(p, q)) {
      EXPECT_TRUE(warned(out.warnings, field))
          << field << " was lost without a warning; the warnings:\n"
          << joined(out.warnings) << out.text;
    }
    // What an Envoy route and its cluster always hold.
    EXPECT_EQ(q.name, "stormguard/" + p.name);
    EXPECT_EQ(q.deadline, p.deadline);
    EXPECT_EQ(q.hedging.has_value(), p.hedging.has_value());
    if (p.hedging) {
      EXPECT_EQ(q.hedging->options.max_attempts, p.hedging->options.max_attempts);
      EXPECT_EQ(q.hedging->non_fatal_statuses, p.hedging->non_fatal_statuses);
    } else {
      EXPECT_EQ(q.retry.max_retries, p.retry.max_retries);
      EXPECT_EQ(q.statuses, p.statuses);
      EXPECT_EQ(q.attempt_timeout, p.attempt_timeout);
      if (p.retry.max_retries > 0 && p.retry.backoff.base >= 1ms) {
        EXPECT_EQ(q.retry.backoff.base, p.retry.backoff.base);
        EXPECT_EQ(q.retry.backoff.cap, p.retry.backoff.cap);
      }
    }
    if (std::holds_alternative<stormguard::concurrency_budget_options>(p.budget)) {
      EXPECT_EQ(q.budget, p.budget);
    }
  }
}

TEST(ExportRoundTrip, AGrpcPolicyWithEveryFieldComesBackWhole) {
  auto p = parse(R"({"policies": [{"name": "pkg.Orders/Get", "retries": 4,
      "backoff": {"base": "50ms", "cap": "2s", "multiplier": 1.5, "jitter": "full"},
      "budget": {"kind": "token_bucket", "max_tokens": 20, "token_ratio": 0.25},
      "retryable_statuses": [429, 502, 503, 504],
      "retryable_grpc_codes": ["UNAVAILABLE", "ABORTED", "RESOURCE_EXHAUSTED"],
      "attempt_timeout": "500ms", "deadline": "5s", "client_profile": "grpc"}]})")[0];
  const auto out = config::export_grpc(p);
  EXPECT_TRUE(out.warnings.empty()) << joined(out.warnings);
  auto q = round_trip(out, config::policy_format::grpc);
  q.warnings.clear();
  q.description = p.description;
  EXPECT_EQ(q, p) << out.text;
  const auto doc = nlohmann::json::parse(out.text);
  EXPECT_EQ(doc["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"],
            nlohmann::json::parse(R"(["RESOURCE_EXHAUSTED", "ABORTED", "UNAVAILABLE"])"));
  EXPECT_EQ(doc["methodConfig"][0]["name"][0]["method"], "Get");
  EXPECT_EQ(doc["retryThrottling"]["maxTokens"], 20);
}

TEST(ExportRoundTrip, AnEnvoyPolicyWithEveryFieldComesBackWhole) {
  auto p = parse(R"({"policies": [{"name": "api", "retries": 2,
      "backoff": {"base": "25ms", "cap": "250ms", "multiplier": 2, "jitter": "full"},
      "budget": {"kind": "concurrency", "budget_percent": 25, "min_retry_concurrency": 5},
      "retryable_statuses": [409, 429, 502, 503, 504],
      "retryable_grpc_codes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
      "max_retry_after": "60s", "attempt_timeout": "1s", "deadline": "15s",
      "client_profile": "envoy"}]})")[0];
  const auto out = config::export_envoy(p);
  auto q = round_trip(out, config::policy_format::envoy);
  EXPECT_EQ(q.name, "stormguard/api");
  q.name = p.name;
  q.description = p.description;
  q.warnings.clear();
  EXPECT_EQ(q, p) << out.text;
  const auto doc = nlohmann::json::parse(out.text);
  const auto& retry = doc["virtual_hosts"][0]["routes"][0]["route"]["retry_policy"];
  EXPECT_EQ(retry["retry_on"],
            "connect-failure,refused-stream,reset,gateway-error,retriable-4xx,"
            "retriable-status-codes,resource-exhausted,unavailable");
  EXPECT_EQ(retry["retriable_status_codes"], nlohmann::json::parse("[429]"));
  // The only warning: Envoy's router does not wait for a Retry-After on 429 and 503.
  ASSERT_EQ(out.warnings.size(), 1U) << joined(out.warnings);
  EXPECT_EQ(out.warnings[0].rfind("max_retry_after:", 0), 0U);
}

TEST(Export, LinkerdWritesAServiceProfileWithTheRatioBudget) {
  const auto p = parse(R"({"policies": [{"name": "recommended", "retries": 3,
      "budget": {"kind": "ratio", "ratio": 0.2, "window": "10s", "min_retries_per_second": 5},
      "retryable_statuses": [429, 502, 503, 504], "deadline": "2500ms"}]})")[0];
  const auto out = config::export_linkerd(p);
  const YAML::Node doc = YAML::Load(out.text);
  EXPECT_EQ(doc["apiVersion"].as<std::string>(), "linkerd.io/v1alpha2");
  EXPECT_EQ(doc["kind"].as<std::string>(), "ServiceProfile");
  EXPECT_EQ(doc["spec"]["retryBudget"]["retryRatio"].as<double>(), 0.2);
  EXPECT_EQ(doc["spec"]["retryBudget"]["minRetriesPerSecond"].as<int>(), 5);
  EXPECT_EQ(doc["spec"]["retryBudget"]["ttl"].as<std::string>(), "10s");
  const YAML::Node route = doc["spec"]["routes"][0];
  EXPECT_TRUE(route["isRetryable"].as<bool>());
  EXPECT_EQ(route["timeout"].as<std::string>(), "2500ms");
  EXPECT_EQ(route["condition"]["pathRegex"].as<std::string>(), ".*");
  // 429 is a failure for Linkerd only through a response class.
  EXPECT_EQ(route["responseClasses"][0]["condition"]["status"]["min"].as<int>(), 429);
  EXPECT_TRUE(route["responseClasses"][0]["isFailure"].as<bool>());
  // Lost: the retry count and the backoff (Linkerd has neither), the statuses (every 5xx).
  for (const char* field : {"retries", "backoff", "retryable_statuses", "max_retry_after"}) {
    EXPECT_TRUE(warned(out.warnings, field)) << field << "\n" << joined(out.warnings);
  }
}

TEST(Export, LinkerdWithoutARatioBudgetOrRetriesSaysWhatApplies) {
  const auto p = parse(one(R"(, "retries": 0, "budget": "token_bucket")"))[0];
  const auto out = config::export_linkerd(p);
  const YAML::Node doc = YAML::Load(out.text);
  EXPECT_FALSE(doc["spec"]["retryBudget"]);
  EXPECT_FALSE(doc["spec"]["routes"][0]["isRetryable"].as<bool>());
  EXPECT_TRUE(warned(out.warnings, "budget")) << joined(out.warnings);
  EXPECT_TRUE(warned(out.warnings, "deadline")) << joined(out.warnings);
}

TEST(Export, TargetsHaveNamesAndUnknownOnesAreRefused) {
  for (const auto t : {export_target::envoy, export_target::grpc, export_target::linkerd}) {
    EXPECT_EQ(config::parse_export_target(config::to_string(t)), t);
  }
  EXPECT_EQ(config::parse_export_target("istio"), std::nullopt);
  EXPECT_EQ(config::parse_export_target("Envoy"), std::nullopt);
  EXPECT_EQ(config::parse_export_target(""), std::nullopt);
}

TEST(Export, AGrpcNameThatIsNotOneIsWarnedAndTheEntryAppliesToEveryMethod) {
  const auto p = parse(one(R"(, "retries": 2)"))[0];  // named "p"
  const auto out = config::export_grpc(p);
  EXPECT_EQ(nlohmann::json::parse(out.text)["methodConfig"][0]["name"],
            nlohmann::json::parse("[{}]"));
  EXPECT_TRUE(warned(out.warnings, "name")) << joined(out.warnings);
  // An Envoy import's "HOST/ROUTE", a method that is a path, a service of dots only: none is a
  // gRPC name (a selector for them would match no method, silently).
  for (const char* name : {"api/charges", "backend", "a/b/c", "...", "pkg./Get", "pkg.Svc/",
                           "pkg.Svc/1st", "9pkg.Svc"}) {
    config::policy q = p;
    q.name = name;
    const auto o = config::export_grpc(q);
    EXPECT_EQ(nlohmann::json::parse(o.text)["methodConfig"][0]["name"],
              nlohmann::json::parse("[{}]"))
        << name;
    EXPECT_TRUE(warned(o.warnings, "name")) << name << ": " << joined(o.warnings);
  }
  // gRPC's own forms are kept.
  config::policy q = p;
  q.name = "helloworld.v1.Greeter/SayHello";
  EXPECT_EQ(
      nlohmann::json::parse(config::export_grpc(q).text)["methodConfig"][0]["name"],
      nlohmann::json::parse(R"([{"service": "helloworld.v1.Greeter", "method": "SayHello"}])"));
  q.name = "helloworld.Greeter";
  EXPECT_EQ(nlohmann::json::parse(config::export_grpc(q).text)["methodConfig"][0]["name"],
            nlohmann::json::parse(R"([{"service": "helloworld.Greeter"}])"));
}

// The example blocks of docs/policy.md ("$ stormguard policy export --to T
// policies/recommended.json", the warnings, then the output) are what the writers give.
TEST(ExportDocs, EachTargetsExampleIsTheOutput) {
  std::ifstream in(STORMGUARD_SOURCE_DIR "/docs/policy.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  const auto recommended =
      value_of(config::load_policies(STORMGUARD_SOURCE_DIR "/policies/recommended.json"))[0];
  for (const auto t : {export_target::envoy, export_target::grpc, export_target::linkerd}) {
    SCOPED_TRACE(std::string(config::to_string(t)));
    const std::string command = "$ stormguard policy export --to " +
                                std::string(config::to_string(t)) + " policies/recommended.json\n";
    const auto at = text.find(command);
    ASSERT_NE(at, std::string::npos);
    const auto end = text.find("```\n", at);
    ASSERT_NE(end, std::string::npos);
    std::istringstream block(text.substr(at + command.size(), end - at - command.size()));
    std::string output;
    std::vector<std::string> warnings;
    for (std::string line; std::getline(block, line);) {
      const std::string prefix =
          "stormguard policy export: warning: --to " + std::string(config::to_string(t)) + ": ";
      if (line.rfind("stormguard policy export: ", 0) == 0) {
        if (line.rfind(prefix, 0) == 0) warnings.push_back(line.substr(prefix.size()));
        continue;
      }
      output += line + "\n";
    }
    const auto out = config::export_policy(recommended, t);
    EXPECT_EQ(output, out.text);
    EXPECT_EQ(warnings, out.warnings);
  }
}

// ---------------------------------------------------------------------------------------------
// gRPC status codes in a policy file
// ---------------------------------------------------------------------------------------------

TEST(PolicyGrpcCodes, NamesAndNumbersAreReadAndWrittenBackAsNames) {
  const auto p =
      parse(one(R"(, "retryable_grpc_codes": ["UNAVAILABLE", 10, "RESOURCE_EXHAUSTED"])"))[0];
  ASSERT_TRUE(p.retryable_grpc_codes);
  EXPECT_EQ(p.retryable_grpc_codes->to_vector(), (std::vector<int>{8, 10, 14}));
  const std::string text = config::to_json(p);
  EXPECT_NE(
      text.find(R"("retryable_grpc_codes": ["RESOURCE_EXHAUSTED", "ABORTED", "UNAVAILABLE"])"),
      std::string::npos)
      << text;
  EXPECT_EQ(parse(R"({"policies": [)" + text + "]}")[0], p);
  // Absent: not written (the gRPC client's default applies).
  EXPECT_EQ(config::to_json(parse(one(""))[0]).find("grpc"), std::string::npos);
}

TEST(PolicyGrpcCodes, BadCodesAreErrorsNamingTheFieldAndTheValue) {
  struct bad_case {
    const char* codes;
    const char* field;
    const char* says;
  };
  for (const auto& c : std::vector<bad_case>{
           {R"(["UNAVAILABLE", "NOPE"])", "policies[0].retryable_grpc_codes[1]",
            R"(unknown gRPC status code "NOPE")"},
           {R"(["unavailable"])", "policies[0].retryable_grpc_codes[0]",
            R"(must be written as gRPC writes it, "UNAVAILABLE")"},
           {R"(["OK"])", "policies[0].retryable_grpc_codes[0]", "OK (0) is a success"},
           {R"([0])", "policies[0].retryable_grpc_codes[0]", "OK (0) is a success"},
           {R"([17])", "policies[0].retryable_grpc_codes[0]", "unknown gRPC status code 17"},
           {R"([-1])", "policies[0].retryable_grpc_codes[0]", "unknown gRPC status code -1"},
           {R"(["ABORTED", "ABORTED"])", "policies[0].retryable_grpc_codes[1]",
            "ABORTED appears more than once"},
           {R"("UNAVAILABLE")", "policies[0].retryable_grpc_codes", "must be an array"},
       }) {
    const auto e = error_of(one(std::string(R"(, "retryable_grpc_codes": )") + c.codes));
    EXPECT_EQ(e.field, c.field) << c.codes;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(c.field), std::string::npos) << e.message;
  }
  const auto hedged =
      error_of(one(R"(, "hedging": {"max_attempts": 2, "non_fatal_grpc_codes": ["BOGUS"]})"));
  EXPECT_EQ(hedged.field, "policies[0].hedging.non_fatal_grpc_codes[0]");
  const auto both =
      error_of(one(R"(, "retryable_grpc_codes": ["UNAVAILABLE"], "hedging": {"max_attempts": 2})"));
  EXPECT_EQ(both.field, "policies[0].retryable_grpc_codes");
}

TEST(PolicyGrpcCodes, TheGrpcImporterKeepsEveryCodeAndTheHttpMappingStays) {
  const auto p = parse(R"({"methodConfig": [{"name": [{"service": "s"}],
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                      "backoffMultiplier": 2,
                      "retryableStatusCodes": ["UNAVAILABLE", "internal", 8]}}]})",
                       config::policy_format::grpc)[0];
  ASSERT_TRUE(p.retryable_grpc_codes);
  EXPECT_EQ(p.retryable_grpc_codes->to_vector(), (std::vector<int>{8, 13, 14}));
  EXPECT_EQ(p.statuses, stormguard::retryable_statuses{});  // UNAVAILABLE: 429, 502, 503, 504
  ASSERT_EQ(p.warnings.size(), 2U);  // INTERNAL and RESOURCE_EXHAUSTED have no HTTP status
  for (const auto& w : p.warnings) {
    EXPECT_NE(w.find("kept in retryable_grpc_codes"), std::string::npos) << w;
  }
  const auto h = parse(R"({"methodConfig": [{"name": [{}],
      "hedgingPolicy": {"maxAttempts": 2, "nonFatalStatusCodes": ["ABORTED"]}}]})",
                       config::policy_format::grpc)[0];
  ASSERT_TRUE(h.hedging && h.hedging->non_fatal_grpc_codes);
  EXPECT_EQ(h.hedging->non_fatal_grpc_codes->to_vector(), (std::vector<int>{10}));
  EXPECT_TRUE(h.hedging->non_fatal_statuses.to_vector().empty());
}

TEST(PolicyGrpcCodes, EnvoysGrpcConditionsAreKeptAsCodes) {
  const auto p = parse(R"({"retry_policy": {"retry_on": "unavailable,resource-exhausted,5xx",
                            "num_retries": 2}})",
                       config::policy_format::envoy)[0];
  ASSERT_TRUE(p.retryable_grpc_codes);
  EXPECT_EQ(p.retryable_grpc_codes->to_vector(), (std::vector<int>{8, 14}));
  for (const auto& w : p.warnings) EXPECT_EQ(w.find("unavailable"), std::string::npos) << w;
}

}  // namespace
