// SPDX-License-Identifier: Apache-2.0
// The framing checks of lab::server's requests that evhttp (libevent 2.1) does not make, on the
// raw bytes of a connection, and HEAD answers without content (docs/lab.md "Limits"). Private to
// stormguard::lab; src/lab/http_limits.cpp feeds a framing_scan every byte a connection receives
// before evhttp parses it, and refuses the request itself when the scan finds a problem.
//
// evhttp parses the requests; framing_scan only checks what it would let through:
//   - RFC 9112 §5.1: whitespace between a field name and the colon (evhttp keeps "Content-Length "
//     as a field name, reads no body, and answers the body as the next request): 400;
//   - RFC 9112 §5.2: obs-fold, a field line that begins with a space or a tab (evhttp appends it
//     to the field before): 400;
//   - RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request (evhttp reads it chunked): 400;
//   - RFC 9112 §7.1: a chunk size that is not 1*HEXDIG (evhttp answers "-1" with 413): 400; a
//     chunk extension (";name=value", which evhttp refuses with 413) is accepted: the byte after
//     the size is rewritten to a space, which evhttp reads as the end of the size (it ignores
//     extensions either way);
//   - the head over head_bytes (evhttp answers 400): 431 (RFC 6585 §5), or 414 (RFC 9110
//     §15.5.15) while the request line alone is over it.
// The scan follows one request at a time: from its first byte to the end of its head, and through
// a chunked body to its last chunk and trailer; then it waits (restart()) until evhttp has
// answered the request and reads the next one from the bytes left in the buffer.
#ifndef STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP
#define STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct evhttp_request;

namespace stormguard::lab::detail {

/// What a framing_scan found wrong with a request's bytes.
enum class framing_problem : std::uint8_t {
  none,
  whitespace_before_colon,      ///< 400 (RFC 9112 §5.1)
  obs_fold,                     ///< 400 (RFC 9112 §5.2)
  bad_field_line,               ///< 400: an empty or non-token field name, or a control
                                ///< character (NUL, CR, ...) in a value (RFC 9110 §5.1, §5.5)
  transfer_encoding_in_http10,  ///< 400 (RFC 9112 §6.1: faulty framing)
  bad_chunk_size,               ///< 400 (RFC 9112 §7.1)
  request_line_too_long,        ///< 414
  head_too_large,               ///< 431
};

/// The status line's code and reason, and a one-line body, of a problem; {0, "", ""} for none.
struct framing_answer {
  int status = 0;
  std::string_view reason;
  std::string_view body;
};
[[nodiscard]] framing_answer describe(framing_problem p) noexcept;

/// The scan of one connection's bytes (see the file comment). Not thread-safe (the loop thread).
class framing_scan {
 public:
  /// `head_bytes`: the largest head (request line and header fields, line ends included).
  explicit framing_scan(std::size_t head_bytes) noexcept : head_bytes_(head_bytes) {}

  /// Scans the next `n` bytes the connection received, in order; may rewrite a chunk extension's
  /// first byte in place (see the file comment). Once a problem is found, or while it waits,
  /// it reads nothing.
  void feed(char* data, std::size_t n);

  /// The connection's next request begins with the next byte fed (the previous one is answered).
  /// A problem found stays.
  void restart() noexcept;

  [[nodiscard]] framing_problem problem() const noexcept { return problem_; }
  /// Whether the next byte fed would be read: false once a problem is found, and while it waits
  /// for restart() (after a head without a chunked body, or after a chunked body's end).
  [[nodiscard]] bool reading() const noexcept {
    return problem_ == framing_problem::none && phase_ != phase::waiting;
  }

 private:
  enum class phase : std::uint8_t {
    request_line,
    fields,
    chunk_size,
    chunk_data,
    trailer,
    waiting
  };
  void head_byte(char c);
  void end_of_head_line();
  void chunk_size_byte(char* c);
  void end_of_chunk_size_line();

  std::size_t head_bytes_;
  phase phase_ = phase::request_line;
  framing_problem problem_ = framing_problem::none;
  std::size_t head_size_ = 0;  // bytes of the head so far
  std::string line_;           // the current line (head or chunk size), without its end
  bool http10_ = false;
  bool transfer_encoding_ = false;  // a Transfer-Encoding field
  bool chunked_ = false;            // ... that says "chunked" (evhttp reads the body chunked)
  std::uint64_t chunk_left_ = 0;    // chunk_data: bytes of data left
  bool size_done_ = false;          // chunk_size: the hex digits have ended
};

/// The reason phrase of a status the server sends (RFC 9110 §15): "OK", "Created", ...;
/// "OK", "Client Error" or "Server Error" for another status of that class.
[[nodiscard]] const char* reason_phrase(int status) noexcept;

/// evhttp_send_reply for every answer of the server: to a HEAD request, the body is dropped and
/// its length sent as Content-Length (RFC 9110 §9.3.2: what a GET would have carried; evhttp
/// 2.1 sends the body and no Content-Length).
void send_reply(evhttp_request* req, int status, const char* reason);

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_HTTP_FRAMING_HPP
