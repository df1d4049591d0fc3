// SPDX-License-Identifier: Apache-2.0
// A negative compile test: clang's -Werror=thread-safety must reject reading a member
// annotated STORMGUARD_GUARDED_BY without holding its mutex. Built twice by ctest
// (tests/CMakeLists.txt): with STORMGUARD_HOLD_LOCK defined it must compile (the control, so a
// broken command line cannot pass for a rejection), without it it must fail.
#include "stormguard/detail/mutex.hpp"

namespace {

class counter {
 public:
  void add() {
    const stormguard::detail::lock hold(mutex_);
    ++value_;
  }
  int peek() {
#ifdef STORMGUARD_HOLD_LOCK
    const stormguard::detail::lock hold(mutex_);
#endif
    return value_;  // without the lock: "reading variable 'value_' requires holding mutex"
  }

 private:
  stormguard::detail::mutex mutex_;
  int value_ STORMGUARD_GUARDED_BY(mutex_) = 0;
};

}  // namespace

int main() {
  counter c;
  c.add();
  return c.peek() == 1 ? 0 : 1;
}
