# SPDX-License-Identifier: Apache-2.0
# cmake -P script run by the ctest test docs.using.cpp_blocks (tests/CMakeLists.txt): every
# ```cpp block of MARKDOWN is a whole program that must compile and link as shown against
# stormguard::core. Each block is written to WORK_DIR/block_<N>.cpp and built with
#   CXX CXX_FLAGS -std=c++20 -I INCLUDE_DIR [DEFINES] block_<N>.cpp LIBRARY -pthread
# (not run: a program that retries sleeps on the real clock). Fails naming the block (its number
# and first line) and the compiler's message.
cmake_minimum_required(VERSION 3.25)
foreach(var MARKDOWN WORK_DIR CXX INCLUDE_DIR LIBRARY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cpp_blocks.cmake: -D${var}=... is required")
  endif()
endforeach()

# (file(READ) and string(FIND), never a CMake list: C++ has semicolons.)
file(READ "${MARKDOWN}" rest)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(count 0)
while(TRUE)
  string(FIND "${rest}" "\n```cpp\n" at)
  if(at EQUAL -1)
    break()
  endif()
  math(EXPR from "${at} + 8")
  string(SUBSTRING "${rest}" ${from} -1 rest)
  string(FIND "${rest}" "\n```\n" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "docs: a ```cpp block of ${MARKDOWN} does not end")
  endif()
  math(EXPR count "${count} + 1")
  string(SUBSTRING "${rest}" 0 ${end} block)
  file(WRITE "${WORK_DIR}/block_${count}.cpp" "${block}\n")
  string(FIND "${block}" "\n" first_end)
  string(SUBSTRING "${block}" 0 ${first_end} first_line_${count})
  string(SUBSTRING "${rest}" ${end} -1 rest)
endwhile()
if(count EQUAL 0)
  message(FATAL_ERROR "docs: ${MARKDOWN} has no ```cpp block")
endif()

separate_arguments(flags UNIX_COMMAND "${CXX_FLAGS}")
separate_arguments(defines UNIX_COMMAND "${DEFINES}")
foreach(n RANGE 1 ${count})
  execute_process(
    COMMAND "${CXX}" ${flags} -std=c++20 "-I${INCLUDE_DIR}" ${defines}
      "${WORK_DIR}/block_${n}.cpp" "${LIBRARY}" -pthread -o "${WORK_DIR}/block_${n}"
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "docs: the ```cpp block at ${MARKDOWN} (block ${n}, starting \"${first_line_${n}}\") does not compile "
      "and link as shown:\n${out}${err}")
  endif()
  message(STATUS "docs: the ```cpp block at ${MARKDOWN} (block ${n}, starting \"${first_line_${n}}\") compiles and links")
endforeach()
