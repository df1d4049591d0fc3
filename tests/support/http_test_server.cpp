// SPDX-License-Identifier: Apache-2.0
#include "support/http_test_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <system_error>

namespace stormguard::test_support {

namespace {

constexpr int k_poll_ms = 50;
constexpr std::size_t k_max_head = 64 * 1024;

std::system_error os_error(const char* what) {
  return std::system_error(errno, std::generic_category(), what);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

// Sends all of `data`; false on any error (the send timeout bounds a client that stops reading).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void close_with_reset(int fd) {
  const ::linger l{1, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

}  // namespace

std::optional<std::string> recorded_request::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (iequals(n, name)) return v;
  }
  return std::nullopt;
}

struct http_test_server::connection {
  int fd = -1;
  int number = 0;
  std::string buffer;
};

http_test_server::http_test_server() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw os_error("http_test_server: socket");
  const int one = 1;
  (void)::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(listen_fd_, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<::sockaddr*>(&address), &length) != 0) {
    const auto error = os_error("http_test_server: bind/listen");
    ::close(listen_fd_);
    throw error;
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

http_test_server::~http_test_server() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

std::string http_test_server::url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
}

void http_test_server::script(std::vector<scripted_response> responses) {
  const stormguard::detail::lock hold(mutex_);
  script_.assign(std::make_move_iterator(responses.begin()),
                 std::make_move_iterator(responses.end()));
}

void http_test_server::set_fallback(scripted_response response) {
  const stormguard::detail::lock hold(mutex_);
  fallback_ = std::move(response);
}

std::vector<recorded_request> http_test_server::requests() const {
  const stormguard::detail::lock hold(mutex_);
  return requests_;
}

std::size_t http_test_server::count(std::string_view method) const {
  const stormguard::detail::lock hold(mutex_);
  return static_cast<std::size_t>(
      std::count_if(requests_.begin(), requests_.end(),
                    [&](const recorded_request& r) { return r.method == method; }));
}

scripted_response http_test_server::next_response() {
  const stormguard::detail::lock hold(mutex_);
  if (script_.empty()) return fallback_;
  scripted_response r = std::move(script_.front());
  script_.pop_front();
  return r;
}

void http_test_server::serve() {
  std::vector<std::unique_ptr<connection>> open;
  while (!stop_.load()) {
    std::vector<::pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& c : open) fds.push_back({c->fd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), k_poll_ms);
    if (ready <= 0) continue;
    // Connections first (their indexes match `open`), then the listening socket.
    std::vector<std::unique_ptr<connection>> still_open;
    for (std::size_t i = 0; i < open.size(); ++i) {
      auto& c = open[i];
      const short events = fds[i + 1].revents;
      bool keep = true;
      if ((events & (POLLIN | POLLHUP | POLLERR)) != 0) keep = on_readable(*c);
      if (keep) {
        still_open.push_back(std::move(c));
      } else if (c->fd >= 0) {
        ::close(c->fd);
      }
    }
    open = std::move(still_open);
    if ((fds[0].revents & POLLIN) != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const ::timeval send_timeout{1, 0};
        (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
        auto c = std::make_unique<connection>();
        c->fd = fd;
        c->number = connections_.fetch_add(1) + 1;
        open.push_back(std::move(c));
      }
    }
  }
  for (const auto& c : open) ::close(c->fd);
}

bool http_test_server::on_readable(connection& c) {
  char chunk[16 * 1024];
  const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
  if (n <= 0) return false;  // closed by the client, or an error
  c.buffer.append(chunk, static_cast<std::size_t>(n));
  while (true) {
    const std::size_t end = c.buffer.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.buffer.size() > k_max_head) {
        (void)send_all(c.fd,
                       "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                       "Content-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
      }
      return true;  // wait for the rest of the head
    }
    const std::string head = c.buffer.substr(0, end + 2);
    std::size_t content_length = 0;
    bool chunked = false;
    std::size_t at = head.find("\r\n") + 2;
    while (at < head.size()) {
      const std::size_t eol = head.find("\r\n", at);
      const std::string_view line(head.data() + at, eol - at);
      const std::size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        const std::string_view name = line.substr(0, colon);
        const std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "Content-Length")) {
          if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos ||
              value.size() > 9) {
            (void)send_all(c.fd,
                           "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                           "Connection: close\r\n\r\n");
            return false;
          }
          content_length = std::stoul(std::string(value));
        }
        if (iequals(name, "Transfer-Encoding")) chunked = true;
      }
      at = eol + 2;
    }
    if (chunked) {
      (void)send_all(c.fd,
                     "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n");
      return false;
    }
    if (c.buffer.size() < end + 4 + content_length) return true;  // wait for the body
    std::string body = c.buffer.substr(end + 4, content_length);
    c.buffer.erase(0, end + 4 + content_length);
    if (!handle(c, head, std::move(body))) return false;
  }
}

bool http_test_server::handle(connection& c, const std::string& head, std::string body) {
  recorded_request request;
  const std::size_t first_eol = head.find("\r\n");
  const std::string_view request_line(head.data(), first_eol);
  const std::size_t sp1 = request_line.find(' ');
  const std::size_t sp2 = request_line.rfind(' ');
  request.method = std::string(request_line.substr(0, sp1));
  request.target = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
  const bool http10 = request_line.substr(sp2 + 1) == "HTTP/1.0";
  bool close_after = http10;
  for (std::size_t at = first_eol + 2; at < head.size();) {
    const std::size_t eol = head.find("\r\n", at);
    const std::string_view line(head.data() + at, eol - at);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      request.headers.emplace_back(std::string(line.substr(0, colon)),
                                   std::string(trim(line.substr(colon + 1))));
      if (iequals(request.headers.back().first, "Connection") &&
          iequals(request.headers.back().second, "close")) {
        close_after = true;
      }
    }
    at = eol + 2;
  }
  request.body = std::move(body);
  request.connection = c.number;
  request.received = std::chrono::steady_clock::now();
  const bool head_request = request.method == "HEAD";
  {
    const stormguard::detail::lock hold(mutex_);
    requests_.push_back(std::move(request));
  }

  const scripted_response response = next_response();
  if (response.delay > std::chrono::milliseconds::zero() &&
      !wait_unless_hung_up(c.fd, response.delay)) {
    if (!stop_.load()) hang_ups_.fetch_add(1);
    return false;
  }
  switch (response.what) {
    case scripted_response::action::close:
      ::shutdown(c.fd, SHUT_RDWR);
      return false;
    case scripted_response::action::reset:
      close_with_reset(c.fd);
      c.fd = -1;
      return false;
    case scripted_response::action::respond:
      break;
  }
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  if (close_after) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_request) out += response.body;
  return send_all(c.fd, out) && !close_after;
}

bool http_test_server::wait_unless_hung_up(int fd, std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop_.load()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) return true;
    ::pollfd p{fd, POLLRDHUP, 0};
    const int ready =
        ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, k_poll_ms)));
    if (ready > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return false;
  }
  return false;
}

std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw os_error("closed_port: socket");
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<::sockaddr*>(&address), &length) != 0) {
    const auto error = os_error("closed_port: bind");
    ::close(fd);
    throw error;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace stormguard::test_support
