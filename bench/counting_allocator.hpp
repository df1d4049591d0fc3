// SPDX-License-Identifier: Apache-2.0
// bench/counting_allocator.hpp: replaces the global operator new/delete with malloc/free and
// counts every allocation, so a benchmark can report allocations per operation. Include it in
// exactly one source file of a benchmark program (it defines the replacement functions).
#ifndef STORMGUARD_BENCH_COUNTING_ALLOCATOR_HPP
#define STORMGUARD_BENCH_COUNTING_ALLOCATOR_HPP

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace stormguard_bench {
// Every operator new call of the program since it started.
inline std::atomic<long> g_allocations{0};
}  // namespace stormguard_bench

// GCC's -Wmismatched-new-delete does not know that this operator new is malloc-based and warns
// on the free() below once both are inlined into a caller (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  stormguard_bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

#endif  // STORMGUARD_BENCH_COUNTING_ALLOCATOR_HPP
