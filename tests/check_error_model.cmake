# SPDX-License-Identifier: Apache-2.0
# ctest design.error_model: stormguard's one error model for text read from outside (see
# docs/architecture.md, "Errors"). Every public function that reads text or a file — named
# parse_*, load_* or select_* in a header under include/stormguard (detail/ left out) — answers bad
# input with a value, never an exception: it returns an outcome (stormguard/outcome.hpp) or one of
# the *_result aliases of an outcome, or a std::optional (where "not one" is the only answer), or
# it is declared noexcept. A parser added the other way
# fails here with its header and its declaration.
# Run as cmake -DINCLUDE_DIR=<repo>/include -P <this file>.
file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/stormguard/*.hpp")
set(problems "")
set(count 0)
set(result_aliases "")
set(all_aliases "")
foreach(h IN LISTS headers)
  if(h MATCHES "/detail/")
    continue()
  endif()
  file(READ "${INCLUDE_DIR}/${h}" text)
  # Comments out, so a name in a sentence is not a declaration.
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  # CMake lists split at ';': spell it '@END@' while matching.
  string(REPLACE ";" "@END@" text "${text}")
  # Each declaration of a parser: from the start of its line to its ';' or '{'.
  string(REGEX MATCHALL "\n[^\n@{}()]*[ \t*&>](parse|load|select)_[a-z_]+\\([^@{]*(@END@|{)" decls
         "${text}")
  foreach(d IN LISTS decls)
    string(STRIP "${d}" d)
    string(REPLACE "@END@" "" d "${d}")
    # A call inside an inline body (return parse_x(...);) is not a declaration.
    if(d MATCHES "^(return|if|else)[ (]" OR d MATCHES "=[^(]*(parse|load|select)_[a-z_]+\\(")
      continue()
    endif()
    string(REGEX REPLACE "[\n ]+" " " one_line "${d}")
    math(EXPR count "${count} + 1")
    if(one_line MATCHES "noexcept")
      continue()
    endif()
    if(one_line MATCHES "(^|[ :])(outcome|std::optional)<")
      continue()
    endif()
    if(one_line MATCHES " ([a-z_]+_result) [a-z_]+\\(")
      list(APPEND result_aliases "${CMAKE_MATCH_1}")
      continue()
    endif()
    string(APPEND problems "  ${h}: ${one_line}\n")
  endforeach()
  string(REGEX MATCHALL "using [a-z_]+_result = [^@]*@END@" aliases "${text}")
  string(APPEND all_aliases "${aliases}")
endforeach()
# Every *_result alias a parser returns must be an outcome.
list(REMOVE_DUPLICATES result_aliases)
foreach(r IN LISTS result_aliases)
  if(NOT all_aliases MATCHES "using ${r} = [^@]*outcome<")
    string(APPEND problems "  ${r}: returned by a parser, not an alias of outcome\n")
  endif()
endforeach()
if(count LESS 10)
  message(FATAL_ERROR "design.error_model: found only ${count} parser declarations under "
                      "${INCLUDE_DIR}; the scan is broken")
endif()
if(problems)
  message(FATAL_ERROR "design.error_model: these public parsers can throw for bad input; return "
                      "an outcome<T, input_error> or a std::optional (or declare them noexcept):\n${problems}")
endif()
message(STATUS "design.error_model: ${count} public parser declarations return or are noexcept")
