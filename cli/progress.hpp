// SPDX-License-Identifier: Apache-2.0
// The progress bar of the long-running commands (simulate, lab) on stderr.
#ifndef STORMGUARD_CLI_PROGRESS_HPP
#define STORMGUARD_CLI_PROGRESS_HPP

#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <utility>

#include "output.hpp"
#include "stormguard/sim/parallel.hpp"

namespace stormguard::cli {

// A progress bar on stderr, drawn only when stderr is a terminal: "\r[#####    ]  42% label".
// Cleared when the work is done, so that nothing of it stays on the screen.
class progress_bar {
 public:
  explicit progress_bar(std::string label)
      : label_(std::move(label)), enabled_(::isatty(STDERR_FILENO) == 1) {}

  [[nodiscard]] sim::progress_callback callback() {
    if (!enabled_) return {};
    return [this](std::size_t done, std::size_t total) { draw(done, total); };
  }

 private:
  void draw(std::size_t done, std::size_t total) {
    constexpr std::size_t k_width = 30;
    const std::size_t filled = total == 0 ? k_width : done * k_width / total;
    // A diagnostic like any other: a failed write to stderr is ignored (cli/output.hpp).
    if (done >= total) {
      write_diagnostic(fmt::format("\r{:{}}\r", "", k_width + 12 + label_.size()));
    } else {
      write_diagnostic(fmt::format("\r[{}{}] {:3}% {}", std::string(filled, '#'),
                                   std::string(k_width - filled, ' '),
                                   total == 0 ? 100 : done * 100 / total, label_));
    }
  }

  std::string label_;
  bool enabled_;
};

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_PROGRESS_HPP
