// SPDX-License-Identifier: Apache-2.0
#include "fleet_store.hpp"

#include <mutex>

#include "output.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/detail/redis_url.hpp"

#ifdef STORMGUARD_CLI_HAS_FLEET
#include "stormguard/fleet/attach.hpp"
#endif

namespace stormguard::cli {

struct fleet_syncers::impl {
  std::string command;
  bool quiet = false;
  std::mutex mutex;
#ifdef STORMGUARD_CLI_HAS_FLEET
  std::vector<std::shared_ptr<fleet::redis_sync>> syncers;  // attach(): owned here
  std::vector<std::weak_ptr<fleet::redis_sync>> hosts;      // host_hook(): owned by the budgets
#endif
  bool warned = false;

  // Returns the started syncer (or nullptr), after one sync bounded by the timeout.
  std::shared_ptr<void> attach(any_budget& budget, const std::string& suffix, bool owned) {
    if (const auto* f = std::get_if<fleet_budget_options>(&budget.options());
        f != nullptr && f->store.url.empty()) {
      const std::lock_guard hold(mutex);
      if (!warned && !quiet) {
        report_warning(command,
                       "the fleet budget names no store (budget.fleet.store): it runs in its "
                       "fallback, a local ratio budget over this process's own requests, its "
                       "floor the fleet's ÷ budget.fleet.expected_clients (none when not given)");
      }
      warned = true;
      return nullptr;
    }
#ifdef STORMGUARD_CLI_HAS_FLEET
    const std::string name = command;
    const bool silent = quiet;
    fleet::attach_options o;
    o.key_suffix = suffix;
    o.log = [name, silent](std::string_view line) {
      if (!silent) report_warning(name, line);
    };
    std::shared_ptr<fleet::redis_sync> sync = fleet::attach(budget, std::move(o));
    if (!sync) return nullptr;
    (void)sync->sync_once(true);
    const std::lock_guard hold(mutex);
    if (owned) {
      syncers.push_back(sync);
    } else {
      hosts.push_back(sync);
    }
    return sync;
#else
    (void)suffix;
    (void)owned;
    const auto* o = std::get_if<fleet_budget_options>(&budget.options());
    if (o == nullptr || o->store.url.empty()) return nullptr;
    const std::lock_guard hold(mutex);
    if (!warned) {
      warned = true;
      report_warning(command, "budget.fleet.store " + detail::redact_redis_url(o->store.url) +
                                  " is not used: this stormguard was built without the fleet "
                                  "component (STORMGUARD_WITH_FLEET=OFF); the fleet budget runs "
                                  "in its fallback, a local ratio budget");
    }
    return nullptr;
#endif
  }
};

fleet_syncers::fleet_syncers(std::string_view command, bool quiet)
    : impl_(std::make_shared<impl>()) {
  impl_->command = std::string(command);
  impl_->quiet = quiet;
}

fleet_syncers::~fleet_syncers() { clear(); }

void fleet_syncers::attach(any_budget& budget) { (void)impl_->attach(budget, "", true); }

http::host_budgets::attach_hook fleet_syncers::host_hook() {
  return [state = impl_](const std::string& host, any_budget& budget) {
    return state->attach(budget, ":" + host, false);
  };
}

void fleet_syncers::flush() {
#ifdef STORMGUARD_CLI_HAS_FLEET
  std::vector<std::shared_ptr<fleet::redis_sync>> all;
  {
    const std::lock_guard hold(impl_->mutex);
    all = impl_->syncers;
    for (const auto& weak : impl_->hosts) {
      if (auto s = weak.lock()) all.push_back(std::move(s));
    }
  }
  for (const auto& s : all) (void)s->sync_once(true);
#endif
}

void fleet_syncers::clear() {
#ifdef STORMGUARD_CLI_HAS_FLEET
  std::vector<std::shared_ptr<fleet::redis_sync>> gone;
  {
    const std::lock_guard hold(impl_->mutex);
    gone.swap(impl_->syncers);
  }
#endif
}

}  // namespace stormguard::cli
