# SPDX-License-Identifier: Apache-2.0
# Writes the man page OUT from the generated page IN (stormguard --generate-man-page), with the
# placeholder of the documentation folder (cli/manpage.hpp: k_doc_root_placeholder) replaced by
# DOCDIR, written for roff (a backslash as \e, a hyphen as \-, as the page's other text).
# Run with -P by the build (the build tree's page: the configured folder) and included by
# `cmake --install` (the installed page: the prefix installed into).
foreach(var IN ITEMS IN OUT DOCDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "man_docdir.cmake: ${var} is not set")
  endif()
endforeach()
file(READ "${IN}" page)
set(docdir "${DOCDIR}")
string(REPLACE "\\" "\\e" docdir "${docdir}")
string(REPLACE "-" "\\-" docdir "${docdir}")
string(REPLACE "@STORMGUARD_DOC_ROOT@" "${docdir}" page "${page}")
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
file(WRITE "${OUT}" "${page}")
