// SPDX-License-Identifier: Apache-2.0
#include "app/occ.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#include "stormguard/backoff.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard_engine/json_writer.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim {

namespace {

using namespace std::chrono_literals;
using seeds::fnv1a;
using seeds::mix;

constexpr int k_max_clients = 10'000;
constexpr int k_max_trials = 100'000;
constexpr duration k_max_time = std::chrono::hours(1);
constexpr std::uint64_t k_tag_network = 0x6e6574776f726bULL;  // "network"
constexpr std::uint64_t k_tag_backoff = 0x6261636b6f6666ULL;  // "backoff"

double units(duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Standard normal draws by the ziggurat method of G. Marsaglia and W. W. Tsang, "The Ziggurat
// Method for Generating Random Variables" (Journal of Statistical Software 5(8), 2000), with 128
// layers, over one 64-bit draw of stormguard::random_generator: the layer index comes from the low
// 7 bits and the signed 32-bit abscissa from the high 32 bits (so they are independent, avoiding
// the correlation that J. A. Doornik, "An Improved Ziggurat Method to Generate Normal Random
// Samples", 2005, found in the original). About 99 % of the draws take the fast path (one
// multiplication); the rest use the exact wedge and tail tests. Written out rather than
// std::normal_distribution, whose algorithm differs between standard libraries (the sweep must
// give the same numbers everywhere), and because a Box-Muller draw (log, sqrt, sin, cos) cost more
// than the rest of the model.
class ziggurat {
 public:
  ziggurat() noexcept {
    constexpr double m1 = 2147483648.0;  // 2^31
    constexpr double v = 9.91256303526217e-3;
    double dn = k_r;
    double tn = dn;
    const double q = v / std::exp(-0.5 * dn * dn);
    k_[0] = static_cast<std::uint32_t>((dn / q) * m1);
    k_[1] = 0;
    w_[0] = q / m1;
    w_[127] = dn / m1;
    f_[0] = 1.0;
    f_[127] = std::exp(-0.5 * dn * dn);
    for (int i = 126; i >= 1; --i) {
      dn = std::sqrt(-2.0 * std::log(v / dn + std::exp(-0.5 * dn * dn)));
      k_[i + 1] = static_cast<std::uint32_t>((dn / tn) * m1);
      tn = dn;
      f_[i] = std::exp(-0.5 * dn * dn);
      w_[i] = dn / m1;
    }
  }

  double operator()(random_generator& g) const noexcept {
    while (true) {
      const std::uint64_t bits = g();
      const auto i = static_cast<std::size_t>(bits & 127U);
      const auto hz = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits >> 32));
      const double x = static_cast<double>(hz) * w_[i];
      const std::uint32_t magnitude =
          hz < 0 ? static_cast<std::uint32_t>(-(static_cast<std::int64_t>(hz)))
                 : static_cast<std::uint32_t>(hz);
      if (magnitude < k_[i]) return x;  // inside the layer's rectangle
      if (i == 0) {
        // The tail beyond r (Marsaglia 1964): 1 - uniform_unit is in (0, 1], so the logs are
        // finite.
        double tx = 0.0;
        double ty = 0.0;
        do {
          tx = -std::log(1.0 - uniform_unit(g)) / k_r;
          ty = -std::log(1.0 - uniform_unit(g));
        } while (ty + ty < tx * tx);
        return hz > 0 ? k_r + tx : -k_r - tx;
      }
      // The wedge between the rectangle and the density.
      if (f_[i] + uniform_unit(g) * (f_[i - 1] - f_[i]) < std::exp(-0.5 * x * x)) return x;
    }
  }

 private:
  static constexpr double k_r = 3.442619855899;  // the start of the tail
  std::uint32_t k_[128]{};
  double w_[128]{};
  double f_[128]{};
};

const ziggurat& standard_normal() {
  static const ziggurat table;
  return table;
}

// Each client has exactly one message in flight, so the event queue is a tournament (winner) tree
// over the clients' next events: leaves are clients, every inner node holds the client whose next
// event comes first in its subtree, ordered by (time, sequence number). Processing an event
// changes only the winner's next event, which is then replayed up its path: log2(N) comparisons,
// about half the work of a binary heap's pop and push, and no allocation after construction.
class tournament {
 public:
  static constexpr std::int64_t k_never = std::numeric_limits<std::int64_t>::max();

  explicit tournament(std::uint32_t clients) : size_(1) {
    while (size_ < clients) size_ *= 2;
    // Padding leaves (past the last client) never win: their time is k_never.
    tree_.assign(2 * static_cast<std::size_t>(size_), node{k_never, 0});
    for (std::uint32_t c = 0; c < clients; ++c) tree_[size_ + c].tag = c;
    for (std::uint32_t i = size_ - 1; i >= 1; --i) {
      tree_[i] = earlier(tree_[2 * i + 1], tree_[2 * i]) ? tree_[2 * i + 1] : tree_[2 * i];
    }
  }

