// SPDX-License-Identifier: Apache-2.0
// `stormguard serve --defence` on a real loopback socket, as a user's own client sees it: curl's
// retry (x-envoy-attempt-count: 2) and a hostile attempt count get 503 with
// grpc-retry-pushback-ms: -1 and no Retry-After from the server's retry budget, a first attempt
// gets 200, /metrics counts the refusals by defence and reason, and a comma is a usage error.
#include <gtest/gtest.h>

#ifdef STORMGUARD_CLI_PATH

#include <unistd.h>

#include <cstdio>
#include <string>

#include "test_util.hpp"

namespace {

using stormguard::test_util::run_shell;

const std::string k_cli = STORMGUARD_CLI_PATH;

// A scenario file; by default one whose server budget grants no retry at all (ratio 0, floor 0),
// so that the first retry is refused.
class scenario_file {
 public:
  explicit scenario_file(
      const char* server = R"({"workers": 1, "queue_limit": 10, "service_time": "5ms",
                   "defences": {"retry-budget": {"ratio": 0, "min_retries_per_second": 0}}})") {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs((std::string(
                    R"({"name": "tiny", "seed": 1, "duration": "10s", "requests_per_second": 10,
        "clients": 1, "timeout": "1s", "incident": null, "server": )") +
                server + "}")
                   .c_str(),
               f);
    std::fclose(f);
  }
  ~scenario_file() { std::remove(path.c_str()); }
  std::string path = "/tmp/stormguard-serve-defence-" + std::to_string(::getpid()) + "-" +
                     std::to_string(++count_) + ".json";

 private:
  static inline int count_ = 0;
};

// Runs `serve SCENARIO ARGS`, waits for its address, runs `requests` (a shell snippet where
// $url is the server's base URL) and stops the server; the snippet's output.
std::string with_serve(const std::string& scenario, const std::string& args,
                       const std::string& requests) {
  const std::string script =
      "out=$(mktemp); " + k_cli + " serve " + scenario + " --port 0 " + args +
      " >$out 2>/dev/null & pid=$!; "
      "for i in $(seq 200); do grep -q '^listening on ' $out && break; sleep 0.01; done; "
      "url=$(sed -n 's/^listening on //p' $out | head -n 1); " +
      requests + "; kill $pid; wait $pid; rm -f $out";
  return run_shell(script).output;
}

TEST(ServeDefenceCli, ARefusedRetryGets503WithDoNotRetryPushback) {
  scenario_file s;
  const std::string out =
      with_serve(s.path, "--defence retry-budget",
                 "curl -s -o /dev/null -w 'first %{http_code}\\n' ${url}orders/1; "
                 "curl -s -i -H 'x-envoy-attempt-count: 2' ${url}orders/1 | tr -d '\\r'; "
                 "curl -s -o /dev/null -w 'hostile %{http_code}\\n' -H 'x-envoy-attempt-count: -1' "
                 "${url}orders/1; "
                 "curl -s ${url}metrics | grep '^stormguard_serve_defence_decisions_total'");
  EXPECT_NE(out.find("first 200"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 503"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc-retry-pushback-ms: -1"), std::string::npos) << out;
  EXPECT_EQ(out.find("Retry-After"), std::string::npos) << out;
  EXPECT_NE(out.find("hostile 503"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="retry-budget",reason="retry_refused"} 2)"),
      std::string::npos)
      << out;
}

TEST(ServeDefenceCli, WithoutTheDefenceTheRetryIsServed) {
  scenario_file s;
  const std::string out =
      with_serve(s.path, "--defence none",
                 "curl -s -o /dev/null -w 'retry %{http_code}\\n' -H 'x-envoy-attempt-count: 2' "
                 "${url}orders/1");
  EXPECT_NE(out.find("retry 200"), std::string::npos) << out;
}

// One worker busy for 400 ms (a request without grpc-timeout); behind it a request whose
// deadline passes while it waits, one whose deadline is 100 ms after the worker frees (less than
// the 400 ms service estimate), and one with 5 s to spare. The first two are never started and
// are answered 503 with "do not retry"; the last one is served.
TEST(ServeDefenceCli, DropExpiredNeverStartsWhatCannotFinishBeforeItsDeadline) {
  scenario_file s(R"({"workers": 1, "queue_limit": 10, "service_time": "400ms"})");
  const std::string out =
      with_serve(s.path, "--defence drop-expired",
                 "req() { curl -s -o /dev/null -w \"$1 %{http_code}\\n\" $2 ${url}orders/1; }; "
                 "req busy '' & p1=$!; sleep 0.1; "
                 "req passed '-H grpc-timeout:100m' & p2=$!; sleep 0.1; "
                 "req short '-H grpc-timeout:400m' & p3=$!; sleep 0.1; "
                 "req spare '-H grpc-timeout:5S' & p4=$!; sleep 0.1; "
                 "curl -s -D - -o /dev/null -H grpc-timeout:1m ${url}orders/2 | tr -d '\\r' | "
                 "grep -i '^grpc-retry-pushback-ms'; "
                 "wait $p1 $p2 $p3 $p4; "
                 "curl -s ${url}metrics | grep '^stormguard_serve_defence_decisions_total'");
  EXPECT_NE(out.find("busy 200"), std::string::npos) << out;
  EXPECT_NE(out.find("passed 503"), std::string::npos) << out;
  EXPECT_NE(out.find("short 503"), std::string::npos) << out;
  EXPECT_NE(out.find("spare 200"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc-retry-pushback-ms: -1"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="drop-expired",reason="deadline_passed"} 3)"),
      std::string::npos)
      << out;
}

