// SPDX-License-Identifier: Apache-2.0
// The number of open descriptors of this process (Linux: /proc/self/fd), for tests that check
// that a call leaves no connection behind.
#ifndef STORMGUARD_TESTS_SUPPORT_OPEN_FDS_HPP
#define STORMGUARD_TESTS_SUPPORT_OPEN_FDS_HPP

#include <dirent.h>

namespace stormguard::test_support {

/// Open descriptors of this process, or -1 when /proc/self/fd cannot be read.
inline int open_fds() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;  // the directory's own descriptor
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_OPEN_FDS_HPP
