// SPDX-License-Identifier: Apache-2.0
// The man page and the bash completion, generated from the CLI11 definitions (see manpage.hpp).
#include "manpage.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "command.hpp"
#include "output.hpp"

// The configured install folder of the docs, and the relative path from the installed programs'
// folder (<prefix>/libexec/stormguard) to it (cli/CMakeLists.txt).
#ifndef STORMGUARD_DOCDIR
#define STORMGUARD_DOCDIR "/usr/local/share/doc/stormguard"
#endif
#ifndef STORMGUARD_PROGRAM_TO_DOCDIR
#define STORMGUARD_PROGRAM_TO_DOCDIR "../../share/doc/stormguard"
#endif
// The build tree's programs folder and the source tree's docs/, which a program run from the
// build tree names (empty: not known).
#ifndef STORMGUARD_BUILD_PROGRAM_DIR
#define STORMGUARD_BUILD_PROGRAM_DIR ""
#endif
#ifndef STORMGUARD_SOURCE_DOCDIR
#define STORMGUARD_SOURCE_DOCDIR ""
#endif

namespace stormguard::cli {

namespace {

// The subcommands --help lists (a subcommand in the group "" is hidden).
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return !sub->get_group().empty(); });
}

// The options --help lists, positionals included.
std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return !o->get_group().empty(); });
}

bool takes_value(const CLI::Option& o) { return o.get_items_expected_max() > 0; }

// "-X, --request" (or "SCENARIO" for a positional).
std::string names_of(const CLI::Option& o) {
  if (o.get_positional() && o.get_lnames().empty() && o.get_snames().empty()) {
    // A positional shows its placeholder, or its name when CLI11's default ("TEXT") stands.
    const std::string type = o.get_type_name();
    std::string name = type.empty() || type == "TEXT" ? o.get_name() : type;
    for (char& c : name) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    return name;
  }
  std::string names;
  for (const std::string& s : o.get_snames()) names += (names.empty() ? "-" : ", -") + s;
  for (const std::string& s : o.get_lnames()) names += (names.empty() ? "--" : ", --") + s;
  return names;
}

// Text for roff: a backslash is \e, a hyphen \- (so that options are typed as shown), and a line
// that starts with '.' or '\'' is protected with \&.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

// Help text as one filled paragraph (its line breaks are CLI11's wrapping, not structure).
std::string filled(std::string_view text) {
  std::string one_line(text);
  for (char& c : one_line) c = c == '\n' ? ' ' : c;
  return roff(one_line);
}

void man_command(std::string& out, const CLI::App& app, const std::string& path) {
  std::string usage = "stormguard " + path;
  std::vector<const CLI::Option*> positionals;
  for (const CLI::Option* o : visible_options(app)) {
    if (o->get_positional() && o->get_lnames().empty() && o->get_snames().empty()) {
      positionals.push_back(o);
    }
  }
  const auto subs = visible_subcommands(app);
  usage += subs.empty() ? " [OPTIONS]" : " SUBCOMMAND";
  for (const CLI::Option* p : positionals) usage += " " + names_of(*p);
  out += ".SS \"" + roff(path) + "\"\n.B " + roff(usage) + "\n.PP\n" +
         filled(app.get_description()) + "\n";
  std::string group;
  for (const CLI::Option* o : visible_options(app)) {
    if (o->get_group() != group) {
      group = o->get_group();
      out += ".PP\n.I " + roff(group) + "\n";
    }
    const bool named = !o->get_lnames().empty() || !o->get_snames().empty();
    if (named && takes_value(*o) && !o->get_type_name().empty()) {
      // Bold names, then the value's placeholder in italics: "--policy FILE[:NAME]".
      out += ".TP\n.BI \"" + roff(names_of(*o)) + " \" \"" + roff(o->get_type_name()) + "\"\n";
    } else {
      out += ".TP\n.B \"" + roff(names_of(*o)) + "\"\n";
    }
    out += filled(o->get_description());
    if (!o->get_default_str().empty()) out += " (default " + roff(o->get_default_str()) + ")";
    out += "\n";
  }
  if (!app.get_footer().empty()) {
    out += ".PP\n.nf\n" + roff(app.get_footer()) + "\n.fi\n";
  }
  for (const CLI::App* sub : subs) man_command(out, *sub, path + " " + sub->get_name());
}

// Completion data of one command path ("", "policy", "policy check").
struct completion_entry {
  std::string path;
  std::vector<std::string> subcommands;
  std::vector<std::string> options;        // every name, "-X" and "--request"
  std::vector<std::string> file_options;   // options whose value is a file
  std::vector<std::string> dir_options;    // options whose value is a directory
  std::vector<std::string> value_options;  // other options that take a value
  bool file_positional = false;            // a positional that takes file names
};

