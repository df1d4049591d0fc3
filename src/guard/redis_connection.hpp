// SPDX-License-Identifier: Apache-2.0
// The Redis store's connection layer (src/guard/redis_store.cpp is the store): hiredis
// contexts, argument vectors, SIGPIPE handling and the URL. Internal.
#ifndef STORMGUARD_SRC_GUARD_REDIS_CONNECTION_HPP
#define STORMGUARD_SRC_GUARD_REDIS_CONNECTION_HPP

#include <hiredis/hiredis.h>
#include <signal.h>

#include <array>
#include <cctype>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "guard/redis_scripts.hpp"
#include "redis/sigpipe_guard.hpp"
#include "stormguard/detail/redis_url.hpp"

namespace stormguard::guard::internal {

/// Blocks SIGPIPE while hiredis writes (the shared helper of src/redis/).
using redis_detail::sigpipe_guard;

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

/// One connection: its hiredis context and the SHA-1 of each script as SCRIPT LOAD answered.
struct connection {
  explicit connection(redisContext* c) noexcept : ctx(c) {}
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    if (ctx != nullptr) redisFree(ctx);
  }
  redisContext* ctx;
  std::array<std::string, k_script_count> sha;
};

inline std::string_view text_of(const redisReply& r) noexcept { return {r.str, r.len}; }

inline bool is_text(const redisReply* r) noexcept {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/// An argument vector for hiredis: pointers and lengths of views the caller keeps alive.
class argv_builder {
 public:
  void reserve(std::size_t n) {
    data_.reserve(n);
    size_.reserve(n);
  }
  void add(std::string_view s) {
    data_.push_back(s.data());
    size_.push_back(s.size());
  }
  [[nodiscard]] int argc() const noexcept { return static_cast<int>(data_.size()); }
  [[nodiscard]] std::string_view name() const noexcept {
    return data_.empty() ? std::string_view("command") : std::string_view(data_[0], size_[0]);
  }
  [[nodiscard]] const char** argv() noexcept { return data_.data(); }
  [[nodiscard]] const std::size_t* argvlen() const noexcept { return size_.data(); }

 private:
  std::vector<const char*> data_;
  std::vector<std::size_t> size_;
};

inline std::string upper_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// The parsed URL (host, port, db, user, password; with redis+sentinel://, the sentinels and
/// the master's name).
using endpoint = stormguard::detail::redis_url;

/// redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or redis+sentinel://...
/// through stormguard/detail/redis_url.hpp (the one parser). Throws std::invalid_argument naming
/// redis_options.url, the password redacted.
[[nodiscard]] endpoint parse_url(const std::string& url);

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_REDIS_CONNECTION_HPP
