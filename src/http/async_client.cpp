// SPDX-License-Identifier: Apache-2.0
// stormguard::http::async_client: libcurl's multi interface on Asio, each logical request retried
// by stormguard::async_retry with the sync client's rules (transfer.hpp).
//
// The driver is curl's "multi_socket" pattern (docs/examples/asiohiper.cpp, ghiper.c): libcurl
// says which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to time out
// (CURLMOPT_TIMERFUNCTION); Asio waits (a posix::stream_descriptor per socket, which never owns the
// descriptor: libcurl opens and closes it, and says CURL_POLL_REMOVE before it closes) and calls
// curl_multi_socket_action; finished transfers are read with curl_multi_info_read.
//
// Shards. libcurl 7.88 walks the multi handle's whole connection cache on every
// curl_multi_remove_handle (close_connect_only, while the handle's last connection is known),
// and the host's connection list on every new transfer (ConnectionExists): O(connections) per
// request, so 10,000 requests in flight on one multi handle cost O(10,000²) list steps per
// round, memory-bound. The client therefore spreads its transfers over multi handles of at most
// k_transfers_per_multi transfers in flight each (a new transfer goes to the first with room):
// each has its own connection cache, timer and socket callbacks, and the walks stay short.
//
// Lifetimes. A logical request's state (detail::async_call) is owned by its async_retry operation,
// whose handlers hold it; the client only lists it. Each handler that may run after the client is
// gone checks first: a socket watch's `closed`, the client's `alive` cell, a call's `client`. So
// the destructor abandons every call (no handler of the caller's runs) and frees what libcurl
// holds, and whatever is still queued on the executor finds nothing to do.
#include "stormguard/http/async_client.hpp"

#include <curl/curl.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "http/transfer.hpp"
#include "stormguard/asio/retry.hpp"

namespace stormguard::http {

namespace {

using attempt_outcome = outcome<response, detail::attempt_failure>;

// The most transfers in flight on one libcurl multi handle (see "Shards" above).
constexpr std::size_t k_transfers_per_multi = 256;

struct multi_shard;

// One socket libcurl asked to watch.
struct socket_watch {
  socket_watch(const async_client::executor_type& ex, curl_socket_t s, multi_shard* m)
      : sd(ex), fd(s), shard(m) {
    sd.assign(s);
  }
  ::asio::posix::stream_descriptor sd;
  curl_socket_t fd;
  multi_shard* shard;    // the multi handle whose transfer uses it
  int what = 0;          // CURL_POLL_IN, CURL_POLL_OUT or CURL_POLL_INOUT
  bool reading = false;  // a wait_read is pending
  bool writing = false;  // a wait_write is pending
  bool closed = false;   // libcurl removed it, or the client is gone
};

// One libcurl multi handle of the client, with its connection cache and its timer.
struct multi_shard {
  multi_shard(void* c, const async_client::executor_type& ex)
      : client(c), multi(curl_multi_init()), timer(ex) {}
  multi_shard(const multi_shard&) = delete;
  multi_shard& operator=(const multi_shard&) = delete;
  ~multi_shard() {
    if (multi != nullptr) curl_multi_cleanup(multi);  // closes the cached connections
  }
  void* client;  // the async_client::impl (a private type) it belongs to
  CURLM* multi;
  ::asio::steady_timer timer;
  bool timeout_posted = false;  // a zero time-out's run is queued
  std::size_t in_flight = 0;    // transfers in the multi handle
  std::size_t peak = 0;         // the most at once: the connections its cache keeps
};

}  // namespace

using detail::async_call;

struct async_client::impl {
  impl(const executor_type& e, client_options o, clock* c, random_generator* r)
      : ex(e),
        setup(std::make_shared<detail::client_setup>(std::move(o), c, r)),
        planner(setup->options, *setup->budgets),
        alive(std::make_shared<impl*>(this)) {
    add_shard();  // libcurl's failure to start shows at construction
  }

