// SPDX-License-Identifier: Apache-2.0
// Internal (target stormguard_redis): the routing of a Redis Cluster that the guard's Redis store
// and the fleet budget's Redis syncer share — a key's hash slot, the slot map CLUSTER SLOTS
// answers, and the MOVED and ASK redirections (https://redis.io/docs/latest/operate/oss_and_stack/
// reference/cluster-spec/, "Keys distribution model", "Hash tags", "Redirection and resharding").
// Each operation of both stores names keys of one slot; only this routing is ours, the Redis
// client is hiredis and the CRC16 is Boost.CRC's.
#ifndef STORMGUARD_REDIS_CLUSTER_HPP
#define STORMGUARD_REDIS_CLUSTER_HPP

#include <hiredis/hiredis.h>

#include <boost/crc.hpp>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stormguard::redis_detail {

/// The number of hash slots of a Redis Cluster.
inline constexpr std::uint16_t k_cluster_slots = 16384;

/// What of `key` its hash slot is computed from: the hash tag, what lies between the first '{'
/// and the first '}' after it, when that is not empty; otherwise the whole key. Any bytes.
[[nodiscard]] inline std::string_view hashed_part_of(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      return key.substr(open + 1, close - open - 1);
    }
  }
  return key;
}

/// The hash slot of `key`: CRC16 (XMODEM: polynomial 0x1021, initial value 0, not reflected) of
/// hashed_part_of(key), modulo 16384 (the cluster specification's HASH_SLOT). Any bytes.
[[nodiscard]] inline std::uint16_t slot_of(std::string_view key) noexcept {
  key = hashed_part_of(key);
  boost::crc_xmodem_t crc;
  crc.process_bytes(key.data(), key.size());
  return static_cast<std::uint16_t>(crc.checksum() % k_cluster_slots);
}

/// A Redis server of a deployment.
struct node {
  std::string host;
  int port = 0;
  friend bool operator==(const node&, const node&) = default;
};

/// A redirection a cluster node answered instead of running a command: MOVED (the slot is served
/// by `to` from now on) or ASK (the slot is moving to `to`: this command only, after ASKING).
struct redirection {
  bool ask = false;
  std::uint16_t slot = 0;
  node to;
};

/// The redirection an error reply says ("MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381"), or
/// nullopt for any other error (a slot out of range or a bad port is not a redirection). An
/// empty host (a node that does not know its own address, Redis 7's "MOVED 3999 :6381") is
/// `asked`'s host, the node that answered.
[[nodiscard]] inline std::optional<redirection> redirection_of(std::string_view error,
                                                               std::string_view asked) {
  redirection out;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    error.remove_prefix(4);
    out.ask = true;
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  const std::size_t colon = error.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  const auto number = [](std::string_view digits, int low, int high) -> std::optional<int> {
    int v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size() || v < low || v > high) {
      return std::nullopt;
    }
    return v;
  };
  const auto slot = number(error.substr(0, space), 0, k_cluster_slots - 1);
  const auto port = number(error.substr(colon + 1), 1, 65535);
  if (!slot || !port) return std::nullopt;
  std::string_view host = error.substr(space + 1, colon - space - 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.slot = static_cast<std::uint16_t>(*slot);
  out.to = node{host.empty() ? std::string(asked) : std::string(host), *port};
  return out;
}

/// One range of a CLUSTER SLOTS reply: slots [first, last], the master serving them and its
/// replicas (one of which a failover promotes).
struct slot_range {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  node master;
  std::vector<node> replicas;
};

/// A node of a CLUSTER SLOTS range ([host, port, id, ...]); an empty or unknown ("?") host is
/// `asked`'s, as Redis documents for the node that was asked.
[[nodiscard]] inline std::optional<node> node_of(const redisReply* at, std::string_view asked) {
  if (at->type != REDIS_REPLY_ARRAY || at->elements < 2 ||
      at->element[0]->type != REDIS_REPLY_STRING || at->element[1]->type != REDIS_REPLY_INTEGER ||
      at->element[1]->integer <= 0 || at->element[1]->integer > 65535) {
    return std::nullopt;
  }
  std::string host(at->element[0]->str, at->element[0]->len);
  if (host.empty() || host == "?") host = std::string(asked);
  return node{std::move(host), static_cast<int>(at->element[1]->integer)};
}

/// The ranges of a CLUSTER SLOTS reply (RESP2: [[first, last, [host, port, id...], replicas...],
/// ...]); nullopt when the reply is not an array (a server without cluster support answers an
/// error). Malformed entries are skipped.
[[nodiscard]] inline std::optional<std::vector<slot_range>> slot_ranges_of(const redisReply* r,
                                                                           std::string_view asked) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<slot_range> out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* range = r->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER) {
      continue;
    }
    const long long first = range->element[0]->integer;
    const long long last = range->element[1]->integer;
    const auto master = node_of(range->element[2], asked);
    if (first < 0 || last < first || last >= k_cluster_slots || !master) continue;
    slot_range out_range{
        static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last), *master, {}};
    for (std::size_t j = 3; j < range->elements; ++j) {
      if (auto replica = node_of(range->element[j], asked)) {
        out_range.replicas.push_back(std::move(*replica));
      }
    }
    out.push_back(std::move(out_range));
  }
  return out;
}

}  // namespace stormguard::redis_detail

#endif  // STORMGUARD_REDIS_CLUSTER_HPP
