// SPDX-License-Identifier: Apache-2.0
// app/occ.hpp (the application layer: not installed): the `brooker-occ` scenario, Marc Brooker's
// experiment from "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), as a model of its
// own.
//
// N clients each want to write one row once, under optimistic concurrency control (OCC). A client
// reads the row's version, then writes conditioned on that version; the write fails if another
// write got in first; on failure the client backs off and starts again with a read. All N clients
// send their first read at t = 0. Each of the four messages of a round (read request, read
// response, write request, write response) takes its own network delay |Normal(10, 2)| time units;
// the server handles a message the instant it arrives. After the n-th failed write (n from 1), the
// client waits backoff(n) after the failed write response arrives, then sends its read.
//
// The backoff is the library's own: every wait is `retry_policy::decide` with a
// stormguard::backoff of base 5, cap 2000 and ceiling_exponent::retry (the blog code's
// min(cap, base · 2^n)); decorrelated jitter starts from sleep = base (backoff.hpp). One time
// unit is represented as 1 ms of virtual time.
//
// "calls" are the writes that reach the server; "time" is the instant the last client receives
// its successful write response. The sweep averages both over `trials` independent trials per
// (clients, algorithm) point, in parallel, with results independent of the thread count.
//
//   stormguard::sim::occ_options options;             // N = 10..190 step 10, 100 trials
//   auto report = stormguard::sim::simulate_occ(options);
//   std::cout << stormguard::sim::format_table(report);
#ifndef STORMGUARD_APP_OCC_HPP
#define STORMGUARD_APP_OCC_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/parallel.hpp"

namespace stormguard::sim {

/// The settings of the brooker-occ sweep. Defaults: the blog's experiment. Times are virtual;
/// one of the blog's time units is 1 ms.
struct occ_options {
  std::uint64_t seed = 42;  ///< seeds every trial (each trial's generators come from it)
  int clients_from = 10;    ///< the first client count; in [1, 10,000]
  int clients_to = 190;     ///< the last client count; in [clients_from, 10,000]
  int clients_step = 10;    ///< the step between client counts; in [1, 10,000]
  int trials = 100;         ///< independent trials per point; in [1, 100,000]
  duration network_mean = std::chrono::milliseconds(10);  ///< mean message delay; in [0, 1 h]
  duration network_sd = std::chrono::milliseconds(2);     ///< its standard deviation; [0, 1 h]
  duration base = std::chrono::milliseconds(5);           ///< backoff base; in (0, cap]
  duration cap = std::chrono::milliseconds(2000);         ///< backoff cap; in [base, 1 h]
  unsigned threads =
      0;  ///< worker threads; 0 = one per hardware thread (results do not depend on it)

  friend bool operator==(const occ_options&, const occ_options&) = default;
};

/// The range violated by `o` as a sentence naming the field and the value, or nullopt.
[[nodiscard]] std::optional<std::string> validate(const occ_options& o);

/// One backoff algorithm of the sweep.
struct occ_algorithm {
  std::string name;                 ///< none, exponential, equal, full, decorrelated
  stormguard::retry_options retry;  ///< unlimited in practice: max_retries 1,000,000
};

/// The blog's five algorithms with `o`'s base and cap, in report order: `none` (retry at once:
/// a constant backoff of 0), `exponential` (no jitter), `equal`, `full`, `decorrelated`; all with
/// ceiling_exponent::retry and multiplier 2. max_retries is 1,000,000, which is never reached: a
/// client's failed writes are at most the successes of the others (N − 1).
[[nodiscard]] std::vector<occ_algorithm> occ_algorithms(const occ_options& o);

/// One trial's outcome.
struct occ_trial {
  std::int64_t calls = 0;   ///< writes that reached the server
  duration time{};          ///< when the last client received its successful write response
  std::int64_t events = 0;  ///< events processed: one per write reaching the server
};

/// Runs one trial of `clients` clients with `algorithm`, its generators seeded from `seed`.
/// Deterministic. When `write_times` is not null, the instant each write reached the server is
/// appended to it (in time order), for plots. Throws std::invalid_argument for clients outside
/// [1, 10,000] or invalid options (validate()).
[[nodiscard]] occ_trial simulate_occ_trial(int clients, const occ_algorithm& algorithm,
                                           std::uint64_t seed, const occ_options& o,
                                           std::vector<duration>* write_times = nullptr);

/// The random seed of trial `trial` of the point (clients, algorithm index) in simulate_occ: the
/// same trial can be rerun on its own (with write_times, for the plot of writes over time).
[[nodiscard]] std::uint64_t occ_trial_seed(std::uint64_t seed, int clients, std::size_t algorithm,
                                           std::size_t trial) noexcept;

/// The mean of one point of the sweep.
struct occ_point {
  /// The number of clients writing concurrently.
  int clients = 0;
  /// The backoff algorithm's name (one of occ_algorithms).
  std::string algorithm;
  double calls = 0.0;  ///< mean writes reaching the server per trial
  double time = 0.0;   ///< mean completion time per trial, in time units (ms)

  friend bool operator==(const occ_point&, const occ_point&) = default;
};

/// The writes of one trial over time, for the plot: when each write reached the server.
struct occ_timeline {
  int clients = 0;                    ///< the trial's client count
  std::string algorithm;              ///< the algorithm's name
  std::vector<duration> write_times;  ///< ascending
};

/// The whole sweep: one point per (clients, algorithm), clients ascending, algorithms in
/// occ_algorithms order.
struct occ_report {
  /// The options the sweep ran with.
  occ_options options;
  /// The algorithms' names, in occ_algorithms order.
  std::vector<std::string> algorithms;
  /// One point per (clients, algorithm), clients ascending, algorithms in occ_algorithms order.
  std::vector<occ_point> sweep;
  std::int64_t events = 0;  ///< events processed by all trials together
  /// Trial 0 of `exponential` and of `full` at the swept client count nearest to 100 (the plot's
  /// third panel: the clusters of no-jitter backoff against the spread of full jitter).
  std::vector<occ_timeline> timelines;
};

/// Runs the sweep: for every client count and algorithm, `trials` trials, on options.threads
/// threads (see parallel_for). Trial t of (N, algorithm a) is seeded from (seed, N, a, t), so the
/// report is identical for every thread count. Throws std::invalid_argument (validate()'s
/// message) for invalid options.
[[nodiscard]] occ_report simulate_occ(const occ_options& o, const progress_callback& progress = {});

/// {"scenario":"brooker-occ","seed":S,"trials":T,"sweep":[{"clients":N,"algorithm":"full",
/// "calls":C,"time":T},…]} with means to 2 decimals. Ends with a newline.
[[nodiscard]] std::string to_json(const occ_report& report);

/// `clients,algorithm,calls,time`, one row per point.
[[nodiscard]] std::string to_csv(const occ_report& report);

/// A header, the table (one row per client count: mean calls per algorithm, then mean time per
/// algorithm), and lines comparing the algorithms at the largest client count.
[[nodiscard]] std::string format_table(const occ_report& report);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_OCC_HPP
