// SPDX-License-Identifier: Apache-2.0
// The thread that runs lab::server's store calls (src/lab/charge_worker.hpp).
#include "lab/charge_worker.hpp"

#include <event2/event.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "stormguard/detail/mutex.hpp"

namespace stormguard::lab::detail {

// What the worker thread and the loop share. The worker holds it by shared_ptr, so an abandoned
// worker finds it alive when its call finally returns.
struct charge_worker::shared {
  stormguard::detail::mutex mutex;
  // condition_variable_any waits on mutex itself (it releases and re-acquires it).
  std::condition_variable_any wake_worker;
  std::condition_variable_any job_finished;
  std::deque<job> queue STORMGUARD_GUARDED_BY(mutex);                       // to run, in order
  std::vector<std::function<void()>> results STORMGUARD_GUARDED_BY(mutex);  // to run on the loop
  std::size_t max_queued = 0;  // set before the thread starts, then read only
  bool stopping STORMGUARD_GUARDED_BY(mutex) = false;
  bool running STORMGUARD_GUARDED_BY(mutex) = false;  // a job runs now
  int pipe[2] = {-1, -1};
  event* readable = nullptr;  // loop thread only

  ~shared() {
    for (int& fd : pipe) {
      if (fd >= 0) ::close(fd);
    }
  }

  void run() STORMGUARD_EXCLUDES(mutex) {
    mutex.lock();
    while (true) {
      while (!stopping && queue.empty()) wake_worker.wait(mutex);
      if (stopping) break;
      job j = std::move(queue.front());
      queue.pop_front();
      running = true;
      mutex.unlock();
      std::function<void()> result;
      try {
        result = j();
      } catch (...) {  // the job's own errors are its answer; nothing else must end the thread
        result = nullptr;
      }
      j = nullptr;
      mutex.lock();
      running = false;
      job_finished.notify_all();
      if (stopping) break;
      if (result) {
        results.push_back(std::move(result));
        const char byte = 1;
        while (::write(pipe[1], &byte, 1) < 0 && errno == EINTR) {
        }
      }
    }
    mutex.unlock();
  }

  static void on_readable(evutil_socket_t fd, short, void* arg) {
    auto& s = *static_cast<shared*>(arg);
    char drain[256];
    while (::read(fd, drain, sizeof drain) > 0) {
    }
    std::vector<std::function<void()>> ready;
    {
      const stormguard::detail::lock hold(s.mutex);
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
  thread_ = std::thread([keep = shared_] { keep->run(); });
}

charge_worker::~charge_worker() { (void)stop(duration::zero()); }

bool charge_worker::post(job j) {
  shared& s = *shared_;
  {
    const stormguard::detail::lock hold(s.mutex);
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
    const stormguard::detail::lock hold(s.mutex);
    s.stopping = true;
    dropped.swap(s.queue);
    dropped_results.swap(s.results);
    s.wake_worker.notify_all();
    if (s.running) {
      finished = s.job_finished.wait_for(s.mutex, grace,
                                         [&]() STORMGUARD_REQUIRES(s.mutex) { return !s.running; });
    }
  }
  if (s.readable != nullptr) event_free(std::exchange(s.readable, nullptr));
  // Idle, it returns at once now that it sees `stopping`: joined. Running a job past the grace,
  // it is detached: it returns on its own when its call does and releases its share of the state
  // then.
  if (thread_.joinable()) {
    try {
      if (finished) thread_.join();
    } catch (const std::system_error&) {  // not expected (stop() runs on the loop's thread)
    }
    if (thread_.joinable()) thread_.detach();
  }
  return finished;
}

}  // namespace stormguard::lab::detail
