// SPDX-License-Identifier: Apache-2.0
// lab::server's answers on evhttp, and its readers of a request's head and query
// (lab/evhttp_reply.hpp).
#include "lab/evhttp_reply.hpp"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "lab/http_framing.hpp"

namespace stormguard::lab::detail {

// No allocation of ours per answer: the body goes straight into the request's output buffer.
void reply(evhttp_request* req, int status, const char* reason, const char* content_type,
           std::string_view body) {
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", content_type);
  evbuffer_add(evhttp_request_get_output_buffer(req), body.data(), body.size());
  detail::send_reply(req, status, reason);  // HEAD: no body (http_framing.hpp)
}

void reply_text(evhttp_request* req, int status, const char* reason, std::string_view body) {
  reply(req, status, reason, "text/plain; charset=utf-8", body);
}

// Sends a response the guard stored (or the endpoint made): its status, headers and body.
void reply_stored(evhttp_request* req, const guard::stored_response& r) {
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  for (const auto& [name, value] : r.headers) {
    evhttp_add_header(headers, name.c_str(), value.c_str());
  }
  evbuffer_add(evhttp_request_get_output_buffer(req), r.body.data(), r.body.size());
  detail::send_reply(req, r.status, detail::reason_phrase(r.status));
}

// The values of every input header named `name` (case-insensitive) joined with ", " (RFC 9110
// §5.3), or nullopt when there is none.
std::optional<std::string> header_values(evhttp_request* req, const char* name) {
  std::optional<std::string> out;
  const evkeyvalq* headers = evhttp_request_get_input_headers(req);
  for (const evkeyval* h = headers->tqh_first; h != nullptr; h = h->next.tqe_next) {
    if (evutil_ascii_strcasecmp(h->key, name) != 0) continue;
    if (out) {
      *out += ", ";
      *out += h->value;
    } else {
      out = std::string(h->value);
    }
  }
  return out;
}

// The decoded name, value pairs of the request's query ("" names and values as sent); a query
// evhttp cannot decode reads as one parameter "" that every reader refuses.
std::vector<std::pair<std::string, std::string>> query_parameters(evhttp_request* req) {
  std::vector<std::pair<std::string, std::string>> out;
  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
  const char* query = uri != nullptr ? evhttp_uri_get_query(uri) : nullptr;
  if (query == nullptr || *query == '\0') return out;
  // evhttp decodes into C strings, where an encoded NUL would cut a value short unseen.
  const std::string_view raw(query);
  const bool has_nul = raw.find("%00") != std::string_view::npos;
  evkeyvalq parsed{};
  if (has_nul || evhttp_parse_query_str(query, &parsed) != 0) {
    out.emplace_back("", query);
    return out;
  }
  for (const evkeyval* h = parsed.tqh_first; h != nullptr; h = h->next.tqe_next) {
    out.emplace_back(h->key, h->value);
  }
  evhttp_clear_headers(&parsed);
  return out;
}

}  // namespace stormguard::lab::detail
