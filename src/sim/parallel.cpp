// SPDX-License-Identifier: Apache-2.0
#include "stormguard/sim/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "stormguard/detail/mutex.hpp"

namespace stormguard::sim {

namespace {

// What the workers of one parallel_for share besides the atomics.
struct sweep_state {
  stormguard::detail::mutex mutex;  // also serialises the progress callback
  std::exception_ptr first_error STORMGUARD_GUARDED_BY(mutex);
  std::size_t done STORMGUARD_GUARDED_BY(mutex) = 0;
  std::size_t reported STORMGUARD_GUARDED_BY(mutex) = 0;
};

}  // namespace

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
  sweep_state state;
  // About 200 progress calls per sweep, whatever its size.
  const std::size_t report_every = std::max<std::size_t>(1, count / 200);

  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      try {
        task(i);
      } catch (...) {
        const stormguard::detail::lock hold(state.mutex);
        if (!state.first_error) state.first_error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
        return;
      }
      if (progress) {
        const stormguard::detail::lock hold(state.mutex);
        ++state.done;
        if (state.done == count || state.done - state.reported >= report_every) {
          state.reported = state.done;
          progress(state.done, count);
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
  const stormguard::detail::lock hold(state.mutex);
  if (state.first_error) std::rethrow_exception(state.first_error);
}

}  // namespace stormguard::sim