bool contains(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

void collect(const CLI::App& app, const std::string& path, std::vector<completion_entry>& out) {
  completion_entry e;
  e.path = path;
  for (const CLI::App* sub : visible_subcommands(app)) e.subcommands.push_back(sub->get_name());
  for (const CLI::Option* o : visible_options(app)) {
    const std::string type = o->get_positional() ? names_of(*o) : o->get_type_name();
    const bool is_dir = contains(type, "DIR");
    const bool is_file =
        !is_dir && (contains(type, "FILE") || contains(type, "PATH") || contains(type, "SCENARIO"));
    if (o->get_lnames().empty() && o->get_snames().empty()) {
      if (is_file || is_dir) e.file_positional = true;
      continue;
    }
    std::vector<std::string> names;
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    for (const std::string& s : o->get_lnames()) names.push_back("--" + s);
    for (const std::string& n : names) {
      e.options.push_back(n);
      if (!takes_value(*o)) continue;
      (is_dir ? e.dir_options : is_file ? e.file_options : e.value_options).push_back(n);
    }
  }
  out.push_back(e);
  for (const CLI::App* sub : visible_subcommands(app)) {
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
}

std::string joined(const std::vector<std::string>& words, std::string_view separator) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : std::string(separator)) + w;
  return out;
}

// `case` patterns "path/-x"|"path/--xx" for the options of one entry.
std::string option_patterns(const completion_entry& e, const std::vector<std::string>& names) {
  std::vector<std::string> patterns;
  for (const std::string& n : names) patterns.push_back("\"" + e.path + "/" + n + "\"");
  return joined(patterns, "|");
}

}  // namespace

namespace {

std::string& doc_root() {
  static std::string root;
  return root;
}

// <dir of this executable>/STORMGUARD_PROGRAM_TO_DOCDIR when that folder exists; for a program
// of the build tree, the source tree's docs/; else the configured folder.
std::string installed_doc_root() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && !exe.empty()) {
    const std::filesystem::path docs =
        (exe.parent_path() / STORMGUARD_PROGRAM_TO_DOCDIR).lexically_normal();
    if (std::filesystem::is_directory(docs, ec)) return docs.string();
    const std::filesystem::path build_dir(STORMGUARD_BUILD_PROGRAM_DIR);
    const std::filesystem::path source_docs(STORMGUARD_SOURCE_DOCDIR);
    if (!build_dir.empty() && !source_docs.empty() &&
        std::filesystem::equivalent(exe.parent_path(), build_dir, ec) &&
        std::filesystem::is_directory(source_docs, ec)) {
      return source_docs.string();
    }
  }
  return STORMGUARD_DOCDIR;
}

}  // namespace

void init_doc_root(int argc, char** argv) {
  const bool man_page = argc == 3 && std::string_view(argv[1]) == "--generate-man-page";
  doc_root() = man_page ? std::string(k_doc_root_placeholder) : installed_doc_root();
}

std::string doc_path(std::string_view name) {
  if (doc_root().empty()) doc_root() = installed_doc_root();
  return doc_root() + "/" + std::string(name);
}

std::string man_page(const CLI::App& app, std::string_view version) {
  std::string out;
  out +=
      ".\\\" The manual page of stormguard, generated by `stormguard --generate-man-page` from\n";
  out += ".\\\" the command's own definitions. Do not edit.\n";
  out += ".TH STORMGUARD 1 \"\" \"stormguard " + roff(version) + "\" \"User Commands\"\n";
  out += ".SH NAME\nstormguard \\- " +
         filled(app.get_description().substr(app.get_description().find(": ") + 2)) + "\n";
  out += ".SH SYNOPSIS\n.B stormguard\n.I SUBCOMMAND\n[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n";
  out += ".br\n.B stormguard \\-\\-help\n.br\n.B stormguard \\-\\-version\n";
  std::string names;
  const auto subs = visible_subcommands(app);
  for (std::size_t i = 0; i < subs.size(); ++i) {
    names += (i == 0                 ? ""
              : i + 1 == subs.size() ? " and "
                                     : ", ") +
             std::string("\\fB") + roff(subs[i]->get_name()) + "\\fR";
  }
  out +=
      ".SH DESCRIPTION\n\\fBstormguard\\fR runs, plans and simulates retries with backoff, "
      "jitter and retry budgets. It has " +
      std::to_string(subs.size()) + " subcommands: " + names + ".\n.PP\n";
  out +=
      "Each subcommand's options are below; \\fBstormguard\\fR \\fISUBCOMMAND\\fR "
      "\\fB\\-\\-help\\fR prints the same. Durations take the suffixes ns, us, ms, s, m and "
      "h (250ms, 1.5s).\n";
  out += ".SH SUBCOMMANDS\n";
  for (const CLI::App* sub : subs) man_command(out, *sub, sub->get_name());
  out += ".SH EXIT STATUS\n.nf\n" + roff(app.get_footer()) + "\n.fi\n";
  out += ".SH FILES\n.TP\n.I " + roff(doc_path("")) +
         "\nThe guides: cli.md (every subcommand, its output and its exit statuses), "
         "policy.md (policy files), simulator.md, lab.md, http.md, budgets.md, idempotency.md, "
         "metrics.md, design.md (the formulas and their sources), using.md (the library in your "
         "project).\n";
  out += ".SH SEE ALSO\n.BR curl (1)\n";
  return out;
}

