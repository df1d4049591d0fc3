// SPDX-License-Identifier: Apache-2.0
// Command-line errors worded for a newcomer (see usage.hpp).
#include "usage.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/detail/format.hpp"

namespace stormguard::cli {

namespace {

using detail::quote_for_message;

bool looks_like_option(std::string_view word) {
  if (word.size() < 2 || word.front() != '-' || word == "--") return false;
  // "-1s", "-5": a negative number given where an argument was expected, not an option.
  return !(word[1] >= '0' && word[1] <= '9');
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// The name of an option of `app` that equals `name` but for case ("-X" for "-x"), or "".
std::string differs_by_case(const CLI::App& app, std::string_view name) {
  const bool is_long = name.substr(0, 2) == "--";
  const std::string_view bare = name.substr(is_long ? 2 : 1);
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& s : is_long ? option->get_lnames() : option->get_snames()) {
      if (s != bare && iequals(s, bare)) return (is_long ? "--" : "-") + s;
    }
  }
  return {};
}

// "Could not convert: --retries = abc" -> the option's name and the value.
bool split_conversion(std::string_view what, std::string& name, std::string& value) {
  constexpr std::string_view prefix = "Could not convert: ";
  if (what.substr(0, prefix.size()) != prefix) return false;
  what.remove_prefix(prefix.size());
  const std::size_t eq = what.find(" = ");
  if (eq == std::string_view::npos) return false;
  name = std::string(what.substr(0, eq));
  value = std::string(what.substr(eq + 3));
  return true;
}

// The names of `option` as a user may have typed them: "-X/--request".
std::string names_of(const CLI::Option& option) {
  std::string names;
  for (const std::string& s : option.get_snames()) names += (names.empty() ? "-" : "/-") + s;
  for (const std::string& s : option.get_lnames()) names += (names.empty() ? "--" : "/--") + s;
  return names.empty() ? option.get_name() : names;
}

// "--request: At Most 1 required but received 2" -> "-X/--request given 2 times; give it once";
// "" for any other text.
std::string repeated_option_message(std::string_view what, const CLI::App& app) {
  const std::size_t colon = what.find(": At Most ");
  const std::size_t received = what.find(" required but received ");
  if (colon == std::string_view::npos || received == std::string_view::npos) return {};
  const std::string name(what.substr(0, colon));
  const std::string most(what.substr(colon + 10, received - colon - 10));
  const std::string count(what.substr(received + 23));
  const CLI::Option* option = app.get_option_no_throw(name);
  const std::string shown = option == nullptr ? name : names_of(*option);
  return shown + " given " + (count == "2" ? std::string("twice") : count + " times") +
         (most == "1" ? "; give it once" : "; give it at most " + most + " times");
}

}  // namespace

std::string extras_message(const std::vector<std::string>& extras, const CLI::App& app) {
  for (const std::string& word : extras) {
    if (!looks_like_option(word)) continue;
    const std::string name = word.substr(0, word.find('='));
    std::string message = "unknown option " + quote_for_message(name);
    if (const std::string near = differs_by_case(app, name); !near.empty()) {
      message += " (options are case-sensitive: did you mean " + near + "?)";
    }
    return message;
  }
  for (const std::string& word : extras) {
    if (word != "--") return "unexpected argument " + quote_for_message(word);
  }
  return "unexpected argument \"--\"";
}

// "The following arguments were not expected: c b a" -> {a, b, c}: CLI11 joins the words in
// reverse order (a word with a space in it is split; only the first option-like word matters).
static std::vector<std::string> words_of_extras_message(std::string_view what) {
  std::vector<std::string> words;
  const std::size_t colon = what.find(": ");
  if (colon == std::string_view::npos) return words;
  what.remove_prefix(colon + 2);
  while (!what.empty()) {
    const std::size_t space = what.find(' ');
    words.emplace(words.begin(), what.substr(0, space));
    if (space == std::string_view::npos) break;
    what.remove_prefix(space + 1);
  }
  return words;
}

std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app) {
  // (CLI11 2.1's get_name() of some errors is the app's name, not the error's: test the type.)
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> extras = app.remaining();
    // With positionals_at_end (exec), CLI11 throws before recording the words in remaining().
    if (extras.empty()) extras = words_of_extras_message(e.what());
    const bool any =
        std::any_of(extras.begin(), extras.end(), [](const std::string& w) { return w != "--"; });
    if (any) return extras_message(extras, app);
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    std::string name;
    std::string value;
    if (split_conversion(e.what(), name, value)) {
      const CLI::Option* option = app.get_option_no_throw(name);
      const std::string kind = option == nullptr ? "" : option->get_type_name();
      const std::string what = kind == "N"   ? "not a whole number (or out of range)"
                               : kind == "X" ? "not a number"
                                             : "not a valid value";
      return name + ": " + what + ": " + quote_for_message(value);
    }
    return "a value could not be converted (see --help)";
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) return e.what();  // our own
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // "--request: At Most 1 required but received 2": an option given more often than it may be.
    if (std::string message = repeated_option_message(e.what(), app); !message.empty()) {
      return message;
    }
    // "--base: 1 required D missing" (the option came last, without its value).
    const std::string_view what = e.what();
    const std::size_t colon = what.find(": ");
    const std::size_t required = what.find(" required ");
    if (colon != std::string_view::npos && required != std::string_view::npos &&
        what.ends_with(" missing")) {
      const std::size_t type_begin = required + 10;
      return std::string(what.substr(0, colon)) + " needs a value (" +
             std::string(what.substr(type_begin, what.size() - 8 - type_begin)) + ")";
    }
  }
  // RequiredError, ArgumentMismatch, ExcludesError...: CLI11's words name options, not values;
  // still, never print a control byte or an unbounded line.
  std::string message;
  const std::string_view what = e.what();
  for (std::size_t i = 0; i < what.size() && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(what[i]);
    message += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  return what.size() > 200 ? message + "..." : message;
}

}  // namespace stormguard::cli