  ~impl();
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  executor_type ex;
  std::shared_ptr<detail::client_setup> setup;
  detail::request_planner planner;
  std::vector<std::unique_ptr<multi_shard>> shards;  // see "Shards" above; never empty
  std::shared_ptr<impl*> alive;  // null once the client is gone (read by queued handlers)
  std::unordered_map<curl_socket_t, std::shared_ptr<socket_watch>> sockets;
  std::vector<std::unique_ptr<detail::easy_transfer>> idle;  // easy handles to reuse
  std::size_t easy_count = 0;
  std::unordered_set<async_call*> calls;

  static impl& owner(const multi_shard& m) noexcept { return *static_cast<impl*>(m.client); }

  multi_shard& add_shard() {
    auto m = std::make_unique<multi_shard>(this, ex);
    if (m->multi == nullptr) {
      throw std::runtime_error("stormguard::http::async_client: cannot create a libcurl handle");
    }
    (void)curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, &impl::on_socket);
    (void)curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m.get());
    (void)curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, &impl::on_timer);
    (void)curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m.get());
    shards.push_back(std::move(m));
    return *shards.back();
  }

  // The multi handle for the next transfer: the first with room (its idle connections are
  // reused first), a new one when all are full.
  multi_shard& shard_for_transfer() {
    for (const auto& m : shards) {
      if (m->in_flight < k_transfers_per_multi) return *m;
    }
    return add_shard();
  }

  detail::easy_transfer* acquire_transfer() {
    if (idle.empty()) {
      ++easy_count;
      return new detail::easy_transfer(setup->options);
    }
    detail::easy_transfer* t = idle.back().release();
    idle.pop_back();
    return t;
  }
  void release_transfer(detail::easy_transfer* t) { idle.emplace_back(t); }

  // Adds `t` to `m`.
  static CURLMcode add_transfer(multi_shard& m, detail::easy_transfer& t) {
    const CURLMcode added = curl_multi_add_handle(m.multi, t.handle());
    if (added != CURLM_OK) return added;
    if (++m.in_flight > m.peak) {
      // libcurl's cache keeps 4 connections per easy handle *in* the multi handle by default, so
      // as a burst of transfers ended it closed the connections of the burst; keep as many as
      // the most transfers ever in flight at once on this handle, for the next burst.
      m.peak = m.in_flight;
      (void)curl_multi_setopt(m.multi, CURLMOPT_MAXCONNECTS, static_cast<long>(m.peak));
    }
    return added;
  }
  // Takes `t` out of `m` (libcurl closes its connection when the transfer did not end).
  static void remove_transfer(multi_shard& m, detail::easy_transfer& t) {
    (void)curl_multi_remove_handle(m.multi, t.handle());
    --m.in_flight;
  }

  // ----- libcurl's callbacks (never call curl_multi_socket_action from them) --------------------

  static int on_socket(CURL*, curl_socket_t s, int what, void* shard_ptr, void*) {
    auto& m = *static_cast<multi_shard*>(shard_ptr);
    impl& self = owner(m);
    if (what == CURL_POLL_REMOVE) {
      self.forget(s);
      return 0;
    }
    auto it = self.sockets.find(s);
    if (it == self.sockets.end()) {
      it = self.sockets.emplace(s, std::make_shared<socket_watch>(self.ex, s, &m)).first;
    }
    it->second->shard = &m;
    it->second->what = what;
    self.arm(it->second);
    return 0;
  }

  static int on_timer(CURLM*, long timeout_ms, void* shard_ptr) {
    auto& m = *static_cast<multi_shard*>(shard_ptr);
    if (timeout_ms < 0) {
      m.timer.cancel();
      return 0;
    }
    // libcurl must not be called back from inside its own callback: 0 ("as soon as possible",
    // said on every curl_multi_add_handle) is one queued run, without touching the timer; a
    // timer left armed for later is harmless (a run before libcurl's time-out is allowed, and
    // libcurl then says its next time-out again).
    if (timeout_ms == 0) {
      if (!m.timeout_posted) {
        m.timeout_posted = true;
        ::asio::post(owner(m).ex, [alive = owner(m).alive, shard = &m] {
          if (*alive == nullptr) return;
          shard->timeout_posted = false;
          (*alive)->act(*shard, CURL_SOCKET_TIMEOUT, 0);
        });
      }
      return 0;
    }
    m.timer.expires_after(std::chrono::milliseconds(timeout_ms));
    m.timer.async_wait([alive = owner(m).alive, shard = &m](const std::error_code& ec) {
      if (ec || *alive == nullptr) return;
      (*alive)->act(*shard, CURL_SOCKET_TIMEOUT, 0);
    });
    return 0;
  }

  // ----- the Asio side ---------------------------------------------------------------------------

  void forget(curl_socket_t s) {
    const auto it = sockets.find(s);
    if (it == sockets.end()) return;
    close_watch(*it->second);
    sockets.erase(it);
  }

  static void close_watch(socket_watch& w) {
    w.closed = true;
    std::error_code ignored;
    (void)w.sd.cancel(ignored);
    (void)w.sd.release();  // libcurl owns the descriptor and closes it
  }

  // Waits for what libcurl wants on `w` that is not already awaited.
  void arm(const std::shared_ptr<socket_watch>& w) {
    if ((w->what & CURL_POLL_IN) != 0 && !w->reading) {
      w->reading = true;
      w->sd.async_wait(::asio::posix::stream_descriptor::wait_read,
                       [this, w](const std::error_code& ec) {
                         w->reading = false;
                         if (w->closed) return;  // before touching the client: it may be gone
                         on_ready(w, CURL_POLL_IN, ec ? CURL_CSELECT_ERR : CURL_CSELECT_IN);
                       });
    }
    if ((w->what & CURL_POLL_OUT) != 0 && !w->writing) {
      w->writing = true;
      w->sd.async_wait(::asio::posix::stream_descriptor::wait_write,
                       [this, w](const std::error_code& ec) {
                         w->writing = false;
                         if (w->closed) return;
                         on_ready(w, CURL_POLL_OUT, ec ? CURL_CSELECT_ERR : CURL_CSELECT_OUT);
                       });
    }
  }

  void on_ready(const std::shared_ptr<socket_watch>& w, int direction, int event) {
    if ((w->what & direction) == 0) return;  // libcurl no longer waits for this
    act(*w->shard, w->fd, event);
    if (!w->closed) arm(w);
  }

  // Lets libcurl act on `s` (or its timers) in `m`, then completes the transfers that ended.
  void act(multi_shard& m, curl_socket_t s, int event) {
    int running = 0;
    (void)curl_multi_socket_action(m.multi, s, event, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(m.multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* easy = msg->easy_handle;
      const CURLcode code = msg->data.result;
      char* call_ptr = nullptr;
      (void)curl_easy_getinfo(easy, CURLINFO_PRIVATE, &call_ptr);
      complete_attempt(reinterpret_cast<async_call*>(call_ptr), code);
    }
  }

  void complete_attempt(async_call* call, CURLcode code);
};

