// SPDX-License-Identifier: Apache-2.0
// stormguard: the launcher, the program users run. It reads argv[1] only and replaces itself
// (execve: the same process, so the PID, the signals, stdin/stdout/stderr and the exit status are
// the command's own) with one of the programs in <libexec>/stormguard/:
//
//   stormguard http URL     ->  stormguard-http http URL      (one per subcommand, each linking
//   stormguard plan ...     ->  stormguard-plan plan ...       only what its command runs)
//   stormguard --help, --version, no word or an unknown one, --generate-man-page FILE
//                           ->  stormguard-all ...            (every subcommand's definitions)
//
// argv and the environment are passed on unchanged, so each program parses the same command line
// as before. The programs are found from where this executable is (/proc/self/exe), through the
// relative path STORMGUARD_BIN_TO_PROGRAMS (<prefix>/bin -> <prefix>/libexec/stormguard; the build
// tree has the same layout), then in the configured folder STORMGUARD_PROGRAM_DIR.
//
// Its whole job is one execve, so it should cost next to nothing: on x86-64 and AArch64 Linux it
// is built freestanding (STORMGUARD_LAUNCHER_FREESTANDING: its own _start, four system calls, no
// C library), because the C library's start-up alone (its CPU feature and cache detection) costs
// about 0.7 ms of CPU on a virtual machine, where every `cpuid` traps: as much again as the whole
// difference this launcher exists to remove (docs/performance.md, "A command's start").
// Elsewhere, and in sanitizer builds, the same code runs on the C library.
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>

#ifndef STORMGUARD_CLI_COMMAND_NAMES
#error "cli/CMakeLists.txt defines STORMGUARD_CLI_COMMAND_NAMES, the subcommands' names"
#endif
#ifndef STORMGUARD_BIN_TO_PROGRAMS
#define STORMGUARD_BIN_TO_PROGRAMS "../libexec/stormguard"
#endif
#ifndef STORMGUARD_PROGRAM_DIR
#define STORMGUARD_PROGRAM_DIR "/usr/local/libexec/stormguard"
#endif

#ifndef STORMGUARD_LAUNCHER_FREESTANDING
#include <unistd.h>
#endif

