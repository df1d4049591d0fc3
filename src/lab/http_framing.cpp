// SPDX-License-Identifier: Apache-2.0
// The framing checks of lab::server's requests on their raw bytes, and HEAD answers
// (src/lab/http_framing.hpp).
#include "lab/http_framing.hpp"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <algorithm>
#include <string>

#include "stormguard/detail/http_syntax.hpp"

namespace stormguard::lab::detail {

namespace {

using stormguard::detail::equals_ignoring_case;
using stormguard::detail::to_lower_ascii;
using stormguard::detail::trim_ows;

constexpr std::size_t k_max_chunk_line = 4096;  // a chunk size and its extensions, in bytes
constexpr std::size_t k_max_chunk_digits = 15;  // 16^15 - 1 fits evhttp's signed 64-bit size

bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// RFC 9112 §7.1.1: chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ),
// checked loosely: after optional whitespace a ';', then visible ASCII, spaces and tabs only.
bool valid_extensions(std::string_view rest) noexcept {
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  if (rest.empty() || rest.front() != ';') return false;
  return std::all_of(rest.begin(), rest.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return c == ' ' || c == '\t' || (u > 0x20 && u < 0x7f);
  });
}

}  // namespace

framing_answer describe(framing_problem p) noexcept {
  switch (p) {
    case framing_problem::none:
      return {};
    case framing_problem::whitespace_before_colon:
      return {400, "Bad Request", "whitespace between a field name and its colon (RFC 9112 5.1)\n"};
    case framing_problem::obs_fold:
      return {400, "Bad Request", "a field line folded onto the next (obs-fold, RFC 9112 5.2)\n"};
    case framing_problem::bad_field_line:
      return {400, "Bad Request",
              "a field name must be a token and a field value may not hold a control character "
              "such as NUL or CR (RFC 9110 5.1, 5.5)\n"};
    case framing_problem::transfer_encoding_in_http10:
      return {400, "Bad Request", "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)\n"};
    case framing_problem::bad_chunk_size:
      return {400, "Bad Request",
              "a chunk size must be hexadecimal digits, then extensions after ';' "
              "(RFC 9112 7.1)\n"};
    case framing_problem::request_line_too_long:
      return {414, "URI Too Long", "the request line is longer than the request head limit\n"};
    case framing_problem::head_too_large:
      return {431, "Request Header Fields Too Large",
              "the request head (request line and header fields) is over its limit\n"};
  }
  return {400, "Bad Request", "bad request\n"};
}

void framing_scan::restart() noexcept {
  phase_ = phase::request_line;
  head_size_ = 0;
  line_.clear();
  http10_ = false;
  transfer_encoding_ = false;
  chunked_ = false;
  chunk_left_ = 0;
  size_done_ = false;
}

void framing_scan::feed(char* data, std::size_t n) {
  std::size_t i = 0;
  while (i < n && problem_ == framing_problem::none) {
    switch (phase_) {
      case phase::waiting:
        return;
      case phase::chunk_data: {
        const auto skip = static_cast<std::size_t>(
            std::min<std::uint64_t>(chunk_left_, static_cast<std::uint64_t>(n - i)));
        i += skip;
        chunk_left_ -= skip;
        if (chunk_left_ == 0) phase_ = phase::chunk_size;  // its CRLF reads as an empty line
        break;
      }
      case phase::chunk_size:
        chunk_size_byte(data + i);
        ++i;
        break;
      default:  // request_line, fields, trailer
        head_byte(data[i]);
        ++i;
        break;
    }
  }
}

void framing_scan::head_byte(char c) {
  if (phase_ != phase::trailer && ++head_size_ > head_bytes_) {
    problem_ = phase_ == phase::request_line ? framing_problem::request_line_too_long
                                             : framing_problem::head_too_large;
    return;
  }
  if (c != '\n') {
    if (phase_ != phase::trailer || line_.size() < 2) line_.push_back(c);
    return;
  }
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  end_of_head_line();
  line_.clear();
}

void framing_scan::end_of_head_line() {
  const std::string_view line = line_;
  if (phase_ == phase::trailer) {
    if (line.empty()) phase_ = phase::waiting;  // the end of the chunked body
    return;
  }
  if (phase_ == phase::request_line) {
    if (line.empty()) return;  // an empty line before the request line (RFC 9112 §2.2)
    http10_ = line.ends_with(" HTTP/1.0");
    phase_ = phase::fields;
    return;
  }
  if (line.empty()) {  // the end of the head
    if (transfer_encoding_ && http10_) {
      problem_ = framing_problem::transfer_encoding_in_http10;
    } else if (chunked_) {
      phase_ = phase::chunk_size;
      size_done_ = false;
    } else {
      phase_ = phase::waiting;
    }
    return;
  }
  if (line.front() == ' ' || line.front() == '\t') {
    problem_ = framing_problem::obs_fold;
    return;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;  // evhttp refuses it (400)
  const std::string_view name = line.substr(0, colon);
  if (name.find_first_of(" \t") != std::string_view::npos) {
    problem_ = framing_problem::whitespace_before_colon;
    return;
  }
  const std::string_view value = line.substr(colon + 1);
  if (name.empty() || !std::all_of(name.begin(), name.end(), stormguard::detail::is_tchar) ||
      std::any_of(value.begin(), value.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\t') || u == 0x7f;
      })) {
    problem_ = framing_problem::bad_field_line;
    return;
  }
  if (equals_ignoring_case(name, "Transfer-Encoding")) {
    transfer_encoding_ = true;
    // evhttp reads the body chunked when the (last) field says exactly "chunked".
    chunked_ = equals_ignoring_case(trim_ows(line.substr(colon + 1)), "chunked");
  }
}

void framing_scan::chunk_size_byte(char* c) {
  if (*c == '\n') {
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    end_of_chunk_size_line();
    line_.clear();
    size_done_ = false;
    return;
  }
  if (line_.size() >= k_max_chunk_line) {
    problem_ = framing_problem::bad_chunk_size;
    return;
  }
  line_.push_back(*c);
  if (size_done_ || is_hex(*c)) return;
  size_done_ = true;
  // evhttp ends the size at a space only (strtoll, then "*endp == ' '"): the first byte of an
  // extension, or of the whitespace before it, becomes a space. The line is checked at its end.
  if (line_.size() > 1 && (*c == ';' || *c == '\t')) *c = ' ';
}

void framing_scan::end_of_chunk_size_line() {
  const std::string_view line = line_;
  if (line.empty()) return;  // the CRLF after a chunk's data
  const std::size_t digits = std::find_if_not(line.begin(), line.end(), is_hex) - line.begin();
  if (digits == 0 || digits > k_max_chunk_digits ||
      (digits < line.size() && !valid_extensions(line.substr(digits)))) {
    problem_ = framing_problem::bad_chunk_size;
    return;
  }
  std::uint64_t size = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char d = line[i];
    size =
        size * 16 + static_cast<std::uint64_t>(d <= '9' ? d - '0' : to_lower_ascii(d) - 'a' + 10);
  }
  if (size == 0) {
    phase_ = phase::trailer;
  } else {
    chunk_left_ = size;
    phase_ = phase::chunk_data;
  }
}

// The reason phrase of the statuses the payments endpoint sends (RFC 9110 §15).
const char* reason_phrase(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 422:
      return "Unprocessable Content";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

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