// One logical request.
struct detail::async_call : std::enable_shared_from_this<async_call> {
  struct retry_hook {
    async_call* self;
    void operator()(int attempt, const detail::attempt_failure& f, duration delay) const {
      self->report->on_retry(attempt, f, delay);
    }
  };
  using retrier_type =
      decltype(retrier(std::declval<const retry_policy&>(), std::declval<clock&>(),
                       std::declval<random_generator&>(), std::declval<any_budget&>())
                   .on_retry(std::declval<retry_hook>()));

  async_call(async_client::impl& c, request r) : client(&c), setup(c.setup), req(std::move(r)) {}

  async_client::impl* client;                   // null once the call ended or was abandoned
  std::shared_ptr<detail::client_setup> setup;  // the clock, generator and budgets it uses
  request req;
  detail::call_plan plan{};
  bool has_key = false;
  std::optional<detail::call_report> report{};
  std::optional<retrier_type> retry{};
  std::unique_ptr<detail::result_handler> handler{};
  ::asio::cancellation_slot caller_slot{};
  ::asio::cancellation_signal retry_signal{};  // cancels the async_retry operation
  // The attempt in flight.
  detail::easy_transfer* transfer = nullptr;
  multi_shard* shard = nullptr;  // the multi handle `transfer` is in
  attempt_context context{};
  std::function<void(attempt_outcome)> attempt_done{};

