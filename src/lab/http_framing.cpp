// SPDX-License-Identifier: Apache-2.0
// HEAD answers of lab::server (src/lab/http_framing.hpp).
#include "lab/http_framing.hpp"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <cstddef>
#include <string>

namespace stormguard::lab::detail {

void send_reply(evhttp_request* req, int status, const char* reason) {
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
    evbuffer* body = evhttp_request_get_output_buffer(req);
    const std::size_t length = evbuffer_get_length(body);
    evbuffer_drain(body, length);
    evkeyvalq* headers = evhttp_request_get_output_headers(req);
    evhttp_remove_header(headers, "Content-Length");
    evhttp_add_header(headers, "Content-Length", std::to_string(length).c_str());
  }
  evhttp_send_reply(req, status, reason, nullptr);
}

}  // namespace stormguard::lab::detail
