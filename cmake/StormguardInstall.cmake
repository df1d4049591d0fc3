# SPDX-License-Identifier: Apache-2.0
# Install rules of the top-level CMakeLists.txt (STORMGUARD_INSTALL): per built component its
# library, headers, export set stormguard-<component>-targets.cmake and pkg-config file
# stormguard-<component>.pc; the package config, which reads the table of components written
# here (what each needs: other components, packages), and its version file.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(STORMGUARD_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/stormguard")
set(_stormguard_pc_install_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
# The .pc files find the prefix from their own place (relocatable: `cmake --install --prefix`).
file(RELATIVE_PATH _stormguard_pc_to_prefix "/prefix/${_stormguard_pc_install_dir}" "/prefix")
string(REGEX REPLACE "/$" "" _stormguard_pc_to_prefix "${_stormguard_pc_to_prefix}")

set(STORMGUARD_CONFIG_COMPONENT_TABLE "")
foreach(component IN LISTS STORMGUARD_COMPONENTS)
  set(target "stormguard_${component}")
  install(TARGETS ${target}
    EXPORT stormguard-${component}-targets
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
  # The component's public headers (its header view, cmake/StormguardLibrary.cmake), as files.
  get_property(headers GLOBAL PROPERTY STORMGUARD_HEADERS_${component})
  foreach(entry IN LISTS headers)
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 0 file)
    list(GET entry 1 path)
    get_filename_component(dir "${CMAKE_INSTALL_INCLUDEDIR}/stormguard/${path}" DIRECTORY)
    install(FILES "${file}" DESTINATION "${dir}")
  endforeach()
  install(EXPORT stormguard-${component}-targets
    NAMESPACE stormguard::
    FILE "stormguard-${component}-targets.cmake"
    DESTINATION "${STORMGUARD_CMAKE_INSTALL_DIR}")

  get_property(needs GLOBAL PROPERTY STORMGUARD_NEEDS_${component})
  get_property(lookups GLOBAL PROPERTY STORMGUARD_LOOKUPS_${component})
  string(APPEND STORMGUARD_CONFIG_COMPONENT_TABLE
    "set(_stormguard_needs_${component} ${needs})\n"
    "set(_stormguard_lookups_${component} \"${lookups}\")\n")

  # pkg-config: Requires lists the other components and the packages a consumer's link needs
  # (a static library's private dependencies too); Requires.private the rest.
  get_property(pc_requires GLOBAL PROPERTY STORMGUARD_PC_REQUIRES_${component})
  get_property(pc_requires_private GLOBAL PROPERTY STORMGUARD_PC_REQUIRES_PRIVATE_${component})
  set(requires "")
  foreach(need IN LISTS needs)
    list(APPEND requires "stormguard-${need}")
  endforeach()
  list(APPEND requires ${pc_requires})
  list(REMOVE_DUPLICATES requires)
  list(JOIN requires " " STORMGUARD_PC_REQUIRES)
  list(JOIN pc_requires_private " " STORMGUARD_PC_REQUIRES_PRIVATE)
  get_target_property(definitions ${target} INTERFACE_COMPILE_DEFINITIONS)
  set(STORMGUARD_PC_CFLAGS "")
  if(definitions)
    list(TRANSFORM definitions PREPEND "-D")
    list(JOIN definitions " " STORMGUARD_PC_CFLAGS)
  endif()
  get_property(header_only GLOBAL PROPERTY STORMGUARD_HEADER_ONLY_${component})
  if(header_only)
    set(STORMGUARD_PC_LIBS "")
  else()
    set(STORMGUARD_PC_LIBS "-L\${libdir} -l${target}")
  endif()
  if(component STREQUAL "core")
    string(APPEND STORMGUARD_PC_LIBS " -pthread")
  endif()
  set(STORMGUARD_PC_COMPONENT "${component}")
  set(STORMGUARD_PC_PREFIX "\${pcfiledir}/${_stormguard_pc_to_prefix}")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/stormguard.pc.in"
    "${PROJECT_BINARY_DIR}/pkgconfig/stormguard-${component}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/stormguard-${component}.pc"
    DESTINATION "${_stormguard_pc_install_dir}")
endforeach()
if(BUILD_SHARED_LIBS)
  string(APPEND STORMGUARD_CONFIG_COMPONENT_TABLE "set(_stormguard_shared TRUE)\n")
else()
  string(APPEND STORMGUARD_CONFIG_COMPONENT_TABLE "set(_stormguard_shared FALSE)\n")
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/stormguardConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/stormguardConfig.cmake"
  INSTALL_DESTINATION "${STORMGUARD_CMAKE_INSTALL_DIR}")
# 0.x: a minor version may break the API, so 0.3.* satisfies find_package(stormguard 0.3) only
# (and find_package(stormguard 0.2) fails against 0.3: tests/consumers/run.sh checks it).
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/stormguardConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/stormguardConfig.cmake"
  "${PROJECT_BINARY_DIR}/stormguardConfigVersion.cmake"
  DESTINATION "${STORMGUARD_CMAKE_INSTALL_DIR}")

# The license (Apache-2.0, also stormguard_LICENSE in the package config and License: in the
# pkg-config files).
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/NOTICE"
  DESTINATION "${CMAKE_INSTALL_DOCDIR}")

# The example policies (docs/policy.md), to copy and edit.
file(GLOB _stormguard_policy_files "${PROJECT_SOURCE_DIR}/policies/*.json"
  "${PROJECT_SOURCE_DIR}/policies/*.yaml")
install(FILES ${_stormguard_policy_files}
  DESTINATION "${CMAKE_INSTALL_DATADIR}/stormguard/policies")

# The built-in scenarios are compiled in (builtin_scenarios.cpp); their files are installed as
# examples to copy and edit (`stormguard simulate my-scenario.json`).
if(STORMGUARD_BUILTIN_SCENARIOS)
  list(TRANSFORM STORMGUARD_BUILTIN_SCENARIOS APPEND ".json" OUTPUT_VARIABLE _stormguard_scenario_files)
  list(TRANSFORM _stormguard_scenario_files PREPEND "${PROJECT_SOURCE_DIR}/scenarios/")
  install(FILES ${_stormguard_scenario_files}
    DESTINATION "${CMAKE_INSTALL_DATADIR}/stormguard/scenarios")
endif()
