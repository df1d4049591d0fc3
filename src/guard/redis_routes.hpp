// SPDX-License-Identifier: Apache-2.0
// Where the Redis store (src/guard/redis_store.cpp) sends a command: one server (redis:// or the
// master Redis Sentinel names), or, on a Redis Cluster, the master serving the key's hash slot,
// with a pool of connections per node. The slot map comes from CLUSTER SLOTS and is corrected by
// MOVED; ASK is followed for the one command; a node that refuses connections (a failed master)
// makes the map be read again from another node. The slot arithmetic and the reply parsing are
// src/redis/cluster.hpp, shared with the fleet syncer. Internal.
#ifndef STORMGUARD_SRC_GUARD_REDIS_ROUTES_HPP
#define STORMGUARD_SRC_GUARD_REDIS_ROUTES_HPP

#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "guard/pool.hpp"
#include "guard/redis_connection.hpp"
#include "redis/cluster.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/guard/store.hpp"

namespace stormguard::guard::internal {

class redis_routes {
 public:
  using node = redis_detail::node;
  using pooled = pool<connection>::lease;
  /// Opens a connection to a node (throws store_error).
  using opener = std::function<std::unique_ptr<connection>(const node&)>;
  /// Sends one command on a connection and reads its reply (throws store_error on I/O).
  using caller = std::function<reply_ptr(pooled&, argv_builder&)>;
  /// What an operation sends on the connection it is given: its reply, an error reply included,
  /// or null when it read its replies itself (nothing to redirect).
  using sender = std::function<reply_ptr(pooled&)>;

  /// The most nodes a cluster's map may name, the most redirections one command follows, and
  /// the most nodes asked for the map after a failure (each may cost a connect timeout).
  static constexpr std::size_t k_max_nodes = 64;
  static constexpr int k_max_redirects = 3;
  static constexpr std::size_t k_nodes_per_relearn = 3;

  redis_routes(node seed, std::size_t max_connections, opener open, caller call, std::string where)
      : max_connections_(max_connections),
        open_(std::move(open)),
        call_(std::move(call)),
        where_(std::move(where)) {
    nodes_.push_back(std::move(seed));
    pools_.push_back(make_pool(0));
    seed_pool_ = pools_.front().get();
    slot_node_.fill(0);
  }

  /// Asks the seed for its slot map (CLUSTER SLOTS, on `conn`, a connection of the seed): a
  /// server without cluster support answers an error, and everything goes to the seed.
  void discover(pooled& conn) {
    argv_builder argv;
    argv.add("CLUSTER");
    argv.add("SLOTS");
    const reply_ptr reply = call_(conn, argv);
    const auto ranges = redis_detail::slot_ranges_of(reply.get(), node_at(0).host);
    if (!ranges || ranges->empty()) return;
    cluster_ = true;
    const stormguard::detail::lock hold(mutex_);
    apply(*ranges);
  }

  /// Whether the server is a Redis Cluster (fixed by discover()).
  [[nodiscard]] bool cluster() const noexcept { return cluster_; }

  /// A connection of the seed (the URL's server, or the master the sentinels name).
  [[nodiscard]] pooled seed_connection() { return seed_pool_->acquire(); }

