// SPDX-License-Identifier: Apache-2.0
// The Redis store's Lua scripts (src/guard/redis_store.cpp runs them with EVALSHA): begin,
// complete and release, each one atomic step in the server. Internal.
#ifndef STORMGUARD_SRC_GUARD_REDIS_SCRIPTS_HPP
#define STORMGUARD_SRC_GUARD_REDIS_SCRIPTS_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stormguard::guard::internal {

// --- the scripts ---------------------------------------------------------------------------

// le(a, b): a <= b for two int64 values written in decimal (std::to_string: no leading zeros, a
// '-' for negatives). Exact: compares sign, then length, then at most two chunks of <= 15 digits
// (tonumber is exact below 2^53), never the strings with '<' (strcoll, the server's locale).
inline constexpr std::string_view k_lua_le = R"lua(
local function le(a, b)
  local na, nb = a:sub(1, 1) == '-', b:sub(1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = b:sub(2), a:sub(2) end
  if #a ~= #b then return #a < #b end
  local n = #a - 15
  if n > 0 then
    local ha, hb = tonumber(a:sub(1, n)), tonumber(b:sub(1, n))
    if ha ~= hb then return ha < hb end
    a, b = a:sub(n + 1), b:sub(n + 1)
  end
  return tonumber(a) <= tonumber(b)
end
)lua";

// begin. KEYS[1] the record; ARGV: now, fingerprint, token, lease_expires, expires, pexpire_ms.
// Returns {'acquired', took_over 0|1}, {'in_progress', fingerprint, lease_expires} or
// {'completed', fingerprint, status, headers, body}.
inline constexpr std::string_view k_lua_begin = R"lua(
local k = KEYS[1]
local now = ARGV[1]
local r = redis.call('HMGET', k, 'state', 'fingerprint', 'lease_expires', 'expires', 'status',
                     'headers', 'body')
local took_over = 0
if r[1] then
  if not r[4] or (r[1] ~= 'completed' and (r[1] ~= 'in_progress' or not r[3])) then
    return redis.error_reply('ERR stormguard record ' .. k .. ' is corrupt (state ' ..
                             tostring(r[1]) .. ')')
  end
  if not le(r[4], now) then
    if r[1] == 'completed' then return {'completed', r[2], r[5], r[6], r[7]} end
    if not le(r[3], now) then return {'in_progress', r[2], r[3]} end
    took_over = 1
  end
end
redis.call('DEL', k)
redis.call('HSET', k, 'state', 'in_progress', 'fingerprint', ARGV[2], 'token', ARGV[3],
           'lease_expires', ARGV[4], 'expires', ARGV[5])
redis.call('PEXPIRE', k, ARGV[6])
return {'acquired', took_over}
)lua";

// complete. KEYS[1] the record; ARGV: token, expires, pexpire_ms, status, headers, body, n, then
// the n queued commands, each as its argument count and its arguments (name first).
// Returns 1 (completed), 0 (lease lost: nothing run) or an error.
//
// A Redis script is atomic (no other command runs meanwhile) but it does NOT roll back: when its
// third command fails, the first two stay written. So what can be checked is checked before the
// first command runs: out of memory (the script flags, see script_texts), and every queued
// command (it exists, may run in a script, has a valid number of arguments: COMMAND INFO). What
// can only fail while running (a WRONGTYPE, a value that is not an integer) leaves the commands
// before it applied and the record in progress.
inline constexpr std::string_view k_lua_complete = R"lua(
local k = KEYS[1]
local r = redis.call('HMGET', k, 'state', 'token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[7])
local checked = {}
local i = 8
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local name = string.lower(ARGV[i + 1])
  local info = checked[name]
  if info and #info[10] > 0 and argc >= 2 then  -- a container (CLIENT, CONFIG...): its subcommand
    name = name .. '|' .. string.lower(ARGV[i + 2])
    info = checked[name]
  end
  if not info then
    info = redis.call('COMMAND', 'INFO', name)[1]
    if info and #info[10] > 0 and argc >= 2 then
      checked[name] = info
      name = name .. '|' .. string.lower(ARGV[i + 2])
      info = checked[name] or redis.call('COMMAND', 'INFO', name)[1]
    end
    if not info then
      return redis.error_reply('ERR queued command ' .. c .. ': unknown command ' .. name ..
                               ' (nothing was written)')
    end
    for _, flag in ipairs(info[3]) do
      if flag.ok == 'noscript' then
        return redis.error_reply('ERR queued command ' .. c .. ': ' .. name ..
                                 ' cannot run in a script (nothing was written)')
      end
    end
    checked[name] = info
  end
  local arity = info[2]
  if (arity >= 0 and argc ~= arity) or (arity < 0 and argc < -arity) then
    return redis.error_reply('ERR queued command ' .. c .. ': wrong number of arguments for ' ..
                             name .. ' (nothing was written)')
  end
  i = i + argc + 1
end
i = 8
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local res = redis.pcall(unpack(ARGV, i + 1, i + argc))
  if type(res) == 'table' and res.err then
    return redis.error_reply('ERR queued command ' .. c .. ' (' .. ARGV[i + 1] .. ') failed: ' ..
                             res.err .. '; the ' .. (c - 1) .. ' queued before it stay ' ..
                             'written (Redis scripts do not roll back); the record stays ' ..
                             'in progress')
  end
  i = i + argc + 1
end
redis.call('HSET', k, 'state', 'completed', 'expires', ARGV[2], 'status', ARGV[4], 'headers',
           ARGV[5], 'body', ARGV[6])
redis.call('HDEL', k, 'token', 'lease_expires')
redis.call('PEXPIRE', k, ARGV[3])
return 1
)lua";

// release. KEYS[1] the record; ARGV[1] the token. Returns 1 (deleted) or 0.
inline constexpr std::string_view k_lua_release = R"lua(
local r = redis.call('HMGET', KEYS[1], 'state', 'token')
if r[1] == 'in_progress' and r[2] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

enum script_id : std::uint8_t { k_begin, k_complete, k_release, k_script_count };

inline const std::array<std::string, k_script_count>& script_texts() {
  // "#!lua" (Redis 7 script flags, none given): a script that may write is refused as a whole
  // when the server is out of memory (maxmemory), before its first command, instead of failing
  // at its first write with the commands before it applied.
  static const std::array<std::string, k_script_count> texts = {
      "#!lua" + std::string(k_lua_le) + std::string(k_lua_begin),
      "#!lua" + std::string(k_lua_complete), "#!lua" + std::string(k_lua_release)};
  return texts;
}

// The most arguments of one queued command: the script passes them through Lua's unpack(),
// which stops at its C stack limit (LUAI_MAXCSTACK, 8000 in Redis's Lua 5.1).
inline constexpr std::size_t k_max_queued_args = 7000;

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_REDIS_SCRIPTS_HPP