std::string bash_completion(const CLI::App& app) {
  std::vector<completion_entry> entries;
  collect(app, "", entries);
  std::string out;
  out +=
      "# bash completion for stormguard(1), generated by `stormguard --generate-bash-completion`\n";
  out += "# from the command's own definitions. Do not edit.\n";
  out += "_stormguard() {\n";
  out += "  local cur=${COMP_WORDS[COMP_CWORD]} prev=\"\" path=\"\" word i\n";
  out += "  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n";
  out += "  COMPREPLY=()\n";
  out += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
  out += "    word=${COMP_WORDS[i]}\n";
  out += "    # After \"--\" (exec): a command and its arguments.\n";
  out += "    if [[ ${word} == -- ]]; then\n";
  out += "      if ((i == COMP_CWORD - 1)); then\n";
  out += "        mapfile -t COMPREPLY < <(compgen -c -- \"${cur}\")\n";
  out += "      else\n";
  out += "        mapfile -t COMPREPLY < <(compgen -f -- \"${cur}\")\n";
  out += "      fi\n";
  out += "      return 0\n";
  out += "    fi\n";
  out += "    case \"${path}/${word}\" in\n";
  for (const completion_entry& e : entries) {
    for (const std::string& sub : e.subcommands) {
      const std::string next = e.path.empty() ? sub : e.path + " " + sub;
      out += "      \"" + e.path + "/" + sub + "\") path=\"" + next + "\" ;;\n";
    }
  }
  out += "    esac\n";
  out += "  done\n";
  out += "  case \"${path}/${prev}\" in\n";
  std::string file_patterns, dir_patterns, value_patterns;
  for (const completion_entry& e : entries) {
    const auto add = [&](std::string& to, const std::vector<std::string>& names) {
      if (names.empty()) return;
      to += (to.empty() ? "" : "|") + option_patterns(e, names);
    };
    add(file_patterns, e.file_options);
    add(dir_patterns, e.dir_options);
    add(value_patterns, e.value_options);
  }
  if (!file_patterns.empty()) {
    out += "    " + file_patterns + ")\n";
    out += "      mapfile -t COMPREPLY < <(compgen -f -- \"${cur}\")\n      return 0 ;;\n";
  }
  if (!dir_patterns.empty()) {
    out += "    " + dir_patterns + ")\n";
    out += "      mapfile -t COMPREPLY < <(compgen -d -- \"${cur}\")\n      return 0 ;;\n";
  }
  if (!value_patterns.empty()) {
    out += "    " + value_patterns + ")\n      return 0 ;;  # a value: nothing to offer\n";
  }
  out += "  esac\n";
  out += "  local words=\"\" files=0\n";
  out += "  case \"${path}\" in\n";
  for (const completion_entry& e : entries) {
    std::vector<std::string> words = e.subcommands;
    words.insert(words.end(), e.options.begin(), e.options.end());
    out += "    \"" + e.path + "\") words=\"" + joined(words, " ") + "\"";
    if (e.file_positional) out += "; files=1";
    out += " ;;\n";
  }
  out += "  esac\n";
  out += "  if [[ ${cur} != -* ]]; then\n";
  out += "    # Options only once a '-' is typed.\n";
  out += "    local names=() w\n";
  out += "    for w in ${words}; do [[ ${w} == -* ]] || names+=(\"${w}\"); done\n";
  out += "    words=\"${names[*]}\"\n";
  out += "  fi\n";
  out += "  mapfile -t COMPREPLY < <(compgen -W \"${words}\" -- \"${cur}\")\n";
  out += "  if ((files)) && [[ ${cur} != -* ]]; then\n";
  out += "    mapfile -t -O \"${#COMPREPLY[@]}\" COMPREPLY < <(compgen -f -- \"${cur}\")\n";
  out += "  fi\n";
  out += "  return 0\n";
  out += "}\n";
  out += "complete -F _stormguard stormguard\n";
  return out;
}

int generate_if_asked(int argc, char** argv, const CLI::App& app, std::string_view version) {
  if (argc != 3) return -1;
  const std::string_view what = argv[1];
  std::string text;
  if (what == "--generate-man-page") {
    text = man_page(app, version);
  } else if (what == "--generate-bash-completion") {
    text = bash_completion(app);
  } else {
    return -1;
  }
  std::ofstream file(argv[2], std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    report_error("", std::string("cannot write ") + argv[2]);
    return exit_failure;
  }
  return exit_success;
}

}  // namespace stormguard::cli
