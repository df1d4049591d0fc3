// SPDX-License-Identifier: Apache-2.0
// The thread that runs lab::server's store calls (src/lab/charge_worker.hpp).
#include "lab/charge_worker.hpp"

#include <event2/event.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace stormguard::lab::detail {

// What the worker thread and the loop share. The worker holds it by shared_ptr, so an abandoned
// worker finds it alive when its call finally returns.
struct charge_worker::shared {
  std::mutex mutex;
  std::condition_variable wake_worker;
  std::condition_variable job_finished;
  std::deque<job> queue;                       // to run, in order
  std::vector<std::function<void()>> results;  // to run on the loop
  std::size_t max_queued = 0;
  bool stopping = false;
  bool running = false;  // a job runs now
  int pipe[2] = {-1, -1};
  event* readable = nullptr;  // loop thread only

  ~shared() {
    for (int& fd : pipe) {
      if (fd >= 0) ::close(fd);
    }
  }

  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      wake_worker.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      job j = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      std::function<void()> result;
      try {
        result = j();
      } catch (...) {  // the job's own errors are its answer; nothing else must end the thread
        result = nullptr;
      }
      j = nullptr;
      lock.lock();
      running = false;
      job_finished.notify_all();
      if (stopping) return;
      if (result) {
        results.push_back(std::move(result));
        const char byte = 1;
        while (::write(pipe[1], &byte, 1) < 0 && errno == EINTR) {
        }
      }
    }
  }

  static void on_readable(evutil_socket_t fd, short, void* arg) {
    auto& s = *static_cast<shared*>(arg);
    char drain[256];
    while (::read(fd, drain, sizeof drain) > 0) {
    }
    std::vector<std::function<void()>> ready;
    {
      const std::lock_guard lock(s.mutex);
      ready.swap(s.results);
    }
    for (auto& r : ready) r();
  }
};

charge_worker::charge_worker(event_base* base, std::size_t max_queued)
    : shared_(std::make_shared<shared>()) {
  shared& s = *shared_;
  s.max_queued = max_queued;
  if (::pipe2(s.pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "charge worker: pipe");
  }
  s.readable = event_new(base, s.pipe[0], EV_READ | EV_PERSIST, &shared::on_readable, &s);
  if (s.readable == nullptr || event_add(s.readable, nullptr) != 0) {
    throw std::system_error(ENOMEM, std::generic_category(), "charge worker: event");
  }
  std::thread([keep = shared_] { keep->run(); }).detach();
}

charge_worker::~charge_worker() { (void)stop(duration::zero()); }

bool charge_worker::post(job j) {
  shared& s = *shared_;
  {
    const std::lock_guard lock(s.mutex);
    if (s.stopping || s.queue.size() >= s.max_queued) return false;
    s.queue.push_back(std::move(j));
  }
  s.wake_worker.notify_one();
  return true;
}

bool charge_worker::stop(duration grace) noexcept {
  shared& s = *shared_;
  std::deque<job> dropped;
  std::vector<std::function<void()>> dropped_results;
  bool finished = true;
  {
    std::unique_lock lock(s.mutex);
    s.stopping = true;
    dropped.swap(s.queue);
    dropped_results.swap(s.results);
    s.wake_worker.notify_all();
    if (s.running) finished = s.job_finished.wait_for(lock, grace, [&] { return !s.running; });
  }
  if (s.readable != nullptr) event_free(std::exchange(s.readable, nullptr));
  // The thread is detached: it returns on its own once it sees `stopping` (at once when idle,
  // when its call returns otherwise) and releases its share of the state then.
  return finished;
}

}  // namespace stormguard::lab::detail