  /// The masters of the map now (the seed alone without a cluster).
  [[nodiscard]] std::vector<std::size_t> masters() {
    const stormguard::detail::lock hold(mutex_);
    std::vector<std::size_t> out(slot_node_.begin(), slot_node_.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  [[nodiscard]] pooled connection_at(std::size_t index) { return pool_at(index).acquire(); }
  /// "HOST:PORT" of a node, for messages.
  [[nodiscard]] std::string name_of(std::size_t index) {
    const node n = node_at(index);
    return n.host + ":" + std::to_string(n.port);
  }

  /// Runs `send` where `key`'s slot is served (nullopt: a command with no key known here, sent to
  /// the seed and redirected like any other), following at most k_max_redirects MOVED or ASK,
  /// and sending again after a TRYAGAIN (at most k_max_redirects times, 10 ms · 2^n apart).
  /// Returns the reply, an error reply included (not a redirection); throws store_error when no
  /// node serving the slot can be reached or the redirections do not end.
  reply_ptr run(std::optional<std::string_view> key, const sender& send) {
    if (!cluster_) {
      auto conn = seed_pool_->acquire();  // one server: no lock of the map's
      return send(conn);
    }
    std::size_t at = 0;
    if (key) {
      const stormguard::detail::lock hold(mutex_);
      at = slot_node_[redis_detail::slot_of(*key)];
    }
    bool asking = false;
    for (int hop = 0;; ++hop) {
      std::optional<pooled> conn;
      try {
        conn.emplace(pool_at(at).acquire());
      } catch (const store_error&) {
        // Nothing was sent: the node is gone (a failed master). Read the map again from another
        // node and try where it points now, if that is elsewhere.
        // A command with no key known here goes to the next node, which redirects it.
        const std::size_t before = at;
        if (hop < k_max_redirects) {
          const bool learnt = relearn(at);
          const stormguard::detail::lock hold(mutex_);
          if (key && learnt) at = slot_node_[redis_detail::slot_of(*key)];
          if (!key) at = (at + 1) % nodes_.size();
        }
        if (at == before || hop == k_max_redirects) throw;
        continue;
      }
      if (asking) {
        argv_builder ask;
        ask.add("ASKING");
        (void)call_(*conn, ask);
      }
      reply_ptr reply;
      try {
        reply = send(*conn);
      } catch (const store_error&) {
        // The command may have run: not sent again. The map is read again for the next ones
        // (after a failover the slot's master is elsewhere).
        (void)relearn(at);
        throw;
      }
      if (!reply || reply->type != REDIS_REPLY_ERROR) return reply;
      if (text_of(*reply).starts_with("TRYAGAIN") && hop < k_max_redirects) {
        // A slot being migrated holds some of the command's keys here and some on the other
        // node: nothing ran. Again shortly, on the same node (10, 20, then 40 ms), as the
        // cluster specification advises; then the TRYAGAIN is the reply.
        std::this_thread::sleep_for(std::chrono::milliseconds(10) * (1 << hop));
        continue;
      }
      const auto to = redis_detail::redirection_of(text_of(*reply), node_at(at).host);
      if (!to) return reply;
      if (hop == k_max_redirects) {
        throw store_error(where_ + ": more than " + std::to_string(k_max_redirects) +
                          " redirections of a Redis Cluster: " +
                          stormguard::detail::escape_control(text_of(*reply)));
      }
      at = remember(to->to);
      asking = to->ask;
      if (!asking) {
        const stormguard::detail::lock hold(mutex_);
        slot_node_[to->slot] = static_cast<std::uint16_t>(at);
      }
    }
  }

 private:
  using pool_ptr = std::unique_ptr<pool<connection>>;

  [[nodiscard]] node node_at(std::size_t index) {
    const stormguard::detail::lock hold(mutex_);
    return nodes_.at(index);
  }

  pool_ptr make_pool(std::size_t index) {
    return std::make_unique<pool<connection>>(max_connections_,
                                              [this, index] { return open_(node_at(index)); });
  }

  pool<connection>& pool_at(std::size_t index) {
    const stormguard::detail::lock hold(mutex_);
    return *pools_.at(index);  // pools are never destroyed before the routes
  }

  /// The index of `n`, remembered if new (store_error beyond k_max_nodes).
  std::size_t remember(const node& n) {
    const stormguard::detail::lock hold(mutex_);
    return remember_locked(n);
  }

  std::size_t remember_locked(const node& n) STORMGUARD_REQUIRES(mutex_) {
    const auto it = std::find(nodes_.begin(), nodes_.end(), n);
    if (it != nodes_.end()) return static_cast<std::size_t>(it - nodes_.begin());
    if (nodes_.size() >= k_max_nodes) {
      throw store_error(where_ + ": a Redis Cluster of more than " + std::to_string(k_max_nodes) +
                        " nodes (not supported)");
    }
    nodes_.push_back(n);
    pools_.push_back(make_pool(nodes_.size() - 1));
    return nodes_.size() - 1;
  }

  void apply(const std::vector<redis_detail::slot_range>& ranges) STORMGUARD_REQUIRES(mutex_) {
    for (const auto& range : ranges) {
      const auto master = static_cast<std::uint16_t>(remember_locked(range.master));
      for (const auto& replica : range.replicas) (void)remember_locked(replica);
      std::fill(slot_node_.begin() + range.first, slot_node_.begin() + range.last + 1, master);
    }
  }

  /// Reads the slot map again from the first of at most k_nodes_per_relearn known nodes other
  /// than `failed` (taken in turn, from where the last look stopped) that answers CLUSTER SLOTS;
  /// false when none did. Bounded: a step waits for at most that many connect timeouts.
  bool relearn(std::size_t failed) {
    std::size_t count = 0;
    std::size_t start = 0;
    {
      const stormguard::detail::lock hold(mutex_);
      count = nodes_.size();
      start = relearn_from_++;
    }
    std::size_t asked = 0;
    for (std::size_t k = 0; k < count && asked < k_nodes_per_relearn; ++k) {
      const std::size_t i = (start + k) % count;
      if (i == failed) continue;
      ++asked;
      try {
        auto conn = pool_at(i).acquire();
        argv_builder argv;
        argv.add("CLUSTER");
        argv.add("SLOTS");
        const reply_ptr reply = call_(conn, argv);
        const auto ranges = redis_detail::slot_ranges_of(reply.get(), node_at(i).host);
        if (!ranges || ranges->empty()) continue;
        const stormguard::detail::lock hold(mutex_);
        apply(*ranges);
        return true;
      } catch (const store_error&) {
        continue;  // that one is gone too
      }
    }
    return false;
  }

  std::size_t max_connections_;
  opener open_;
  caller call_;
  std::string where_;
  bool cluster_ = false;                   // written by discover() before the store is shared
  pool<connection>* seed_pool_ = nullptr;  // pools_[0], set once: the one server's pool
  stormguard::detail::mutex mutex_;
  std::vector<node> nodes_ STORMGUARD_GUARDED_BY(mutex_);
  std::vector<pool_ptr> pools_ STORMGUARD_GUARDED_BY(mutex_);
  std::size_t relearn_from_ STORMGUARD_GUARDED_BY(mutex_) = 0;  // the next relearn's first node
  // The index in nodes_ of the master serving each slot (0, the seed, until known).
  std::array<std::uint16_t, redis_detail::k_cluster_slots> slot_node_
      STORMGUARD_GUARDED_BY(mutex_){};
};

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_REDIS_ROUTES_HPP
