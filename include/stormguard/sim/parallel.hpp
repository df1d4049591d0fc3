// SPDX-License-Identifier: Apache-2.0
/// \file
/// Running independent simulations on several threads, with results
/// that do not depend on the number of threads, and progress reporting for long sweeps.
///
/// Every sweep of the simulator (brooker-occ's clients × algorithms × trials, the metastable load
/// sweep) is a list of independent runs, each seeded from its own index. `parallel_for` runs
/// task(i) for every index; each task writes only its own result slot, and the caller reduces the
/// slots in index order afterwards, so the output is byte-identical for 1 thread or 64.
///
/// \code{.cpp}
///  std::vector<double> out(n);
///  stormguard::sim::parallel_for(n, 0, [&](std::size_t i) { out[i] = run(i); });
/// \endcode
#ifndef STORMGUARD_SIM_PARALLEL_HPP
#define STORMGUARD_SIM_PARALLEL_HPP

#include <cstddef>
#include <functional>

#include "stormguard/export.hpp"

namespace stormguard::sim {

/// Called as progress(done, total) while a sweep runs: `done` of `total` runs have finished.
/// Called from the worker threads, one call at a time (under a lock), at most about 200 times
/// per sweep, and once with done == total at the end. An empty function is never called.
using progress_callback = std::function<void(std::size_t done, std::size_t total)>;

/// The number of threads `parallel_for` uses for `requested` (0 = one per hardware thread, as
/// std::thread::hardware_concurrency() reports, at least 1) and `count` tasks: never more threads
/// than tasks, at least 1.
[[nodiscard]] STORMGUARD_EXPORT unsigned resolve_threads(unsigned requested,
                                                         std::size_t count) noexcept;

/// Runs task(i) once for every i in [0, count) on resolve_threads(threads, count) threads (the
/// calling thread is one of them); tasks are handed out in index order, one at a time. Returns
/// when all have finished. If a task throws, the remaining tasks are skipped and the first
/// exception (in time) is rethrown in the calling thread after every thread has stopped.
/// `task` must be safe to call concurrently for distinct indices. Thread-safe.
STORMGUARD_EXPORT void parallel_for(std::size_t count, unsigned threads,
                                    const std::function<void(std::size_t)>& task,
                                    const progress_callback& progress = {});

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_PARALLEL_HPP
