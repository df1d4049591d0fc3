// SPDX-License-Identifier: Apache-2.0
// The lab's attempts over gRPC (app/lab_grpc_attempts.hpp). Each attempt is one
// stormguard::grpc::client::async_call without retries; its end comes on a gRPC thread, which
// posts it to the io_context unless stop() has begun, and counts it out, so that stop() knows
// when no gRPC thread touches this object any more.
#include "app/lab_grpc_attempts.hpp"

#include <asio/post.hpp>
#include <condition_variable>
#include <stop_token>
#include <string_view>
#include <unordered_map>

#include "stormguard/budget.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/lab/v1/scenario.grpc.pb.h"

namespace stormguard::lab {

namespace {

namespace v1 = ::stormguard::lab::v1;

// What a call of one attempt ended with, in the words the lab's fleet classifies. serve --grpc
// says every refusal with stormguard::grpc::status_for, whose message starts "stormguard
// admission:"; an UNAVAILABLE without it is gRPC's own (no connection): the lab's failure.
attempt_heard heard_of(const grpc::result& r) {
  attempt_heard h;
  if (r.ok()) {
    h.reply = admission::reply{.status = 200};
    return h;
  }
  if (r.reason == end_reason::cancelled) {
    h.cancelled = true;
    return h;
  }
  const auto code = r.status.error_code();
  if (code == ::grpc::StatusCode::DEADLINE_EXCEEDED) {
    h.timed_out = true;
    return h;
  }
  const bool server_said =
      std::string_view(r.status.error_message()).starts_with("stormguard admission:");
  if (server_said &&
      (code == ::grpc::StatusCode::UNAVAILABLE || code == ::grpc::StatusCode::RESOURCE_EXHAUSTED)) {
    const bool do_not_retry = r.pushback && r.pushback->do_not_retry;
    const bool delay = r.pushback && !r.pushback->do_not_retry;
    h.reply = admission::reply{
        .status = admission::k_refusal_status, .do_not_retry = do_not_retry, .retry_after = delay};
    if (delay) h.retry_after = r.pushback->delay;
    return h;
  }
  h.failure =
      "gRPC status " + std::to_string(static_cast<int>(code)) + ": " + r.status.error_message();
  return h;
}

grpc::client_options one_attempt_options() {
  grpc::client_options o;
  o.retry.max_retries = 0;
  o.budget = no_budget{};
  return o;
}

}  // namespace

struct grpc_attempts::impl {
  impl(asio::io_context& context, const std::string& address, duration limit)
      : io(context),
        timeout(limit),
        client(address, ::grpc::InsecureChannelCredentials(), one_attempt_options()),
        stub(v1::Scenario::NewStub(client.channel())) {}

  // One attempt in flight: what gRPC writes into and the stop that cancels it.
  struct call {
    std::stop_source stop;
    v1::CallRequest request;
    v1::CallReply reply;
    std::function<void(attempt_heard)> done;
  };

  // On the io_context's thread: the attempt's end, unless stop() came first.
  void finished(std::uint64_t key, const std::shared_ptr<call>& c, const attempt_heard& h) {
    const auto it = in_flight.find(key);
    if (it != in_flight.end() && it->second == c) in_flight.erase(it);
    if (c->done) std::exchange(c->done, nullptr)(h);
  }

  asio::io_context& io;
  duration timeout;
  grpc::client client;
  std::unique_ptr<v1::Scenario::Stub> stub;
  std::unordered_map<std::uint64_t, std::shared_ptr<call>> in_flight;  // io thread only
  stormguard::detail::mutex mutex;
  std::condition_variable_any ended;
  std::int64_t outstanding STORMGUARD_GUARDED_BY(mutex) = 0;  // async_calls not yet ended
  bool stopping STORMGUARD_GUARDED_BY(mutex) = false;
};

grpc_attempts::grpc_attempts(asio::io_context& io, const std::string& address, duration timeout)
    : impl_(std::make_shared<impl>(io, address, timeout)) {}

grpc_attempts::~grpc_attempts() { stop(); }

void grpc_attempts::send(std::uint64_t key, const metadata& md,
                         std::function<void(attempt_heard)> done) {
  impl& self = *impl_;
  auto c = std::make_shared<impl::call>();
  c->done = std::move(done);
  self.in_flight[key] = c;
  {
    const stormguard::detail::lock hold(self.mutex);
    ++self.outstanding;
  }
  grpc::call_options options;
  options.idempotent = true;
  options.stop = c->stop.get_token();
  options.deadline = real_clock().now() + self.timeout;
  options.configure = [md](::grpc::ClientContext& ctx) {
    for (const auto& [name, value] : md) ctx.AddMetadata(name, value);
  };
  options.method = "/stormguard.lab.v1.Scenario/Call";
  self.client.async_call(
      [stub = self.stub.get()](::grpc::ClientContext* ctx, const v1::CallRequest* req,
                               v1::CallReply* reply, std::function<void(::grpc::Status)> f) {
        stub->async()->Call(ctx, req, reply, std::move(f));
      },
      c->request, &c->reply, std::move(options),
      [p = &self, key, c](grpc::result r) {
        const attempt_heard h = heard_of(r);
        bool post = false;
        {
          const stormguard::detail::lock hold(p->mutex);
          post = !p->stopping;
        }
        if (post) asio::post(p->io, [p, key, c, h] { p->finished(key, c, h); });
        const stormguard::detail::lock hold(p->mutex);
        --p->outstanding;
        p->ended.notify_all();
      });
}

void grpc_attempts::cancel(std::uint64_t key) {
  const auto it = impl_->in_flight.find(key);
  if (it != impl_->in_flight.end()) it->second->stop.request_stop();
}

void grpc_attempts::stop() noexcept {
  if (!impl_) return;
  impl& self = *impl_;
  {
    const stormguard::detail::lock hold(self.mutex);
    self.stopping = true;
  }
  for (auto& [key, c] : self.in_flight) c->stop.request_stop();
  self.mutex.lock();
  while (self.outstanding > 0) self.ended.wait(self.mutex);
  self.mutex.unlock();
  self.in_flight.clear();
}

}  // namespace stormguard::lab