namespace {

// The four system calls, as the kernel returns them: a result >= 0 or -errno.
#ifdef STORMGUARD_LAUNCHER_FREESTANDING
#if defined(__x86_64__)
long syscall3(long number, long a, long b, long c) {
  long result;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
  return result;
}
long syscall4(long number, long a, long b, long c, long d) {
  long result;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return result;
}
#elif defined(__aarch64__)
long syscall4(long number, long a, long b, long c, long d) {
  register long x8 __asm__("x8") = number;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
}
long syscall3(long number, long a, long b, long c) { return syscall4(number, a, b, c, 0); }
#else
#error "STORMGUARD_LAUNCHER_FREESTANDING is for x86-64 and AArch64 Linux"
#endif

long read_link(const char* path, char* out, size_t size) {
  return syscall4(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(path),
                  reinterpret_cast<long>(out), static_cast<long>(size));
}
long exec(const char* path, char** argv, char** envp) {
  return syscall3(SYS_execve, reinterpret_cast<long>(path), reinterpret_cast<long>(argv),
                  reinterpret_cast<long>(envp));
}
void write_all(const char* text, size_t size) {
  while (size > 0) {
    const long n = syscall3(SYS_write, 2, reinterpret_cast<long>(text), static_cast<long>(size));
    if (n == -EINTR) continue;
    if (n <= 0) return;  // nowhere left to say it
    text += n;
    size -= static_cast<size_t>(n);
  }
}
[[noreturn]] void exit_with(int status) {
  for (;;) (void)syscall3(SYS_exit_group, status, 0, 0);
}
#else
long read_link(const char* path, char* out, size_t size) {
  const ssize_t n = readlink(path, out, size);
  return n >= 0 ? n : -errno;
}
long exec(const char* path, char** argv, char** envp) {
  (void)execve(path, argv, envp);
  return -errno;
}
void write_all(const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = write(STDERR_FILENO, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to say it
    text += n;
    size -= static_cast<size_t>(n);
  }
}
[[noreturn]] void exit_with(int status) { _exit(status); }
#endif

constexpr const char* k_commands[] = {STORMGUARD_CLI_COMMAND_NAMES};

// Linux's PATH_MAX (a freestanding <limits.h> does not define it).
constexpr size_t k_path_size = 4096;

bool equal(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// Appends `text` at out[at...] (within `size`, the terminating zero included); returns the new
// length, or `size` when it did not fit.
size_t append(char* out, size_t at, size_t size, const char* text) {
  if (at >= size) return size;
  for (; *text != '\0'; ++text) {
    if (at + 1 >= size) return size;
    out[at++] = *text;
  }
  out[at] = '\0';
  return at;
}

const char* reason(long error) {
  switch (error) {
    case ENOENT:
      return "No such file or directory";
    case EACCES:
      return "Permission denied";
    case ENOEXEC:
      return "Exec format error";
    case ENOMEM:
      return "Cannot allocate memory";
    default:
      return "cannot execute";
  }
}

// "stormguard: error: cannot run PATH: REASON (is the installation complete?)", as
// cli/output.hpp writes errors; exit status 1 (a failure at run time).
[[noreturn]] void fail(const char* path, long error) {
  char line[k_path_size + 160];
  size_t n = append(line, 0, sizeof line, "stormguard: error: cannot run ");
  n = append(line, n, sizeof line, path);
  n = append(line, n, sizeof line, ": ");
  n = append(line, n, sizeof line, reason(error));
  n = append(line, n, sizeof line, " (is the installation complete?)\n");
  write_all(line, n < sizeof line ? n : sizeof line - 1);
  exit_with(1);
}

[[noreturn]] void launch(int argc, char** argv, char** envp) {
  // "stormguard-<argv[1]>" when argv[1] is exactly a subcommand's name, else "stormguard-all".
  const char* command = "all";
  if (argc > 1) {
    for (const char* name : k_commands) {
      if (equal(argv[1], name)) command = name;
    }
  }
  // <dir of this executable>/STORMGUARD_BIN_TO_PROGRAMS/stormguard-<command>
  char path[k_path_size];
  long error = -ENOENT;
  const long length = read_link("/proc/self/exe", path, sizeof path - 1);
  if (length > 0) {
    size_t n = static_cast<size_t>(length);
    while (n > 0 && path[n - 1] != '/') --n;
    path[n] = '\0';
    n = append(path, n, sizeof path, STORMGUARD_BIN_TO_PROGRAMS "/stormguard-");
    n = append(path, n, sizeof path, command);
    if (n < sizeof path) error = exec(path, argv, envp);  // returns only when it failed
  }
  if (error != -ENOENT) fail(path, -error);
  // The configured folder (the launcher copied out of its prefix).
  char configured[k_path_size];
  size_t n = append(configured, 0, sizeof configured, STORMGUARD_PROGRAM_DIR "/stormguard-");
  n = append(configured, n, sizeof configured, command);
  if (n < sizeof configured) error = exec(configured, argv, envp);
  if (error != -ENOENT || length <= 0) fail(configured, -error);
  fail(path, ENOENT);
}

}  // namespace

#ifdef STORMGUARD_LAUNCHER_FREESTANDING
// The compiler may call these for array and struct copies even in freestanding code.
extern "C" void* memset(void* to, int value, size_t size) {
  auto* p = static_cast<unsigned char*>(to);
  while (size-- > 0) *p++ = static_cast<unsigned char>(value);
  return to;
}
extern "C" void* memcpy(void* to, const void* from, size_t size) {
  auto* p = static_cast<unsigned char*>(to);
  const auto* q = static_cast<const unsigned char*>(from);
  while (size-- > 0) *p++ = *q++;
  return to;
}

// The entry point: the kernel leaves argc, argv[], 0, envp[], 0 on the stack.
extern "C" [[noreturn]] void stormguard_launcher_start(long* stack) {
  const int argc = static_cast<int>(stack[0]);
  char** argv = reinterpret_cast<char**>(stack + 1);
  launch(argc, argv, argv + argc + 1);
}
#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".global _start\n"
    "_start:\n"
    "  xor %ebp, %ebp\n"
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call stormguard_launcher_start\n"
    "  hlt\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n"
    ".global _start\n"
    "_start:\n"
    "  mov x29, #0\n"
    "  mov x30, #0\n"
    "  mov x0, sp\n"
    "  bl stormguard_launcher_start\n");
#endif
#else
extern char** environ;
int main(int argc, char** argv) { launch(argc, argv, environ); }
#endif
