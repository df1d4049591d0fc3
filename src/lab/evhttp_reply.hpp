// SPDX-License-Identifier: Apache-2.0
// Internal: lab::server's answers on libevent's evhttp, and what it reads from a request's head
// and query. Private to stormguard::lab; loop thread only.
#ifndef STORMGUARD_SRC_LAB_EVHTTP_REPLY_HPP
#define STORMGUARD_SRC_LAB_EVHTTP_REPLY_HPP

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/guard/store.hpp"

struct evhttp_request;

namespace stormguard::lab::detail {

/// Answers `req` with `status` and `reason`, Content-Type `content_type` and `body` (no
/// allocation of ours: the body goes straight into the request's output buffer; HEAD: no body).
void reply(evhttp_request* req, int status, const char* reason, const char* content_type,
           std::string_view body);
/// reply() as text/plain; charset=utf-8.
void reply_text(evhttp_request* req, int status, const char* reason, std::string_view body);
/// Sends a response the guard stored (or the endpoint made): its status, headers and body.
void reply_stored(evhttp_request* req, const guard::stored_response& r);
/// The values of every input header named `name` (case-insensitive) joined with ", " (RFC 9110
/// §5.3), or nullopt when there is none.
[[nodiscard]] std::optional<std::string> header_values(evhttp_request* req, const char* name);
/// The decoded name, value pairs of the request's query ("" names and values as sent); a query
/// evhttp cannot decode reads as one parameter "" that every reader refuses.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> query_parameters(
    evhttp_request* req);

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_EVHTTP_REPLY_HPP