  // async_retry's operation: one transfer.
  struct attempt_op {
    async_call* call;
    template <class Token>
    auto operator()(const attempt_context& ctx, Token&& token) {
      return ::asio::async_initiate<Token, void(attempt_outcome)>(
          [c = call](auto handler, const attempt_context& a) {
            auto slot = ::asio::get_associated_cancellation_slot(handler);
            c->start_attempt(a, std::move(handler), slot);
          },
          token, ctx);
    }
  };
  struct classify_op {
    async_call* call;
    classification operator()(const detail::attempt_failure& f) const {
      return detail::classify_failure(call->setup->options, f, call->req.method, call->has_key);
    }
  };
  struct completion {
    std::shared_ptr<async_call> call;
    void operator()(retry_result<response, detail::attempt_failure> r) const {
      call->finish(std::move(r));
    }
  };
  struct forward_cancel {
    async_call* call;
    void operator()(::asio::cancellation_type type) const { call->retry_signal.emit(type); }
  };
  struct attempt_canceller {
    async_call* call;
    void operator()(::asio::cancellation_type) const { call->cancel_attempt(); }
  };

  void start_attempt(const attempt_context& ctx, std::function<void(attempt_outcome)> done,
                     ::asio::cancellation_slot slot) {
    context = ctx;
    attempt_done = std::move(done);
    if (client == nullptr) {  // abandoned between two steps: end without a transfer
      detail::attempt_failure gone;
      gone.error = transport_error{CURLE_ABORTED_BY_CALLBACK, failure_kind::cancelled,
                                   "the client was destroyed", std::nullopt};
      return post_outcome(failure{std::move(gone)});
    }
    transfer = client->acquire_transfer();
    transfer->configure(req, plan, ctx);
    (void)curl_easy_setopt(transfer->handle(), CURLOPT_PRIVATE, this);
    if (slot.is_connected()) slot.template emplace<attempt_canceller>(this);
    shard = &client->shard_for_transfer();
    const CURLMcode added = async_client::impl::add_transfer(*shard, *transfer);
    if (added != CURLM_OK) {
      std::snprintf(transfer->error_buffer(), CURL_ERROR_SIZE, "curl_multi_add_handle: %s",
                    curl_multi_strerror(added));
      complete(CURLE_FAILED_INIT);
    }
  }

  // Cancellation of the attempt in flight: its easy handle leaves libcurl at once (libcurl closes
  // a connection whose transfer did not end, so the server sees the close).
  void cancel_attempt() {
    if (transfer == nullptr || client == nullptr) return;
    ended(CURLE_ABORTED_BY_CALLBACK);
  }

  // The transfer in the multi handle ended with `code` (or is cut short): it leaves libcurl.
  void ended(CURLcode code) {
    async_client::impl::remove_transfer(*shard, *transfer);
    complete(code);
  }

  // The transfer ended with `code` (and is no longer in libcurl's multi handle).
  void complete(CURLcode code) {
    shard = nullptr;
    attempt_outcome o = transfer->finish(code, context, *setup->clk);
    client->release_transfer(transfer);
    transfer = nullptr;
    post_outcome(std::move(o));
  }

  // Completes the attempt through the executor, never from inside libcurl or the client.
  void post_outcome(attempt_outcome o) {
    ::asio::post(executor, [done = std::move(attempt_done), o = std::move(o)]() mutable {
      done(std::move(o));
    });
    attempt_done = nullptr;
  }

