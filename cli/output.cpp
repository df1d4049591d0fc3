// SPDX-License-Identifier: Apache-2.0
// Diagnostics that never change the outcome (see output.hpp).
#include "output.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::cli {

namespace {

// Writes the pieces in one writev (and the rest after a short write), ignoring failures.
void write_pieces(iovec* pieces, int count) noexcept {
  const int saved_errno = errno;
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  (void)::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  sigset_t old_mask;
  const bool blocked = ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask) == 0;

  bool broken_pipe = false;
  while (count > 0) {
    const ssize_t n = ::writev(STDERR_FILENO, pieces, count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_pipe = n < 0 && errno == EPIPE;
      break;
    }
    // Skip what was written; go on with the rest (a pipe or terminal may take part of it).
    auto left = static_cast<std::size_t>(n);
    while (count > 0 && left >= pieces->iov_len) {
      left -= pieces->iov_len;
      ++pieces;
      --count;
    }
    if (count > 0) {
      pieces->iov_base = static_cast<char*>(pieces->iov_base) + left;
      pieces->iov_len -= left;
    }
  }

  if (blocked) {
    if (broken_pipe && !was_pending) {
      // The write raised SIGPIPE for this thread while it was blocked: take it off.
      const timespec zero{};
      while (::sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    (void)::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  }
  errno = saved_errno;
}

iovec piece(std::string_view text) noexcept {
  return iovec{const_cast<char*>(text.data()), text.size()};
}

void report(std::string_view command, std::string_view level, std::string_view message) noexcept {
  // Every diagnostic goes through the one redaction helper: a password in a store's URL or
  // conninfo, URL userinfo, a credential header's value never reach stderr.
  std::string safe;
  try {
    safe = redact(message);
  } catch (...) {  // std::bad_alloc: say nothing rather than something unredacted
    safe = "(message left out: out of memory)";
  }
  iovec pieces[] = {piece("stormguard"), piece(command.empty() ? "" : " "),
                    piece(command),      piece(": "),
                    piece(level),        piece(safe),
                    piece("\n")};
  write_pieces(pieces, static_cast<int>(std::size(pieces)));
}

}  // namespace

std::string printable_message(std::string_view message, std::size_t max_bytes) {
  return detail::escape_control(message, max_bytes);  // the one implementation, in the core
}

void write_diagnostic(std::string_view text) noexcept {
  iovec pieces[] = {piece(text)};
  write_pieces(pieces, 1);
}

void report_error(std::string_view command, std::string_view message) noexcept {
  report(command, "error: ", message);
}

void report_warning(std::string_view command, std::string_view message) noexcept {
  report(command, "warning: ", message);
}

void report_log(std::string_view command, std::string_view message) noexcept {
  report(command, "", message);
}

std::string stats_summary(int attempts, end_reason reason, duration slept) {
  const int retries = attempts > 1 ? attempts - 1 : 0;
  return "stats: attempts " + std::to_string(attempts) + ", retries " + std::to_string(retries) +
         ", reason " + std::string(to_string(reason)) + ", slept " + format_duration(slept);
}

void report_stats(std::string_view command, int attempts, end_reason reason,
                  duration slept) noexcept {
  try {
    report_log(command, stats_summary(attempts, reason, slept));
  } catch (...) {
    // std::bad_alloc: a diagnostic, dropped like a failed write.
  }
}

void reopen_closed_standard_streams() noexcept {
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free descriptor: `fd`, since those below it are open by now.
    const int opened = ::open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);
  }
}

bool write_text_file(std::string_view command, const std::filesystem::path& path,
                     const std::string& text, std::string_view flag) {
  const std::string prefix = flag.empty() ? std::string() : std::string(flag) + ": ";
  errno = 0;
  std::FILE* file = std::fopen(path.string().c_str(), "wb");
  if (file == nullptr) {
    report_error(command, prefix + "cannot write " + detail::quote_for_message(path.string()) +
                              ": " + errno_text(errno));
    return false;
  }
  bool ok = write_all(file, text);
  int error = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok)
    report_error(command, prefix + "cannot write " + detail::quote_for_message(path.string()) +
                              ": " + errno_text(error));
  return ok;
}

std::string csv_file_name(std::string name, std::string_view suffix) {
  for (char& c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
  }
  return name + std::string(suffix);
}

}  // namespace stormguard::cli
