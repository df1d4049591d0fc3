// SPDX-License-Identifier: Apache-2.0
// Internal: a mutex and a scoped lock that clang's thread-safety analysis understands.
//
// libstdc++'s std::mutex carries no `capability` attribute, so clang's -Wthread-safety checks
// nothing about the members it guards. stormguard's own classes use detail::mutex (the same
// std::mutex underneath, at the same cost) and annotate what it guards, in the style of Abseil's
// Mutex / MutexLock and ABSL_GUARDED_BY (absl/base/thread_annotations.h):
//
//   class counter {
//    public:
//     void add() {
//       const detail::lock hold(mutex_);
//       ++value_;                           // fine: mutex_ is held
//     }
//     int peek() const { return value_; }   // clang: error, reading value_ requires mutex_
//    private:
//     mutable detail::mutex mutex_;
//     int value_ STORMGUARD_GUARDED_BY(mutex_) = 0;
//   };
//
// The attributes are checked by clang with -Wthread-safety (the project's clang builds make it an
// error) and expand to nothing on other compilers. Analysis reference:
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#ifndef STORMGUARD_DETAIL_MUTEX_HPP
#define STORMGUARD_DETAIL_MUTEX_HPP

#include <mutex>

#if defined(__clang__)
#define STORMGUARD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STORMGUARD_THREAD_ANNOTATION(x)
#endif

/// The member is read and written only while the named capability (a detail::mutex) is held.
#define STORMGUARD_GUARDED_BY(x) STORMGUARD_THREAD_ANNOTATION(guarded_by(x))
/// What the pointer points to is accessed only while the named capability is held.
#define STORMGUARD_PT_GUARDED_BY(x) STORMGUARD_THREAD_ANNOTATION(pt_guarded_by(x))
/// The function must be called with the named capabilities held (and does not release them).
#define STORMGUARD_REQUIRES(...) STORMGUARD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// The function must be called without the named capabilities held (it acquires them).
#define STORMGUARD_EXCLUDES(...) STORMGUARD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// Turns the analysis off for one function (each use says why in a comment).
#define STORMGUARD_NO_THREAD_SAFETY_ANALYSIS STORMGUARD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace stormguard::detail {

/// std::mutex with clang's `capability` attribute. Not recursive. Meets BasicLockable and
/// Lockable, so std::condition_variable_any can wait on it directly (the analysis does not see
/// inside the wait, which releases and re-acquires the mutex before it returns).
/// Thread-safe, as a mutex is.
class STORMGUARD_THREAD_ANNOTATION(capability("mutex")) mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  /// Blocks until this thread holds the mutex.
  void lock() STORMGUARD_THREAD_ANNOTATION(acquire_capability()) { m_.lock(); }
  /// Releases the mutex, which this thread must hold.
  void unlock() STORMGUARD_THREAD_ANNOTATION(release_capability()) { m_.unlock(); }
  /// Takes the mutex if it is free; true when taken.
  [[nodiscard]] bool try_lock() STORMGUARD_THREAD_ANNOTATION(try_acquire_capability(true)) {
    return m_.try_lock();
  }

 private:
  std::mutex m_;
};

/// Holds a detail::mutex for its own lifetime (Abseil's MutexLock; std::lock_guard's role).
class STORMGUARD_THREAD_ANNOTATION(scoped_lockable) lock {
 public:
  /// Blocks until `m` is held.
  explicit lock(mutex& m) STORMGUARD_THREAD_ANNOTATION(acquire_capability(m)) : m_(m) { m_.lock(); }
  /// Adopts `m`, which this thread already holds (after a successful try_lock), and releases it
  /// at the end of the scope, as std::lock_guard(m, std::adopt_lock) does.
  lock(mutex& m, std::adopt_lock_t) STORMGUARD_THREAD_ANNOTATION(requires_capability(m)) : m_(m) {}
  /// Releases the mutex.
  ~lock() STORMGUARD_THREAD_ANNOTATION(release_capability()) { m_.unlock(); }
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;

 private:
  mutex& m_;
};

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_MUTEX_HPP
