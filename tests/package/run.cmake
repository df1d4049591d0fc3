# cmake -P script run by the ctest test `package.consumer` (see tests/CMakeLists.txt):
# installs the stormguard build in STORMGUARD_BINARY_DIR into WORK_DIR/prefix, then configures,
# builds and runs the consumer project in CONSUMER_SOURCE_DIR against that prefix.
cmake_minimum_required(VERSION 3.25)

foreach(var STORMGUARD_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR EXPECTED_VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

message(STATUS "package.consumer: installing into ${prefix}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${STORMGUARD_BINARY_DIR}" --prefix "${prefix}" --config "${CONFIG}"
  OUTPUT_QUIET
  COMMAND_ERROR_IS_FATAL ANY)

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}")
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
# A sanitizer build of the library needs the same flags in the consumer to link.
list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")

# The version check: the installed minor version is found, the previous one is not (while the
# major version is 0 a minor version changes the API, the ABI or a wire format: docs/releases.md).
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${EXPECTED_VERSION}")
set(current "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
math(EXPR previous_minor "${CMAKE_MATCH_2} - 1")
set(previous "${CMAKE_MATCH_1}.${previous_minor}")
foreach(requested IN ITEMS "${current}" "${previous}")
  if(requested STREQUAL previous AND previous_minor LESS 0)
    continue()  # x.0: no previous minor version of this major one
  endif()
  file(REMOVE_RECURSE "${WORK_DIR}/version-${requested}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/version_request"
      -B "${WORK_DIR}/version-${requested}" "-DCMAKE_PREFIX_PATH=${prefix}"
      "-DREQUESTED_VERSION=${requested}"
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(requested STREQUAL current AND NOT result EQUAL 0)
    message(FATAL_ERROR "package.consumer: find_package(stormguard ${current}) failed against "
      "${EXPECTED_VERSION}:\n${out}${err}")
  elseif(requested STREQUAL previous)
    if(result EQUAL 0)
      message(FATAL_ERROR "package.consumer: find_package(stormguard ${previous}) accepted "
        "${EXPECTED_VERSION}:\n${out}")
    endif()
    if(NOT err MATCHES "requested version \"${previous}\"" OR NOT err MATCHES "version: ${EXPECTED_VERSION}")
      message(FATAL_ERROR "package.consumer: find_package(stormguard ${previous}) failed, but not "
        "for the version:\n${err}")
    endif()
    message(STATUS "package.consumer: find_package(stormguard ${previous}) refuses ${EXPECTED_VERSION}")
  endif()
endforeach()

# The installed command names the docs under the prefix it was installed into, found at run
# time (--help), and so does its installed man page (written at install time).
set(cli "${prefix}/bin/stormguard${CMAKE_EXECUTABLE_SUFFIX}")
if(EXISTS "${cli}")
  set(docs "${prefix}/share/doc/stormguard")
  if(NOT IS_DIRECTORY "${docs}")
    message(FATAL_ERROR "package.consumer: the docs are not installed in ${docs}")
  endif()
  execute_process(COMMAND "${cli}" simulate --help OUTPUT_VARIABLE help RESULT_VARIABLE result)
  string(FIND "${help}" "${docs}/policy.md" at)
  if(NOT result EQUAL 0 OR at LESS 0)
    message(FATAL_ERROR "package.consumer: `stormguard simulate --help` does not name "
      "${docs}/policy.md:\n${help}")
  endif()
  file(READ "${prefix}/share/man/man1/stormguard.1" page)
  string(REPLACE "-" "\\-" roff_docs "${docs}")
  string(FIND "${page}" "${roff_docs}/" at)
  string(FIND "${page}" "@STORMGUARD_DOC_ROOT@" placeholder)
  if(at LESS 0 OR NOT placeholder EQUAL -1)
    message(FATAL_ERROR "package.consumer: the installed man page does not name ${docs}")
  endif()
  message(STATUS "package.consumer: --help and the man page name ${docs}")
endif()

message(STATUS "package.consumer: configuring ${CONSUMER_SOURCE_DIR}")
execute_process(COMMAND "${CMAKE_COMMAND}" ${configure_args} COMMAND_ERROR_IS_FATAL ANY)

message(STATUS "package.consumer: building")
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" --config "${CONFIG}"
  COMMAND_ERROR_IS_FATAL ANY)

set(exe "${build}/consumer")
if(NOT EXISTS "${exe}" AND EXISTS "${build}/${CONFIG}/consumer${CMAKE_EXECUTABLE_SUFFIX}")
  set(exe "${build}/${CONFIG}/consumer${CMAKE_EXECUTABLE_SUFFIX}")
endif()
execute_process(COMMAND "${exe}"
  OUTPUT_VARIABLE output
  OUTPUT_STRIP_TRAILING_WHITESPACE
  COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "package.consumer: ${exe} printed: ${output}")
if(NOT output STREQUAL "stormguard ${EXPECTED_VERSION}")
  message(FATAL_ERROR "package.consumer: expected \"stormguard ${EXPECTED_VERSION}\", got \"${output}\"")
endif()
