# SPDX-License-Identifier: Apache-2.0
# ctest design.none_spelling: stormguard's one spelling of "no limit" for durations and deadlines
# (docs/architecture.md, "None: one spelling"). In the public headers (detail/ left out):
#   - a member that defaults to duration::max() or time_point::max() says so in its comment
#     ("duration::max() = none", "max() = no deadline"): that value is the library's "none";
#   - a std::optional<duration> member never means "no limit": its comment says what an empty one
#     means (not given, not seen, the scenario's value), never "none", "no limit", "no deadline"
#     or "no timeout".
# Run as cmake -DINCLUDE_DIR=<repo>/include -P <this file>.
file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/stormguard/*.hpp")
set(problems "")
set(max_members 0)
set(optional_members 0)
foreach(h IN LISTS headers)
  if(h MATCHES "/detail/")
    continue()
  endif()
  # One list element per line: ';' and brackets (which CMake's lists treat specially) spelled
  # out first.
  file(READ "${INCLUDE_DIR}/${h}" text)
  string(REPLACE ";" "@SEMI@" text "${text}")
  string(REPLACE "[" "@OPEN@" text "${text}")
  string(REPLACE "]" "@CLOSE@" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(block "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*///")
      string(APPEND block " ${line}")
      continue()
    endif()
    set(comment "${block} ${line}")
    set(block "")
    if(line MATCHES "^[ \t]*(stormguard::)?(duration|time_point) ([a-z_]+) = (stormguard::)?(duration|time_point)::max\\(\\)@SEMI@")
      math(EXPR max_members "${max_members} + 1")
      if(NOT comment MATCHES "max\\(\\) = (none|no )")
        string(STRIP "${line}" member)
        string(REPLACE "@SEMI@" "" member "${member}")
        string(APPEND problems "  ${h}: `${member}` defaults to max() without saying "
                               "\"max() = none\" in its comment\n")
      endif()
    elseif(line MATCHES "^[ \t]*std::optional<(stormguard::)?duration> ([a-z_]+)")
      math(EXPR optional_members "${optional_members} + 1")
      string(TOLOWER "${comment}" lower)
      if(lower MATCHES "(nullopt|empty)[^.;]*(= none|no limit|no deadline|no timeout|unlimited)")
        string(STRIP "${line}" member)
        string(REPLACE "@SEMI@" "" member "${member}")
        string(APPEND problems "  ${h}: `${member}` spells \"no limit\" as an empty optional; "
                               "make it a duration defaulting to duration::max() (= none)\n")
      endif()
    endif()
  endforeach()
endforeach()
if(max_members LESS 5)
  message(FATAL_ERROR "design.none_spelling: found only ${max_members} members defaulting to "
                      "max() under ${INCLUDE_DIR}: the scan is broken")
endif()
if(problems)
  message(FATAL_ERROR "design.none_spelling: \"no limit\" is duration::max() (or "
                      "time_point::max()) everywhere (docs/architecture.md):\n${problems}")
endif()
message(STATUS "design.none_spelling: ${max_members} members default to max() = none; "
               "${optional_members} optional durations, none of them meaning \"no limit\"")
