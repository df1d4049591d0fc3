// SPDX-License-Identifier: Apache-2.0
// HEAD answers of lab::server (docs/lab.md "Limits"). Private to stormguard::lab.
#ifndef STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP
#define STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP

struct evhttp_request;

namespace stormguard::lab::detail {

/// evhttp_send_reply for every answer of the server: to a HEAD request, the body is dropped and
/// its length sent as Content-Length (RFC 9110 §9.3.2: what a GET would have carried; evhttp
/// 2.1 sends the body and no Content-Length).
void send_reply(evhttp_request* req, int status, const char* reason);

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP
