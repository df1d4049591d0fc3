// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet/attach.hpp"

#include <cstdlib>
#include <variant>

namespace stormguard::fleet {

namespace {

clock& library_clock() {
  static real_clock clock;
  return clock;
}

}  // namespace

bool wants_store(const budget_options& options) noexcept {
  const auto* o = std::get_if<fleet_budget_options>(&options);
  return o != nullptr && !o->store.url.empty();
}

std::unique_ptr<redis_sync> attach(any_budget& budget, attach_options options) {
  if (!wants_store(budget.options())) return nullptr;
  return budget.visit([&](auto& b) -> std::unique_ptr<redis_sync> {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(b)>, fleet_budget>) {
      const fleet_store_options& store = b.options().store;
      redis_sync_options o;
      o.url = store.url;
      o.key = store.key + options.key_suffix;
      o.timeout = options.timeout;
      o.on_sync = std::move(options.on_sync);
      if (!store.password_env.empty()) {
        const char* password = std::getenv(store.password_env.c_str());
        if (password != nullptr) {
          o.password = password;
        } else if (options.log) {
          options.log("fleet budget " + o.key + ": the environment variable " + store.password_env +
                      " (budget.fleet.password_env) is not set: no password");
        }
      }
      clock& time = options.time != nullptr ? *options.time : library_clock();
      return std::make_unique<redis_sync>(b, std::move(o), time, std::move(options.log));
    } else {
      return nullptr;
    }
  });
}

std::function<std::shared_ptr<void>(const std::string&, any_budget&)> host_attacher(
    redis_sync::log_hook log, duration timeout) {
  return [log = std::move(log), timeout](const std::string& host,
                                         any_budget& budget) -> std::shared_ptr<void> {
    attach_options o;
    o.key_suffix = ":" + host;
    o.log = log;
    o.timeout = timeout;
    std::unique_ptr<redis_sync> sync = attach(budget, std::move(o));
    return std::shared_ptr<redis_sync>(std::move(sync));
  };
}

}  // namespace stormguard::fleet
