// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet/attach.hpp"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <variant>

namespace stormguard::fleet {

namespace {

clock& library_clock() {
  static real_clock clock;
  return clock;
}

}  // namespace

std::string shard_key(const std::string& key, std::int64_t shard, std::int64_t shards) {
  if (shards < 1 || shards > fleet_budget::k_max_shards) {
    throw std::invalid_argument("stormguard::fleet::shard_key: shards must be in [1, 1024], got " +
                                std::to_string(shards));
  }
  if (shard < 0 || shard >= shards) {
    throw std::invalid_argument("stormguard::fleet::shard_key: shard must be in [0, " +
                                std::to_string(shards) + "), got " + std::to_string(shard));
  }
  if (shards == 1) return key;
  return key + "#" + std::to_string(shard) + "/" + std::to_string(shards);
}

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
      const std::int64_t shards = b.options().shards;
      std::int64_t shard = 0;
      if (shards > 1) {
        if (options.shard < -1 || options.shard >= shards) {
          throw std::invalid_argument(
              "stormguard::fleet::attach_options::shard must be -1 (drawn) or in [0, " +
              std::to_string(shards) + ") for a budget of " + std::to_string(shards) +
              " shards, got " + std::to_string(options.shard));
        }
        shard = options.shard >= 0 ? options.shard
                                   : static_cast<std::int64_t>(std::random_device{}() %
                                                               static_cast<std::uint64_t>(shards));
      }
      o.key = shard_key(store.key + options.key_suffix, shard, shards);
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
