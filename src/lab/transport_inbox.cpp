// SPDX-License-Identifier: Apache-2.0
// The attempts of other transports on their way to lab::server's loop (lab/transport_inbox.hpp).
#include "lab/transport_inbox.hpp"

#include <event2/event.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace stormguard::lab::detail {

void complete(transport_call& c, const transport_answer& answer) noexcept {
  try {
    if (c.done) std::exchange(c.done, nullptr)(answer);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the transport's own failure
  }
}

transport_inbox::~transport_inbox() { release(); }

std::string transport_inbox::open(event_base* base, taker take) {
  take_ = std::move(take);
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return std::string("cannot create a pipe: ") + std::strerror(errno);
  }
  event_ = event_new(base, pipe_[0], EV_READ | EV_PERSIST, &transport_inbox::on_readable, this);
  if (event_ == nullptr || event_add(event_, nullptr) != 0) return "cannot create an event";
  return {};
}

void transport_inbox::submit(std::unique_ptr<transport_call> c) {
  bool closed = false;
  bool wake = false;
  {
    const stormguard::detail::lock hold(mutex_);
    closed = closed_;
    if (!closed) {
      wake = queued_.empty();
      queued_.push_back(std::move(c));
    }
  }
  if (closed) return complete(*c, {.unanswered = true});
  if (wake) {
    const char byte = 1;
    // A full pipe already wakes the loop (EAGAIN): nothing is lost.
    while (::write(pipe_[1], &byte, 1) < 0 && errno == EINTR) {
    }
  }
}

std::vector<std::unique_ptr<transport_call>> transport_inbox::close() {
  std::vector<std::unique_ptr<transport_call>> out;
  const stormguard::detail::lock hold(mutex_);
  closed_ = true;
  out.swap(queued_);
  return out;
}

void transport_inbox::release() noexcept {
  for (auto& c : close()) complete(*c, {.unanswered = true});
  if (event_ != nullptr) event_free(std::exchange(event_, nullptr));
  for (int& fd : pipe_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void transport_inbox::on_readable(int fd, short, void* arg) {
  std::array<char, 256> bytes{};
  while (::read(fd, bytes.data(), bytes.size()) > 0) {
  }
  auto& self = *static_cast<transport_inbox*>(arg);
  std::vector<std::unique_ptr<transport_call>> taken;
  {
    const stormguard::detail::lock hold(self.mutex_);
    taken.swap(self.queued_);
  }
  if (!taken.empty() && self.take_) self.take_(std::move(taken));
}

}  // namespace stormguard::lab::detail
