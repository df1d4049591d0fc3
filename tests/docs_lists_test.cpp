// SPDX-License-Identifier: Apache-2.0
// The docs' lists of built-in names stay true: every line of README.md and docs/*.md that lists
// the built-in scenarios (a line naming `no-incident` and `metastable-slowdown`, as code) names
// every one of them. A scenario added to the library without its docs fails here; `--help` takes
// its list from the same function.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_names(const std::string& joined) {
  std::vector<std::string> names;
  std::stringstream in(joined);
  std::string name;
  while (std::getline(in, name, ',')) {
    const auto first = name.find_first_not_of(' ');
    names.push_back(name.substr(first));
  }
  return names;
}

std::vector<fs::path> doc_files() {
  std::vector<fs::path> files{fs::path(STORMGUARD_SOURCE_DIR) / "README.md"};
  for (const auto& entry : fs::directory_iterator(fs::path(STORMGUARD_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  return files;
}

// Every line that mentions both markers (as `code`) names each of `names` as `code`; returns
// how many such lines there were.
int check_lists(const std::vector<std::string>& names, const std::string& marker_a,
                const std::string& marker_b) {
  int lists = 0;
  for (const fs::path& file : doc_files()) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.find("`" + marker_a + "`") == std::string::npos ||
          line.find("`" + marker_b + "`") == std::string::npos) {
        continue;
      }
      ++lists;
      for (const std::string& name : names) {
        EXPECT_NE(line.find("`" + name + "`"), std::string::npos)
            << file.filename().string() << ":" << number << " lists the built-ins without `" << name
            << "`";
      }
    }
  }
  return lists;
}

TEST(DocsLists, EveryListOfBuiltInScenariosNamesThemAll) {
  const auto names = split_names(stormguard::sim::builtin_scenario_names());
  ASSERT_GE(names.size(), 8u);
  EXPECT_GE(check_lists(names, "no-incident", "metastable-slowdown"), 2);
}

}  // namespace