  void finish(retry_result<response, detail::attempt_failure> ended) {
    if (caller_slot.is_connected()) {
      caller_slot.clear();
      caller_slot = {};
    }
    if (client == nullptr) return;  // abandoned: the caller's handler is gone
    client->calls.erase(this);
    client = nullptr;
    result out = report->finish(std::move(ended));
    auto h = std::move(handler);
    h->complete(std::move(out));
  }

  // The client is going away: no handler of the caller's will run.
  void abandon() {
    if (caller_slot.is_connected()) {
      caller_slot.clear();
      caller_slot = {};
    }
    handler.reset();
    async_client::impl* c = client;
    client = nullptr;
    if (transfer != nullptr) {
      async_client::impl::remove_transfer(*shard, *transfer);
      shard = nullptr;
      c->release_transfer(transfer);
      transfer = nullptr;
      attempt_done = nullptr;  // the retry operation's attempt handler: it ends unfinished
    }
    retry_signal.emit(::asio::cancellation_type::terminal);  // ends a wait, or the next step
  }

  async_client::executor_type executor{};
};

void async_client::impl::complete_attempt(async_call* call, CURLcode code) { call->ended(code); }

async_client::impl::~impl() {
  *alive = nullptr;
  std::vector<std::shared_ptr<async_call>> snapshot;
  snapshot.reserve(calls.size());
  for (async_call* c : calls) snapshot.push_back(c->shared_from_this());
  calls.clear();
  for (const auto& c : snapshot) c->abandon();
  snapshot.clear();
  for (auto& [fd, w] : sockets) close_watch(*w);
  sockets.clear();
  for (const auto& m : shards) {
    (void)curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, nullptr);
    (void)curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, nullptr);
  }
  shards.clear();  // curl_multi_cleanup: closes the cached connections
  idle.clear();    // the easy handles, after the multi handles (libcurl's order)
}

async_client::async_client(const executor_type& ex, client_options options)
    : impl_(std::make_unique<impl>(ex, std::move(options), nullptr, nullptr)) {}

async_client::async_client(const executor_type& ex, client_options options, clock& clk,
                           random_generator& random)
    : impl_(std::make_unique<impl>(ex, std::move(options), &clk, &random)) {}

async_client::~async_client() = default;

async_client::executor_type async_client::get_executor() const noexcept { return impl_->ex; }
const client_options& async_client::options() const noexcept { return impl_->setup->options; }
host_budgets& async_client::budgets() noexcept { return *impl_->setup->budgets; }
std::size_t async_client::in_flight() const noexcept { return impl_->calls.size(); }
std::size_t async_client::easy_handles() const noexcept { return impl_->easy_count; }

void async_client::start(std::unique_ptr<detail::result_handler> handler, request req,
                         const call_options& call, ::asio::cancellation_slot slot) {
  impl& self = *impl_;
  auto state = std::make_shared<async_call>(self, std::move(req));
  state->executor = self.ex;
  state->plan = self.planner.plan(state->req);  // throws std::invalid_argument: nothing started
  state->has_key = state->plan.key_field.has_value();
  state->report.emplace(self.setup->options, state->plan);
  state->retry.emplace(
      retrier(self.setup->policy, *self.setup->clk, *self.setup->random, *state->plan.budget)
          .on_retry(async_call::retry_hook{state.get()}));
  state->handler = std::move(handler);
  if (slot.is_connected()) {
    state->caller_slot = slot;
    slot.template emplace<async_call::forward_cancel>(state.get());
  }
  self.calls.insert(state.get());
  async_call& c = *state;
  async_retry(*c.retry, self.ex, async_call::attempt_op{&c}, async_call::classify_op{&c}, call,
              ::asio::bind_cancellation_slot(c.retry_signal.slot(),
                                             async_call::completion{std::move(state)}));
}

}  // namespace stormguard::http
