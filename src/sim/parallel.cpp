// SPDX-License-Identifier: Apache-2.0
#include "stormguard/sim/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace stormguard::sim {

unsigned resolve_threads(unsigned requested, std::size_t count) noexcept {
  unsigned threads = requested != 0 ? requested : std::thread::hardware_concurrency();
  if (threads == 0) threads = 1;
  if (count < threads) threads = static_cast<unsigned>(std::max<std::size_t>(count, 1));
  return threads;
}

void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& task,
                  const progress_callback& progress) {
  if (count == 0) {
    if (progress) progress(0, 0);
    return;
  }
  const unsigned n = resolve_threads(threads, count);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards first_error, done and the progress callback
  std::exception_ptr first_error;
  std::size_t done = 0;
  std::size_t reported = 0;
  // About 200 progress calls per sweep, whatever its size.
  const std::size_t report_every = std::max<std::size_t>(1, count / 200);

  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      try {
        task(i);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
        return;
      }
      if (progress) {
        const std::lock_guard lock(mutex);
        ++done;
        if (done == count || done - reported >= report_every) {
          reported = done;
          progress(done, count);
        }
      }
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  try {
    for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  } catch (...) {
    // Could not start a thread (std::system_error): the threads started so far and this one
    // still finish every task.
  }
  worker();
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace stormguard::sim
