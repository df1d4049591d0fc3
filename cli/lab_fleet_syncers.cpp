// SPDX-License-Identifier: Apache-2.0
// `stormguard lab --fleet-store`, a worker's syncers: see lab_fleet_syncers.hpp.
#include "lab_fleet_syncers.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "output.hpp"
#include "stormguard/detail/redis_url.hpp"

#ifdef STORMGUARD_CLI_HAS_FLEET
#include "stormguard/fleet/attach.hpp"
#include "stormguard/fleet/redis_sync.hpp"
#endif

namespace stormguard::cli {

namespace {

using steady = std::chrono::steady_clock;

// What the syncers did, summed (lab::part_report's fleet counts).
struct totals {
  std::int64_t syncs = 0;
  std::int64_t errors = 0;
  std::int64_t rejoins = 0;
  std::int64_t syncers = 0;
  std::int64_t never_synced = 0;
  double fallback_s = 0;
  std::int64_t forgotten = 0;
  double forgotten_at_s = -1;  // the earliest of the syncers' last ones
};

// The password `store`'s syncers send for a budget whose policy says `policy`: see the header.
// "" = none (then the URL's own, if any). `unset` is called when the variable is not set.
template <class F>
std::string password_for(const worker_store& store, const fleet_store_options& policy, F&& unset) {
  if (store.auto_store || policy.password_env.empty()) return {};
  try {
    if (detail::parse_redis_url(store.url, "--fleet-store").has_password) return {};  // it wins
  } catch (const std::invalid_argument&) {
    return {};  // the syncer says what is wrong with the URL (redacted)
  }
  const char* value = std::getenv(policy.password_env.c_str());
  if (value == nullptr) {
    unset();
    return {};
  }
  return value;
}

}  // namespace

struct worker_syncers::impl {
  worker_store store;
  std::atomic<bool> said_down{false};
  std::atomic<bool> said_up{false};
  std::atomic<bool> said_forgot{false};
  std::atomic<bool> said_unset{false};
#ifdef STORMGUARD_CLI_HAS_FLEET
  // One client's syncer, its budget and clock (the budget outlives the syncer), and the time its
  // budget has spent in fallback since the run's start.
  struct entry {
    fleet::redis_sync* sync = nullptr;
    fleet_budget* budget = nullptr;
    clock* time = nullptr;
    double fallback_s = 0;
  };
  std::mutex mutex;
  std::vector<entry> live;  // guarded by mutex
  totals gone;              // the syncers already destroyed; guarded by mutex
  steady::time_point last_tick{};
  std::jthread thread;

  // Adds one syncer's counts to `t`.
  static void add(totals& t, const entry& e) {
    const fleet::redis_sync_stats st = e.sync->stats();
    t.syncs += st.syncs;
    t.errors += st.errors;
    t.rejoins += st.rejoins;
    t.syncers += 1;
    t.never_synced += st.syncs == 0 ? 1 : 0;
    t.fallback_s += e.fallback_s;
    if (st.forgotten > 0) {
      t.forgotten += st.forgotten;
      // The scenario's clock: time from the run's start.
      const double at = std::chrono::duration<double>(st.last_forgotten.time_since_epoch()).count();
      if (t.forgotten_at_s < 0 || at < t.forgotten_at_s) t.forgotten_at_s = at;
    }
  }

