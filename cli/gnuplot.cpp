// SPDX-License-Identifier: Apache-2.0
// Running gnuplot on a script (cli/gnuplot.hpp).
#include "gnuplot.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "output.hpp"
#include "process.hpp"

namespace stormguard::cli {

// Runs gnuplot (found on PATH) on `script` through a temporary file (rather than a pipe: a gnuplot
// that exits early cannot raise SIGPIPE here), as a child process (process.hpp). nullopt on
// success, or why not: gnuplot missing (with the package to install) or its exit status
// (gnuplot's own messages go to stderr).
std::optional<std::string> run_gnuplot(const std::string& script) {
  std::string path = (std::filesystem::temp_directory_path() / "stormguard-plot-XXXXXX").string();
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return "cannot create a temporary file for gnuplot: " + errno_text(errno);
  path = name.data();
  std::FILE* file = ::fdopen(fd, "wb");
  bool ok = file != nullptr && write_all(file, script);
  if (file != nullptr) ok = std::fclose(file) == 0 && ok;
  if (!ok) {
    ::unlink(path.c_str());
    return "cannot write the gnuplot script to " + path;
  }
  interrupt_forwarder forwarder;
  const child_status status =
      run_process({"gnuplot", path}, duration::max(), std::chrono::seconds(2), forwarder);
  ::unlink(path.c_str());
  if (status.how == child_status::kind::spawn_failed) {
    return "gnuplot not found on PATH (install the Debian package gnuplot-nox, e.g. with "
           "scripts/bootstrap)";
  }
  if (status.exit_status() != 0) {
    return fmt::format("gnuplot failed (exit status {})", status.exit_status());
  }
  return std::nullopt;
}

}  // namespace stormguard::cli