  // The client whose event comes next, and its time (k_never when no event is left).
  [[nodiscard]] std::uint32_t top() const noexcept {
    return static_cast<std::uint32_t>(tree_[1].tag & 0xffffffffU);
  }
  [[nodiscard]] std::int64_t top_time() const noexcept { return tree_[1].time; }

  // Sets client c's next event (k_never: none) and replays its path to the root. Each inner node
  // holds a copy of its subtree's first event, so a level costs one independent load (the
  // sibling) and a branch-free comparison. At most 2^32 events per trial (the sequence number
  // has 32 bits; a trial of 10,000 clients makes at most 10,000^2 / 2 writes).
  void set(std::uint32_t c, std::int64_t time) noexcept {
    std::int64_t t = time;
    std::uint64_t tag = static_cast<std::uint64_t>(seq_++) << 32U | c;
    std::size_t i = size_ + c;
    tree_[i] = node{t, tag};
    while (i > 1) {
      const node sibling = tree_[i ^ 1U];
      // (time, seq) order, selected with masks rather than a branch: the outcome is a coin flip
      // that a branch predictor would miss half the time (this was most of the sweep's cost).
      const bool take = (sibling.time < t) | ((sibling.time == t) & (sibling.tag < tag));
      const std::uint64_t mask = 0 - static_cast<std::uint64_t>(take);
      t = static_cast<std::int64_t>((static_cast<std::uint64_t>(sibling.time) & mask) |
                                    (static_cast<std::uint64_t>(t) & ~mask));
      tag = (sibling.tag & mask) | (tag & ~mask);
      i >>= 1U;
      tree_[i] = node{t, tag};
    }
  }

 private:
  struct node {
    std::int64_t time;  // ns
    std::uint64_t
        tag;  // sequence number << 32 | client: the sequence breaks ties (insertion order)
  };
  static bool earlier(const node& x, const node& y) noexcept {
    return (x.time < y.time) | ((x.time == y.time) & (x.tag < y.tag));
  }

  std::uint32_t size_;
  std::uint32_t seq_ = 0;
  std::vector<node> tree_;
};

struct occ_client {
  std::int64_t read_at = 0;         // ns: when the current round's read reached the server
  std::int64_t previous_delay = 0;  // ns: the backoff waited before the current round
  int failures = 0;
};

}  // namespace

std::optional<std::string> validate(const occ_options& o) {
  const auto range = [](const char* field, std::int64_t value, std::int64_t lo,
                        std::int64_t hi) -> std::optional<std::string> {
    if (value >= lo && value <= hi) return std::nullopt;
    return fmt::format("{}: must be an integer in [{}, {}], got {}", field, lo, hi, value);
  };
  if (auto e = range("clients_from", o.clients_from, 1, k_max_clients)) return e;
  if (auto e = range("clients_to", o.clients_to, o.clients_from, k_max_clients)) return e;
  if (auto e = range("clients_step", o.clients_step, 1, k_max_clients)) return e;
  if (auto e = range("trials", o.trials, 1, k_max_trials)) return e;
  const auto time = [](const char* field, duration d, duration lo,
                       duration hi) -> std::optional<std::string> {
    if (d >= lo && d <= hi) return std::nullopt;
    return fmt::format("{}: must be in [{}ns, {}ns], got {}ns", field, lo.count(), hi.count(),
                       d.count());
  };
  if (auto e = time("network_mean", o.network_mean, 0ns, k_max_time)) return e;
  if (auto e = time("network_sd", o.network_sd, 0ns, k_max_time)) return e;
  if (auto e = time("base", o.base, 1ns, k_max_time)) return e;
  if (auto e = time("cap", o.cap, o.base, k_max_time)) return e;
  return std::nullopt;
}

std::vector<occ_algorithm> occ_algorithms(const occ_options& o) {
  const auto with = [&](jitter j) {
    retry_options r;
    r.max_retries = 1'000'000;
    r.backoff = backoff_options{.base = o.base,
                                .cap = o.cap,
                                .multiplier = 2.0,
                                .jitter = j,
                                .exponent = ceiling_exponent::retry};
    return r;
  };
  retry_options none;
  none.max_retries = 1'000'000;
  none.backoff = backoff::constant(duration::zero()).options();
  return {{"none", none},
          {"exponential", with(jitter::none)},
          {"equal", with(jitter::equal)},
          {"full", with(jitter::full)},
          {"decorrelated", with(jitter::decorrelated)}};
}

std::uint64_t occ_trial_seed(std::uint64_t seed, int clients, std::size_t algorithm,
                             std::size_t trial) noexcept {
  return mix(
      mix(mix(seed, static_cast<std::uint64_t>(clients)), static_cast<std::uint64_t>(algorithm)),
      static_cast<std::uint64_t>(trial));
}

