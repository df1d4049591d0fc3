// SPDX-License-Identifier: Apache-2.0
// `stormguard tune`'s output files, written all or none (tune_files.hpp).
#include "tune_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "output.hpp"
#include "stormguard/detail/format.hpp"

namespace stormguard::cli {

namespace {

namespace fs = std::filesystem;

// The path as the user gave it, quoted for a message.
std::string quoted(const fs::path& p) { return detail::quote_for_message(p.string()); }

// Whether a and b name one file: the same absolute path once normalised, or, when both exist,
// the same file (a link or another spelling).
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const fs::path x = fs::absolute(a, ec).lexically_normal();
  const fs::path y = fs::absolute(b, ec).lexically_normal();
  if (x == y) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

}  // namespace

staged_files::~staged_files() { discard(); }

std::optional<std::string> staged_files::add(const std::string& flag, const std::string& path) {
  if (path == "-") {
    return fmt::format(
        "{} -: standard output carries the report; give a file name (--json prints the report "
        "as JSON, the policy file included)",
        flag);
  }
  for (const output& o : outputs_) {
    if (same_file(o.target, path)) {
      return fmt::format("{} and {} name the same file {}: give each its own", o.flag, flag,
                         detail::quote_for_message(path));
    }
  }
  outputs_.push_back({flag, fs::path(path), {}, false, false});
  return std::nullopt;
}

bool staged_files::prepare(std::string_view command) {
  for (output& o : outputs_) {
    std::error_code ec;
    if (fs::is_directory(o.target, ec)) {
      report_error(command,
                   fmt::format("{}: cannot write {}: it is a folder", o.flag, quoted(o.target)));
      discard();
      return false;
    }
    // A file that exists must take writing, as fopen would require (a rename would not).
    errno = 0;
    if (fs::exists(o.target, ec) && ::access(o.target.c_str(), W_OK) != 0) {
      report_error(command, fmt::format("{}: cannot write {}: {}", o.flag, quoted(o.target),
                                        errno_text(errno)));
      discard();
      return false;
    }
    const fs::path name = o.target.filename();
    o.temporary = o.target.parent_path() /
                  fmt::format(".{}.tmp-{}", name.string(), static_cast<long>(::getpid()));
    errno = 0;
    const int fd = ::open(o.temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
      report_error(command, fmt::format("{}: cannot write {}: {}", o.flag, quoted(o.target),
                                        errno_text(errno)));
      discard();
      return false;
    }
    // A probe: the folder takes the file. Removed at once, so that a search interrupted (Ctrl-C)
    // leaves nothing behind; write() creates it again.
    ::close(fd);
    ::unlink(o.temporary.c_str());
    o.prepared = true;
  }
  return true;
}

staged_files::output* staged_files::find(std::string_view flag) {
  for (output& o : outputs_) {
    if (o.flag == flag) return &o;
  }
  return nullptr;
}

fs::path staged_files::temporary(std::string_view flag) const {
  for (const output& o : outputs_) {
    if (o.flag == flag) return o.temporary;
  }
  return {};
}

bool staged_files::write(std::string_view command, std::string_view flag, const std::string& text) {
  output* o = find(flag);
  if (o == nullptr || !o->prepared) return false;
  // As write_text_file, with the error naming the target (the temporary file is ours).
  errno = 0;
  std::FILE* file = std::fopen(o->temporary.c_str(), "wb");
  bool ok = file != nullptr && write_all(file, text);
  int error = errno;
  if (file != nullptr && std::fclose(file) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    report_error(command, fmt::format("{}: cannot write {}: {}", flag, quoted(o->target),
                                      errno_text(error)));
    return false;
  }
  o->written = true;
  return true;
}

void staged_files::mark_written(std::string_view flag) {
  if (output* o = find(flag)) o->written = o->prepared;
}

bool staged_files::commit(std::string_view command) {
  for (output& o : outputs_) {
    if (!o.written) continue;
    std::error_code ec;
    fs::rename(o.temporary, o.target, ec);
    if (ec) {
      report_error(command,
                   fmt::format("{}: cannot write {}: {}", o.flag, quoted(o.target), ec.message()));
      discard();
      return false;
    }
    o.renamed = true;
  }
  discard();
  return true;
}

void staged_files::discard() noexcept {
  for (output& o : outputs_) {
    // Whatever wrote it (write() or a program such as gnuplot), a temporary file not renamed is
    // removed (nothing happens when there is none).
    if (!o.prepared || o.renamed) continue;
    std::error_code ec;
    fs::remove(o.temporary, ec);
    o.written = false;
  }
}

}  // namespace stormguard::cli