// A concurrency limit of one: while a request is outstanding, the next is refused at once with
// 503 and a Retry-After of 1 to 5 s (jittered so that refused clients come back spread out).
TEST(ServeDefenceCli, TheConcurrencyLimitRefusesWithAJitteredRetryAfter) {
  // The first request holds the one slot for 1 s; the second starts 400 ms after it (margin
  // for a loaded machine that is slow to start the first curl).
  scenario_file s(R"({"workers": 1, "queue_limit": 10, "service_time": "1s",
                   "defences": {"concurrency-limit": {"initial_limit": 1, "min_concurrency": 1}}})");
  const std::string out =
      with_serve(s.path, "--defence concurrency-limit",
                 "curl -s -o /dev/null -w 'first %{http_code}\\n' ${url}orders/1 & p1=$!; "
                 "sleep 0.4; curl -s -i ${url}orders/2 | tr -d '\\r'; wait $p1; "
                 "curl -s -o /dev/null -w 'after %{http_code}\\n' ${url}orders/3; "
                 "curl -s ${url}metrics | grep '^stormguard_serve_defence_decisions_total'");
  EXPECT_NE(out.find("first 200"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 503"), std::string::npos) << out;
  const auto at = out.find("Retry-After: ");
  ASSERT_NE(at, std::string::npos) << out;
  const int seconds = std::stoi(out.substr(at + 13));
  EXPECT_GE(seconds, 1);
  EXPECT_LE(seconds, 5);
  EXPECT_NE(out.find("after 200"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="concurrency-limit",reason="over_limit"} 1)"),
      std::string::npos)
      << out;
}

// retry-after with the retry budget: the refused retry carries, beside its "do not retry"
// pushback, a Retry-After the server chose (the overload has just begun: 1 to 2 s), for the
// clients that obey nothing else; the pacer's decision is counted.
TEST(ServeDefenceCli, RetryAfterPacesTheRefusalsOfTheOtherDefences) {
  scenario_file s;
  const std::string out =
      with_serve(s.path, "--defence retry-budget+retry-after",
                 "curl -s -o /dev/null -w 'first %{http_code}\\n' ${url}orders/1; "
                 "curl -s -i -H 'x-envoy-attempt-count: 2' ${url}orders/1 | tr -d '\\r'; "
                 "curl -s ${url}metrics | grep '^stormguard_serve_defence_decisions_total'");
  EXPECT_NE(out.find("first 200"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 503"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc-retry-pushback-ms: -1"), std::string::npos) << out;
  const auto at = out.find("Retry-After: ");
  ASSERT_NE(at, std::string::npos) << out;
  const int seconds = std::stoi(out.substr(at + 13));
  EXPECT_GE(seconds, 1);
  EXPECT_LE(seconds, 2);
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="retry-after",reason="paced"} 1)"),
      std::string::npos)
      << out;
}

// Hostile grpc-timeout values on a real socket, to an idle server: 0 (any unit) is already
// expired and never started (503 + do not retry); a malformed value is no deadline, served as if
// absent; a huge one saturates (no deadline in practice) and is served.
TEST(ServeDefenceCli, HostileGrpcTimeoutsWinNothingTheirAbsenceWouldNot) {
  scenario_file s(R"({"workers": 1, "queue_limit": 10, "service_time": "5ms"})");
  const std::string out =
      with_serve(s.path, "--defence drop-expired",
                 "for v in 0m 0n 99999999H 1s -1S 123456789S abc ' ' 1.5S; do "
                 "curl -s -o /dev/null -w \"[$v] %{http_code}\\n\" -H \"grpc-timeout: $v\" "
                 "${url}orders/1; done; "
                 "curl -s -o /dev/null -w '[absent] %{http_code}\\n' ${url}orders/1");
  for (const char* expired : {"[0m] 503", "[0n] 503"}) {
    EXPECT_NE(out.find(expired), std::string::npos) << out;
  }
  for (const char* served : {"[99999999H] 200", "[1s] 200", "[-1S] 200", "[123456789S] 200",
                             "[abc] 200", "[ ] 200", "[1.5S] 200", "[absent] 200"}) {
    EXPECT_NE(out.find(served), std::string::npos) << served << "\n" << out;
  }
}