occ_trial simulate_occ_trial(int clients, const occ_algorithm& algorithm, std::uint64_t seed,
                             const occ_options& o, std::vector<duration>* write_times) {
  if (clients < 1 || clients > k_max_clients) {
    throw std::invalid_argument(
        fmt::format("stormguard::sim::simulate_occ_trial: clients must be in [1, {}], got {}",
                    k_max_clients, clients));
  }
  if (auto problem = validate(o)) {
    throw std::invalid_argument("stormguard::sim::simulate_occ_trial: " + *problem);
  }
  const retry_policy policy(algorithm.retry);
  random_generator network_rng(mix(seed, k_tag_network));
  random_generator backoff_rng(mix(mix(seed, k_tag_backoff), fnv1a(algorithm.name)));
  const ziggurat& normal = standard_normal();
  const double mean = static_cast<double>(o.network_mean.count());
  const double sd = static_cast<double>(o.network_sd.count());
  // One message's delay: |Normal(mean, sd)|, in ns (bounded by validate: no overflow).
  const auto network = [&]() -> std::int64_t {
    return static_cast<std::int64_t>(std::fabs(mean + sd * normal(network_rng)) + 0.5);
  };

  const auto n = static_cast<std::uint32_t>(clients);
  std::vector<occ_client> state(n);
  tournament events(n);
  // A round sent at `sent`: the read reaches the server one network delay later, its response and
  // then the conditional write take one more each. Only the write is an event: the version the
  // read returned is known from the time of the last successful write (below).
  const auto start_round = [&](std::uint32_t c, std::int64_t sent) {
    const std::int64_t read =
        stormguard::detail::saturating_add(duration(sent), duration(network())).count();
    state[c].read_at = read;
    const std::int64_t write =
        stormguard::detail::saturating_add(duration(read), duration(network() + network())).count();
    events.set(c, std::min(tournament::k_never - 1, write));  // k_never means "no event"
  };
  for (std::uint32_t c = 0; c < n; ++c) start_round(c, 0);  // every client reads at t = 0

  // The row's version changes only when a write succeeds, and events are processed in time order,
  // so a write arriving now saw the current version iff no write succeeded since its read reached
  // the server: iff the last success came strictly before the read (a read and a write arriving
  // at the same instant: the read is handled first).
  std::int64_t last_success = -1;
  no_budget budget;
  occ_trial out;
  std::int64_t last = 0;
  while (true) {
    const std::uint32_t c = events.top();
    const std::int64_t now = events.top_time();
    if (now == tournament::k_never) break;
    ++out.events;
    ++out.calls;
    if (write_times != nullptr) write_times->push_back(duration(now));
    occ_client& client = state[c];
    const std::int64_t response = now + network();
    if (last_success < client.read_at) {
      last_success = now;  // the write wins; its response ends this client
      last = std::max(last, response);
      events.set(c, tournament::k_never);
      continue;
    }
    // Another write got in first: back off from the failed response, then read again.
    const retry_decision next =
        policy.decide(++client.failures, classification::retry(), duration(client.previous_delay),
                      backoff_rng, budget, time_point(duration(response)));
    if (!next.retry) {
      throw std::logic_error("stormguard::sim::simulate_occ_trial: the policy stopped retrying");
    }
    client.previous_delay = next.delay.count();
    start_round(c, stormguard::detail::saturating_add(duration(response), next.delay).count());
  }
  out.time = duration(last);
  return out;
}

