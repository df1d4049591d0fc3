// Writing a subcommand's output and describing errno, shared by the subcommands.
#ifndef STORMGUARD_CLI_OUTPUT_HPP
#define STORMGUARD_CLI_OUTPUT_HPP

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

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

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_OUTPUT_HPP
