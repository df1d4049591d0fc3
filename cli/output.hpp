// SPDX-License-Identifier: Apache-2.0
// Writing a subcommand's output and its diagnostics, shared by every subcommand and main.cpp.
//
//   stormguard::cli::report_error("exec", "no command to run");
//   // stderr: "stormguard exec: error: no command to run\n"
//   stormguard::cli::report_log("exec", "attempt 1 exited with status 3; retrying in 80ms");
//
// Diagnostics (logs, warnings, errors on stderr) are a side effect: a write that fails (stderr on
// a full disk or /dev/full, closed with `2>&-`, a pipe whose reader has gone) is ignored, so that
// it never changes what is retried or the exit status (as curl and the coreutils keep going).
// Output proper (a response body, a plan, a table on stdout) is checked with write_all: failing to
// write it is a run-time failure (exit 1).
#ifndef STORMGUARD_CLI_OUTPUT_HPP
#define STORMGUARD_CLI_OUTPUT_HPP

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::cli {

/// Writes `text` to `file` and flushes it; false (with errno set) if any of it was not written.
inline bool write_all(std::FILE* file, const std::string& text) {
  errno = 0;
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), file);
  const bool flushed = std::fflush(file) == 0;
  return written == text.size() && flushed && std::ferror(file) == 0;
}

/// strerror(error), or "unknown error" for 0.
inline std::string errno_text(int error) {
  return error != 0 ? std::strerror(error) : "unknown error";
}

/// The longest message from a library (a scenario file's error, an exception's what()) that a
/// diagnostic prints; see printable_message.
inline constexpr std::size_t k_max_library_message = 400;

/// `message` made safe to print when it comes from elsewhere and may embed a user's value as it
/// is (a path, a scenario name): every control byte and DEL as \xNN (an ANSI escape prints as
/// "\x1b[31m", NUL as "\x00"), and cut after `max_bytes` bytes with "... (N bytes)" (never inside
/// a UTF-8 sequence): stormguard::detail::escape_control with the library-message limit. The
/// messages stormguard writes itself quote values with stormguard::detail::quote_for_message
/// instead. Throws std::bad_alloc only.
[[nodiscard]] std::string printable_message(std::string_view message,
                                            std::size_t max_bytes = k_max_library_message);

/// Writes `text` as it is to standard error (file descriptor 2, unbuffered, bypassing stdio) and
/// ignores any failure: a short or failed write (ENOSPC, EBADF, EPIPE, EIO...) is dropped, never
/// retried forever, never reported. Never throws, and never raises SIGPIPE: the calling thread
/// blocks SIGPIPE for the write and discards one that the write caused (a SIGPIPE already pending
/// before is left alone). errno is preserved. Thread-safe (each call is one writev).
void write_diagnostic(std::string_view text) noexcept;

/// Writes "stormguard <command>: error: <message>\n" with write_diagnostic ("stormguard: error:
/// ..." when `command` is empty). `message` should quote what it echoes of the user's input
/// with stormguard::detail::quote_for_message. Never throws.
void report_error(std::string_view command, std::string_view message) noexcept;

/// Writes "stormguard <command>: warning: <message>\n" with write_diagnostic. Never throws.
void report_warning(std::string_view command, std::string_view message) noexcept;

/// Writes "stormguard <command>: <message>\n" with write_diagnostic: a log line (a retry, where a
/// file was written). Never throws.
void report_log(std::string_view command, std::string_view message) noexcept;

/// The one-line summary of a call that `--stats` prints (http, exec), also on success:
/// "stats: attempts 3, retries 2, reason success, slept 300ms" (retries = attempts - 1, none
/// below zero; slept in stormguard's duration syntax). Throws std::bad_alloc only.
[[nodiscard]] std::string stats_summary(int attempts, end_reason reason, duration slept);

/// Writes stats_summary as a log line ("stormguard <command>: stats: ...\n") with
/// write_diagnostic: a broken stderr is ignored and never changes the outcome. Never throws.
void report_stats(std::string_view command, int attempts, end_reason reason,
                  duration slept) noexcept;

/// Reopens each of the standard file descriptors 0, 1 and 2 that is closed on /dev/null (stdin
/// read-only, the others write-only). Called first thing in main(): with `2>&-`, the first file
/// stormguard opened (a scenario, a CSV file, the signal pipe of `exec`) would otherwise get
/// descriptor 2, and diagnostics would be written into it. A command run by `exec` then inherits
/// /dev/null instead of a closed descriptor. Never throws; a descriptor that cannot be reopened
/// stays closed.
void reopen_closed_standard_streams() noexcept;

/// Writes `text` into the file `path` (created or truncated); false after reporting the system's
/// reason as "stormguard COMMAND: error: cannot write "PATH": REASON" (prefixed by "FLAG: " when
/// `flag`, the option that named the file, is given).
bool write_text_file(std::string_view command, const std::filesystem::path& path,
                     const std::string& text, std::string_view flag = "");

/// The CSV file of a strategy or a scenario (`name` + `suffix`): every '/' (a gRPC
/// service/method, or a hostile name such as "../../x") and control byte as '_', so that the file
/// always stays in the --csv directory.
[[nodiscard]] std::string csv_file_name(std::string name, std::string_view suffix = ".csv");

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_OUTPUT_HPP