// A request that repeats an attempt field, sent raw over a socket (curl would not say what it
// sends): values that read differently ("1" then "2") do not say which attempt it is, so it is
// malformed, a retry of unknown number, and the budget that grants no retry refuses it, whichever
// field is repeated; the same value twice reads as one (a first attempt, served). Before the
// server read every field, only the first counted and "1" then "2" was served as a first attempt.
TEST(ServeDefenceCli, ARepeatedAttemptFieldThatDisagreesIsMalformed) {
  scenario_file s;
  const std::string out =
      with_serve(s.path, "--defence retry-budget",
                 "port=${url#http://127.0.0.1:}; port=${port%%/*}; "
                 "raw() { printf \"GET /orders/1 HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n$2Connection: "
                 "close\\r\\n\\r\\n\" | bash -c \"exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; "
                 "head -n 1 <&3\" | tr -d '\\r' | sed \"s/^/[$1] /\"; }; "
                 "raw count-1-2 'x-envoy-attempt-count: 1\\r\\nx-envoy-attempt-count: 2\\r\\n'; "
                 "raw previous-0-1 'grpc-previous-rpc-attempts: 0\\r\\ngrpc-previous-rpc-attempts: "
                 "1\\r\\n'; "
                 "raw count-1-1 'x-envoy-attempt-count: 1\\r\\nX-Envoy-Attempt-Count:  1\\r\\n'; "
                 "raw previous-0-0 'grpc-previous-rpc-attempts: 0\\r\\ngrpc-previous-rpc-attempts: "
                 "0\\r\\n'; "
                 "curl -s ${url}metrics | grep '^stormguard_serve_defence_decisions_total'");
  EXPECT_NE(out.find("[count-1-2] HTTP/1.1 503"), std::string::npos) << out;
  EXPECT_NE(out.find("[previous-0-1] HTTP/1.1 503"), std::string::npos) << out;
  EXPECT_NE(out.find("[count-1-1] HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(out.find("[previous-0-0] HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="retry-budget",reason="retry_refused"} 2)"),
      std::string::npos)
      << out;
}

// shed-retries against forged labels, on a real socket: one worker busy for 2 s and a queue of
// one, so every further request is turned away (queue full), which keeps the server overloaded.
// Mallory's request that failed comes back labelled "attempt 1": its fingerprint still marks it
// as a retry and it is shed, as the same request without any label is; marking a new request as
// a retry only sheds mallory's own request; and alice's first attempt at the very target mallory
// failed on (a collision on purpose, from another principal) is no retry: the full queue turns it
// away as any first attempt, never "retry shed".
TEST(ServeDefenceCli, ForgedLabelsGainNothingAndStarveNoOtherPrincipal) {
  scenario_file s(R"({"workers": 1, "queue_limit": 1, "service_time": "2s",
                      "defences": {"shed-retries": {"hold": "10s"}}})");
  // One line per request: its name and the body of its answer.
  const auto ask = [](const std::string& name, const std::string& principal,
                      const std::string& label, const std::string& target) {
    return "echo \"" + name + " $(curl -s -H 'Authorization: Bearer " + principal + "' " +
           (label.empty() ? "" : "-H '" + label + "' ") + "${url}" + target + ")\"; ";
  };
  const std::string out =
      with_serve(s.path, "",
                 "curl -s -o /dev/null -m 5 ${url}orders/busy & b1=$!; "
                 "curl -s -o /dev/null -m 5 ${url}orders/queued & b2=$!; sleep 0.3; " +
                     ask("c1", "mallory", "", "orders/c") +
                     ask("c2", "mallory", "x-envoy-attempt-count: 1", "orders/c") +
                     ask("d1", "mallory", "", "orders/d") + ask("d2", "mallory", "", "orders/d") +
                     ask("e1", "mallory", "x-envoy-attempt-count: 2", "orders/e") +
                     ask("v1", "alice", "", "orders/c") +
                     "curl -s ${url}metrics | grep 'defence=\"shed-retries\"'; wait $b1 $b2");
  EXPECT_NE(out.find("c1 queue full"), std::string::npos) << out;
  EXPECT_NE(out.find("c2 retry shed: the server is overloaded"), std::string::npos) << out;
  EXPECT_NE(out.find("d1 queue full"), std::string::npos) << out;
  EXPECT_NE(out.find("d2 retry shed: the server is overloaded"), std::string::npos) << out;
  EXPECT_NE(out.find("e1 retry shed: the server is overloaded"), std::string::npos) << out;
  EXPECT_NE(out.find("v1 queue full"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"(stormguard_serve_defence_decisions_total{defence="shed-retries",reason="retry_shed"} 3)"),
      std::string::npos)
      << out;
}

TEST(ServeDefenceCli, ACommaIsAUsageError) {
  scenario_file s;
  const auto r = run_shell(k_cli + " serve " + s.path +
                           " --port 0 --defence retry-budget,drop-expired 2>&1; echo status $?");
  EXPECT_NE(r.output.find("status 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'+'"), std::string::npos) << r.output;
}

}  // namespace

#endif  // STORMGUARD_CLI_PATH