occ_report simulate_occ(const occ_options& o, const progress_callback& progress) {
  if (auto problem = validate(o)) {
    throw std::invalid_argument("stormguard::sim::simulate_occ: " + *problem);
  }
  const auto algorithms = occ_algorithms(o);
  std::vector<int> counts;
  for (int n = o.clients_from; n <= o.clients_to; n += o.clients_step) counts.push_back(n);
  const std::size_t per_point = static_cast<std::size_t>(o.trials);
  const std::size_t points = counts.size() * algorithms.size();
  std::vector<occ_trial> trials(points * per_point);
  // Task i = (point, trial); points are (client count, algorithm) in report order. The big client
  // counts come last, so that the threads finish together rather than one of them alone.
  parallel_for(
      trials.size(), o.threads,
      [&](std::size_t i) {
        const std::size_t point = i / per_point;
        const std::size_t trial = i % per_point;
        const int n = counts[point / algorithms.size()];
        const std::size_t a = point % algorithms.size();
        trials[i] = simulate_occ_trial(n, algorithms[a], occ_trial_seed(o.seed, n, a, trial), o);
      },
      progress);

  occ_report report;
  report.options = o;
  for (const auto& a : algorithms) report.algorithms.push_back(a.name);
  for (std::size_t point = 0; point < points; ++point) {
    std::int64_t calls = 0;
    std::int64_t time = 0;
    for (std::size_t t = 0; t < per_point; ++t) {
      const occ_trial& r = trials[point * per_point + t];
      calls += r.calls;
      time = stormguard::detail::saturating_add(duration(time), r.time).count();
      report.events += r.events;
    }
    report.sweep.push_back(occ_point{counts[point / algorithms.size()],
                                     algorithms[point % algorithms.size()].name,
                                     static_cast<double>(calls) / static_cast<double>(per_point),
                                     units(duration(time)) / static_cast<double>(per_point)});
  }
  // One trial at the swept client count nearest to 100, for the plot (so that drawing it needs no
  // run of the model).
  int clients = o.clients_from;
  for (const int n : counts) {
    if (std::abs(n - 100) < std::abs(clients - 100)) clients = n;
  }
  for (std::size_t a = 0; a < algorithms.size(); ++a) {
    if (algorithms[a].name != "exponential" && algorithms[a].name != "full") continue;
    occ_timeline timeline{clients, algorithms[a].name, {}};
    (void)simulate_occ_trial(clients, algorithms[a], occ_trial_seed(o.seed, clients, a, 0), o,
                             &timeline.write_times);
    report.timelines.push_back(std::move(timeline));
  }
  return report;
}

std::string to_json(const occ_report& report) {
  engine::json_writer w;
  w.begin_report("brooker-occ", report.options.seed).field("trials", report.options.trials);
  w.key("sweep").begin_array();
  for (const occ_point& p : report.sweep) {
    w.begin_object().field("clients", p.clients).field("algorithm", p.algorithm);
    w.fixed("calls", p.calls, 2).fixed("time", p.time, 2).end_object();
  }
  return std::move(w.end_array().end_object()).line();
}

std::string to_csv(const occ_report& report) {
  std::string out = "clients,algorithm,calls,time\n";
  for (const occ_point& p : report.sweep) {
    out += fmt::format("{},{},{:.2f},{:.2f}\n", p.clients, p.algorithm, p.calls, p.time);
  }
  return out;
}

std::string format_table(const occ_report& report) {
  const occ_options& o = report.options;
  std::string out = fmt::format(
      "brooker-occ: Brooker 2015's OCC experiment: N clients each write one row once (read the "
      "version, then write conditioned on it; a failed write backs off and reads again); "
      "|Normal({}, {})| time units per message; backoff base {}, cap {}, ceiling min(cap, base x "
      "2^n); {} trials per point; seed {}\n",
      units(o.network_mean), units(o.network_sd), units(o.base), units(o.cap), o.trials, o.seed);
  const std::size_t k = report.algorithms.size();
  if (k == 0 || report.sweep.empty()) return out;
  const auto table = [&](const char* title, auto value) {
    std::string t = fmt::format("\n{}\n{:>7}", title, "clients");
    for (const auto& a : report.algorithms) t += fmt::format(" {:>12}", a);
    t += '\n';
    for (std::size_t row = 0; row * k < report.sweep.size(); ++row) {
      t += fmt::format("{:>7}", report.sweep[row * k].clients);
      for (std::size_t a = 0; a < k; ++a) {
        t += fmt::format(" {:>12.1f}", value(report.sweep[row * k + a]));
      }
      t += '\n';
    }
    return t;
  };
  out += table("calls: mean writes that reached the server per trial",
               [](const occ_point& p) { return p.calls; });
  out += table("time: mean time units until the last client's write succeeded",
               [](const occ_point& p) { return p.time; });

  // The ranking at the largest client count, computed from the table.
  const std::size_t last = report.sweep.size() - k;
  std::vector<const occ_point*> at_last;
  for (std::size_t a = 0; a < k; ++a) at_last.push_back(&report.sweep[last + a]);
  const auto ranking = [&](auto value) {
    auto sorted = at_last;
    // Ties keep report order (the pointers are in it). std::sort with the tie-break rather than
    // std::stable_sort, whose libstdc++ 12 implementation warns under Clang 19.
    std::sort(sorted.begin(), sorted.end(), [&](const occ_point* x, const occ_point* y) {
      return value(*x) != value(*y) ? value(*x) < value(*y) : x < y;
    });
    std::string text;
    for (const occ_point* p : sorted) {
      text += fmt::format("{}{} {:.1f}", text.empty() ? "" : ", ", p->algorithm, value(*p));
    }
    return text;
  };
  out += fmt::format("\nAt {} clients, calls from fewest: {}.\n", at_last.front()->clients,
                     ranking([](const occ_point& p) { return p.calls; }));
  out += fmt::format("At {} clients, time from shortest: {}.\n", at_last.front()->clients,
                     ranking([](const occ_point& p) { return p.time; }));
  return out;
}

}  // namespace stormguard::sim