  // One pass: the time since the last pass counted for each budget in fallback (from the run's
  // start), then a sync of each syncer that is due.
  void tick() {
    const std::lock_guard hold(mutex);
    const steady::time_point now = steady::now();
    const steady::time_point from = std::max(last_tick, store.start);
    const double dt = now > from ? std::chrono::duration<double>(now - from).count() : 0.0;
    last_tick = now;
    for (entry& e : live) {
      if (dt > 0 && e.budget->current_mode(e.time->now()) == fleet_budget::mode::fallback) {
        e.fallback_s += dt;
      }
      (void)e.sync->sync_once(false);
    }
  }
#endif
};

worker_syncers::worker_syncers(worker_store store) : impl_(std::make_shared<impl>()) {
  impl_->store = std::move(store);
#ifdef STORMGUARD_CLI_HAS_FLEET
  impl_->last_tick = steady::now();
  impl_->thread = std::jthread([state = impl_.get()](std::stop_token token) {
    while (!token.stop_requested()) {
      state->tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
#else
  report_warning("lab",
                 "--fleet-store: this stormguard was built without the fleet component "
                 "(STORMGUARD_WITH_FLEET=OFF): the fleet budgets use the simulator's store "
                 "model");
#endif
}

worker_syncers::~worker_syncers() {
#ifdef STORMGUARD_CLI_HAS_FLEET
  if (impl_->thread.joinable()) {
    impl_->thread.request_stop();
    impl_->thread.join();
  }
#endif
}

std::function<std::shared_ptr<void>(std::size_t, fleet_budget&, clock&)> worker_syncers::hook() {
#ifdef STORMGUARD_CLI_HAS_FLEET
  return [shared = impl_](std::size_t client, fleet_budget& budget,
                          clock& time) -> std::shared_ptr<void> {
    const std::string& label = shared->store.label;
    auto log = [shared](std::string_view line) {
      const bool down = line.find("falling back") != std::string_view::npos;
      const bool forgot = line.find("had forgotten") != std::string_view::npos;
      std::atomic<bool>& said = forgot ? shared->said_forgot
                                : down ? shared->said_down
                                       : shared->said_up;
      if (!said.exchange(true))
        report_warning("lab", shared->store.label + ": " + std::string(line));
    };
    fleet::redis_sync_options so;
    so.url = shared->store.url;
    so.password = password_for(shared->store, budget.options().store, [&] {
      if (!shared->said_unset.exchange(true)) {
        report_warning("lab", label + ": the environment variable " +
                                  budget.options().store.password_env +
                                  " (budget.fleet.password_env) is not set: no password");
      }
    });
    // A budget kept in K shards: the lab's clients are dealt out over them in turn, so that
    // every shard is used (a real process draws its shard: fleet::attach).
    const std::int64_t shards = budget.options().shards;
    so.key =
        fleet::shard_key(shared->store.key, static_cast<std::int64_t>(client) % shards, shards);
    so.client_id = "p" + std::to_string(shared->store.part) + "-c" + std::to_string(client);
    so.start_thread = false;
    auto* sync = new fleet::redis_sync(budget, std::move(so), time, std::move(log));
    {
      const std::lock_guard hold(shared->mutex);
      shared->live.push_back(impl::entry{sync, &budget, &time, 0.0});
    }
    return std::shared_ptr<fleet::redis_sync>(sync, [shared](fleet::redis_sync* gone) {
      {
        const std::lock_guard hold(shared->mutex);
        const auto it = std::find_if(shared->live.begin(), shared->live.end(),
                                     [gone](const impl::entry& e) { return e.sync == gone; });
        if (it != shared->live.end()) {
          impl::add(shared->gone, *it);
          shared->live.erase(it);
        }
      }
      delete gone;
    });
  };
#else
  return {};
#endif
}

void worker_syncers::finish(lab::part_report& out) {
#ifdef STORMGUARD_CLI_HAS_FLEET
  if (impl_->thread.joinable()) {
    impl_->thread.request_stop();
    impl_->thread.join();
  }
  const std::lock_guard hold(impl_->mutex);
  totals t = impl_->gone;
  for (const impl::entry& e : impl_->live) impl::add(t, e);
  out.fleet_syncs += t.syncs;
  out.fleet_sync_errors += t.errors;
  out.fleet_rejoins += t.rejoins;
  out.fleet_syncers += t.syncers;
  out.fleet_never_synced += t.never_synced;
  out.fleet_fallback_s += t.fallback_s;
  out.fleet_forgotten += t.forgotten;
  if (t.forgotten_at_s >= 0 &&
      (out.fleet_forgotten_at_s < 0 || t.forgotten_at_s < out.fleet_forgotten_at_s)) {
    out.fleet_forgotten_at_s = t.forgotten_at_s;
  }
#else
  (void)out;
#endif
}

}  // namespace stormguard::cli
