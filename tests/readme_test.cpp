// SPDX-License-Identifier: Apache-2.0
// The README's code blocks must be excerpts of example programs that the tests build and run.
// A block whose first line is a comment naming a file (`// examples/x.cpp ...`) is checked here:
// every non-blank line of the block, without its indentation, must appear in that file, in order.
// With the CLI built, the lists of the docs are checked against its --help: the README's table
// of subcommands, docs/cli.md's sections (one per subcommand) and serve's scenarios.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trim(const std::string& line) {
  const auto first = line.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = line.find_last_not_of(" \t\r");
  return line.substr(first, last - first + 1);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct snippet {
  std::string file;                // the example it claims to come from
  std::vector<std::string> lines;  // trimmed, non-blank
};

std::vector<snippet> cpp_snippets(const std::string& readme) {
  std::vector<snippet> found;
  const auto lines = lines_of(readme);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]) != "```cpp" || i + 1 >= lines.size()) continue;
    const std::string header = trim(lines[i + 1]);
    snippet s;
    if (header.rfind("// examples/", 0) == 0) {
      s.file = header.substr(3, header.find(' ', 3) - 3);
    }
    std::size_t j = i + 2;
    for (; j < lines.size() && trim(lines[j]) != "```"; ++j) {
      if (!trim(lines[j]).empty()) s.lines.push_back(trim(lines[j]));
    }
    found.push_back(s);
    i = j;
  }
  return found;
}

TEST(ReadmeSnippets, EveryCppBlockNamesAnExample) {
  const auto snippets = cpp_snippets(read_file(STORMGUARD_SOURCE_DIR "/README.md"));
  ASSERT_FALSE(snippets.empty()) << "the README should open with a code example";
  for (const auto& s : snippets) {
    EXPECT_FALSE(s.file.empty()) << "a ```cpp block must start with // examples/<file>.cpp";
  }
}

// Every block of `doc` that names an example is, line by line and in order, in that example.
void expect_verbatim_excerpts(const std::string& doc) {
  for (const auto& s : cpp_snippets(read_file(STORMGUARD_SOURCE_DIR "/" + doc))) {
    if (s.file.empty()) continue;
    std::vector<std::string> example;
    for (const auto& line : lines_of(read_file(STORMGUARD_SOURCE_DIR "/" + s.file))) {
      example.push_back(trim(line));
    }
    std::size_t at = 0;
    for (const auto& line : s.lines) {
      while (at < example.size() && example[at] != line) ++at;
      ASSERT_LT(at, example.size())
          << s.file << " has no line (in " << doc << "'s order): " << line;
      ++at;
    }
  }
}

TEST(ReadmeSnippets, AreVerbatimExcerptsOfTheirExamples) { expect_verbatim_excerpts("README.md"); }

TEST(DocSnippets, AreVerbatimExcerptsOfTheirExamples) {
  const auto snippets = cpp_snippets(read_file(STORMGUARD_SOURCE_DIR "/docs/idempotency.md"));
  ASSERT_FALSE(snippets.empty());
  EXPECT_EQ(snippets.front().file, "examples/idempotent_handler.cpp");
  expect_verbatim_excerpts("docs/idempotency.md");
}

#ifdef STORMGUARD_CLI_PATH
// The README shows what `make run` prints; the block after the line that says so must be exactly
// what `stormguard simulate` prints today (the simulator is deterministic for its default seed).
TEST(ReadmeExcerpt, IsWhatSimulatePrints) {
  const auto readme = lines_of(read_file(STORMGUARD_SOURCE_DIR "/README.md"));
  std::size_t at = 0;
  while (at < readme.size() && readme[at].rfind("friday-night:", 0) != 0) ++at;
  ASSERT_LT(at, readme.size()) << "README has no `stormguard simulate` excerpt";
  std::string excerpt;
  for (; at < readme.size() && trim(readme[at]) != "```"; ++at) excerpt += readme[at] + "\n";

  const std::string out_path = ::testing::TempDir() + "readme_simulate.txt";
  const std::string command =
      std::string("\"") + STORMGUARD_CLI_PATH + "\" simulate > \"" + out_path + "\"";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_EQ(excerpt, read_file(out_path))
      << "update the README block with the output of build/bin/stormguard simulate";
}

