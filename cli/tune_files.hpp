// SPDX-License-Identifier: Apache-2.0
// The files `stormguard tune` writes (--out, --export, --write-scenario, --plot), written all or
// none. Before the search a temporary file is created beside each target and removed again (which
// proves that the folder takes a file, before minutes of searching, and leaves nothing behind if
// the search is interrupted); after it, each text goes into its temporary file, and only when
// every one is written are they renamed over their targets (a rename within one folder replaces
// the target whole). Whatever is not renamed is removed. Not thread-safe: one command's outputs.
#ifndef STORMGUARD_CLI_TUNE_FILES_HPP
#define STORMGUARD_CLI_TUNE_FILES_HPP

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stormguard::cli {

class staged_files {
 public:
  staged_files() = default;
  staged_files(const staged_files&) = delete;
  staged_files& operator=(const staged_files&) = delete;
  ~staged_files();

  /// Adds the output of `flag` at `path`; a usage error ("--out ...") when `path` is "-" (standard
  /// output carries the report) or names the same file as an output added before.
  [[nodiscard]] std::optional<std::string> add(const std::string& flag, const std::string& path);

  /// Checks that each output's temporary file can be created (created and removed at once);
  /// false, after an error message naming the flag and the path, when one cannot.
  [[nodiscard]] bool prepare(std::string_view command);

  /// The temporary file of `flag`'s output (a program such as gnuplot may write it).
  [[nodiscard]] std::filesystem::path temporary(std::string_view flag) const;

  /// Writes `text` into the temporary file of `flag`'s output and marks it for commit; false
  /// after an error message.
  [[nodiscard]] bool write(std::string_view command, std::string_view flag,
                           const std::string& text);
  /// Marks `flag`'s output for commit (its temporary file was written by another program).
  void mark_written(std::string_view flag);

  /// Renames every output marked for commit over its target; false after an error message.
  [[nodiscard]] bool commit(std::string_view command);

  /// Removes every temporary file not renamed yet.
  void discard() noexcept;

 private:
  struct output {
    std::string flag;
    std::filesystem::path target;
    std::filesystem::path temporary;
    bool prepared = false;  // prepare() found that the temporary file can be created
    bool renamed = false;   // commit() renamed it over the target
    bool written = false;
  };
  output* find(std::string_view flag);
  std::vector<output> outputs_;
};

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_TUNE_FILES_HPP
