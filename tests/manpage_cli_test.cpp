// SPDX-License-Identifier: Apache-2.0
// The installed-tool files generated from the CLI's own definitions (cli/manpage.hpp): the man
// page renders with `man -l` without a warning and lists every subcommand, and the bash
// completion completes `stormguard si<TAB>` to `simulate` in a scripted bash.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"

#ifdef STORMGUARD_CLI_PATH

namespace {

using stormguard::test_support::program_run;
using stormguard::test_support::read_whole_file;
using stormguard::test_support::run_program;
using stormguard::test_support::stderr_mode;

const std::vector<std::string> k_subcommands = {"simulate", "exec",  "plan", "http",
                                                "policy",   "serve", "lab",  "tune"};

std::string generated(const std::string& flag, const std::string& name) {
  const std::string path = ::testing::TempDir() + name;
  const program_run r = run_program({STORMGUARD_CLI_PATH, flag, path}, stderr_mode::capture);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  return path;
}

// Runs `script` in bash (no profile, no rc file) and returns what it printed.
program_run bash(const std::string& script) {
  return run_program({"/bin/bash", "--noprofile", "--norc", "-c", script}, stderr_mode::capture);
}

TEST(ManPage, RendersWithManWithoutWarnings) {
  const std::string page = generated("--generate-man-page", "stormguard.1");
  // MANWIDTH fixes the layout; --warnings makes groff report every problem on stderr.
  const program_run r =
      bash("MANWIDTH=100 MANPAGER=cat PAGER=cat man --warnings -l '" + page + "'");
  EXPECT_EQ(r.err, "") << "man or groff warned";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = r.out;
  EXPECT_EQ(out.rfind("STORMGUARD(1)", 0), 0u) << out.substr(0, 800);
  for (const char* section :
       {"NAME", "SYNOPSIS", "DESCRIPTION", "SUBCOMMANDS", "EXIT STATUS", "FILES"}) {
    EXPECT_NE(out.find("\n" + std::string(section) + "\n"), std::string::npos) << section;
  }
  for (const std::string& sub : k_subcommands) {
    EXPECT_NE(out.find("stormguard " + sub + " "), std::string::npos) << sub;
  }
  // Options as typed, with their placeholders and help texts.
  EXPECT_NE(out.find("--idempotency-key"), std::string::npos);
  EXPECT_NE(out.find("--policy FILE[:NAME]"), std::string::npos);
  EXPECT_NE(out.find("policy check"), std::string::npos);
}

// The generated page names the docs' folder by the placeholder that `cmake --install` replaces
// with the prefix installed into (cli/man_docdir.cmake; the ctest test package.consumer checks
// the installed page and --help against a temporary prefix).
TEST(ManPage, NamesTheDocsByThePlaceholderTheInstallReplaces) {
  const std::string page = read_whole_file(generated("--generate-man-page", "docs.1"));
  EXPECT_NE(page.find("@STORMGUARD_DOC_ROOT@/"), std::string::npos);
  EXPECT_EQ(page.find("docs/"), std::string::npos) << "a path in the source tree";
}

TEST(HelpText, NamesNoPathInTheSourceTree) {
  for (const std::string& sub : k_subcommands) {
    const program_run r = run_program({STORMGUARD_CLI_PATH, sub, "--help"}, stderr_mode::capture);
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_EQ(r.out.find("docs/"), std::string::npos) << sub << ":\n" << r.out;
  }
}

// The words bash offers for the command line `words` (the last one being completed).
std::string completions(const std::string& script, const std::string& words) {
  const program_run r =
      bash("source '" + script + "' && COMP_WORDS=(" + words +
           ") && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && _stormguard && "
           "if ((${#COMPREPLY[@]})); then printf '%s\\n' \"${COMPREPLY[@]}\" | sort; fi");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

TEST(BashCompletion, CompletesSubcommandsOptionsAndFiles) {
  const std::string script = generated("--generate-bash-completion", "stormguard.bash");
  ASSERT_EQ(bash("bash -n '" + script + "'").exit_code, 0);
  EXPECT_EQ(completions(script, "stormguard si"), "simulate\n");
  EXPECT_EQ(completions(script, "stormguard p"), "plan\npolicy\n");
  EXPECT_EQ(completions(script, "stormguard policy c"), "check\n");
  EXPECT_EQ(completions(script, "stormguard simulate --pol"), "--policy\n");
  EXPECT_EQ(completions(script, "stormguard http --idem"), "--idempotency-key\n");
  EXPECT_EQ(completions(script, "stormguard --ver"), "--version\n");
  EXPECT_EQ(completions(script, "stormguard plan --seed ''"), "") << "a number: nothing to offer";
  EXPECT_EQ(completions(script, "stormguard plan --json --s"), "--samples\n--seed\n")
      << "a flag takes no value: options again after it";
  std::vector<std::string> expected = k_subcommands;
  std::sort(expected.begin(), expected.end());
  std::string expected_text;
  for (const std::string& sub : expected) expected_text += sub + "\n";
  const std::string sorted = completions(script, "stormguard ''");
  EXPECT_EQ(sorted, expected_text);
}

TEST(BashCompletion, CompletesFileNamesAfterAFileOption) {
  const std::string script = generated("--generate-bash-completion", "files.bash");
  const std::string dir = ::testing::TempDir() + "completion_dir";
  ASSERT_EQ(bash("mkdir -p '" + dir + "' && : > '" + dir + "/mypolicy.json'").exit_code, 0);
  EXPECT_EQ(completions(script, "stormguard simulate --policy '" + dir + "/myp'"),
            dir + "/mypolicy.json\n");
}

}  // namespace

#endif  // STORMGUARD_CLI_PATH