// The README's table of subcommands ("## The command-line tool": one row per subcommand, its
// first cell starting with the subcommand's name) and its count ("has seven subcommands") say
// what `stormguard --help` lists, no more and no fewer.
std::vector<std::string> readme_subcommands(const std::vector<std::string>& readme) {
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at < readme.size() && readme[at] != "## The command-line tool") ++at;
  for (++at; at < readme.size() && readme[at].rfind("## ", 0) != 0; ++at) {
    const std::string& line = readme[at];
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(3, line.find('`', 3) - 3);
    const std::string name = cell.substr(0, cell.find(' '));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The subcommands `stormguard --help` lists: the lines of its "SUBCOMMANDS:" block.
std::vector<std::string> cli_subcommands(const std::string& help) {
  std::vector<std::string> names;
  const auto lines = lines_of(help);
  std::size_t at = 0;
  while (at < lines.size() && trim(lines[at]) != "SUBCOMMANDS:" &&
         trim(lines[at]) != "Subcommands:") {
    ++at;
  }
  // One line per subcommand, indented by two spaces; its description's continuation lines are
  // indented further; the block ends at a line that is not indented (the footer).
  for (++at; at < lines.size() && (lines[at].empty() || lines[at].front() == ' '); ++at) {
    const std::string& line = lines[at];
    if (line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ReadmeSubcommands, AreTheCliSubcommands) {
  const auto readme = lines_of(read_file(STORMGUARD_SOURCE_DIR "/README.md"));
  const std::string out_path = ::testing::TempDir() + "readme_help.txt";
  const std::string command =
      std::string("\"") + STORMGUARD_CLI_PATH + "\" --help > \"" + out_path + "\"";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto cli = cli_subcommands(read_file(out_path));
  ASSERT_GE(cli.size(), 7u) << "no SUBCOMMANDS block in stormguard --help";
  EXPECT_EQ(readme_subcommands(readme), cli)
      << "the README's table of subcommands (## The command-line tool) differs from --help";

  const std::vector<std::string> counts = {"zero", "one",    "two",   "three", "four",
                                           "five", "six",    "seven", "eight", "nine",
                                           "ten",  "eleven", "twelve"};
  ASSERT_LT(cli.size(), counts.size());
  const std::string sentence = "has " + counts[cli.size()] + " subcommands";
  bool found = false;
  for (const auto& line : readme) found = found || line.find(sentence) != std::string::npos;
  EXPECT_TRUE(found) << "the README should say `stormguard` " << sentence;
}

// docs/cli.md, the CLI's reference, has a section for each subcommand `stormguard --help` lists (a
// heading naming `stormguard NAME`, e.g. "## `stormguard plan`" or "... `stormguard policy
// check`"), and no section for a subcommand that --help does not list.
TEST(CliReference, HasASectionPerSubcommand) {
  const auto cli_md = lines_of(read_file(STORMGUARD_SOURCE_DIR "/docs/cli.md"));
  const std::string out_path = ::testing::TempDir() + "cli_md_help.txt";
  const std::string command =
      std::string("\"") + STORMGUARD_CLI_PATH + "\" --help > \"" + out_path + "\"";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto cli = cli_subcommands(read_file(out_path));
  ASSERT_GE(cli.size(), 7u) << "no SUBCOMMANDS block in stormguard --help";

  std::vector<std::string> sections;  // the NAME of every heading's `stormguard NAME...`
  for (const std::string& line : cli_md) {
    if (line.rfind("#", 0) != 0) continue;
    for (auto at = line.find("`stormguard "); at != std::string::npos;
         at = line.find("`stormguard ", at + 1)) {
      const std::size_t from = at + std::string("`stormguard ").size();
      const std::size_t to = line.find_first_of(" `", from);
      const std::string name = line.substr(from, to - from);
      if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
        sections.push_back(name);
      }
    }
  }
  std::sort(sections.begin(), sections.end());
  EXPECT_EQ(sections, cli) << "docs/cli.md's sections (`stormguard NAME` headings) differ from the "
                              "subcommands of stormguard --help";
}

// The scenarios docs/cli.md lists for `serve SCENARIO` are those `stormguard serve --help` lists.
TEST(CliReference, ServeListsTheScenariosServeHelpLists) {
  const std::string out_path = ::testing::TempDir() + "serve_help.txt";
  const std::string command =
      std::string("\"") + STORMGUARD_CLI_PATH + "\" serve --help > \"" + out_path + "\"";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string help = read_file(out_path);
  std::replace(help.begin(), help.end(), '\n', ' ');
  const std::string intro = "A built-in scenario (";
  const auto from = help.find(intro);
  ASSERT_NE(from, std::string::npos) << "serve --help lists no built-in scenarios";
  const auto to = help.find(')', from);
  std::vector<std::string> from_help;
  std::istringstream names(help.substr(from + intro.size(), to - from - intro.size()));
  for (std::string name; names >> name;) {
    if (!name.empty() && name.back() == ',') name.pop_back();
    from_help.push_back(name);
  }
  std::sort(from_help.begin(), from_help.end());
  ASSERT_GE(from_help.size(), 8u);

  // cli.md's row `| `SCENARIO` | a built-in time-series scenario by name (`a`, `b`, ...) or ...`
  // in the section of `stormguard serve`.
  const auto cli_md = lines_of(read_file(STORMGUARD_SOURCE_DIR "/docs/cli.md"));
  std::size_t at = 0;
  while (at < cli_md.size() && cli_md[at] != "## `stormguard serve`") ++at;
  while (at < cli_md.size() && cli_md[at].rfind("| `SCENARIO` |", 0) != 0) ++at;
  ASSERT_LT(at, cli_md.size()) << "docs/cli.md has no SCENARIO row for serve";
  const std::string& row = cli_md[at];
  const auto open = row.find("by name (");
  ASSERT_NE(open, std::string::npos) << row;
  const std::string listed = row.substr(open, row.find(')', open) - open);
  std::vector<std::string> from_docs;
  for (auto q = listed.find('`'); q != std::string::npos; q = listed.find('`', q + 1)) {
    const auto end = listed.find('`', q + 1);
    from_docs.push_back(listed.substr(q + 1, end - q - 1));
    q = end;
  }
  std::sort(from_docs.begin(), from_docs.end());
  EXPECT_EQ(from_docs, from_help) << "docs/cli.md's scenarios of serve differ from serve --help";
}
#endif

}  // namespace
