# SPDX-License-Identifier: Apache-2.0
# Helpers of the top-level CMakeLists.txt: one function per library block, the lookups of a
# component's dependencies (also written into the package config and the pkg-config files), and
# the per-target view of src/.
#
#   stormguard_require(<component> <PUBLIC|PRIVATE> DEBIAN <deb> PACKAGE <find_package args>... [PC <module>...])
#   stormguard_require(<component> <PUBLIC|PRIVATE> DEBIAN <deb> PKG_CONFIG <prefix> <module>... )
#   stormguard_require(<component> <PUBLIC|PRIVATE> DEBIAN <deb> HEADER <variable> <header>)
#       Finds one dependency of a component, inside that component's block. Not found: a configure
#       error naming the component's option (STORMGUARD_WITH_<COMPONENT>) and the package. Every
#       dependency a consumer of the installed package needs (PUBLIC ones; PRIVATE ones as well
#       for static libraries, whose link line carries them) is recorded for the package config
#       (cmake/stormguardConfig.cmake.in) and the component's pkg-config file.
#
#   stormguard_add_library(<component> [HEADER_ONLY] [HIDDEN_VISIBILITY]
#                          SOURCES <file under src/>... HEADERS <file under include/stormguard/>...
#                          [PUBLIC_DEPS <target>...] [PRIVATE_DEPS <target>...])
#       The target stormguard_<component> (alias stormguard::<component>, EXPORT_NAME
#       <component>), static or shared after BUILD_SHARED_LIBS, installed and exported in its own
#       export set (stormguard-<component>-targets.cmake) with its own pkg-config file. It sees
#       only its own private folder src/<component>/ (see stormguard_private_include), never src/
#       as a whole, and only its own public headers and those of what it links, never include/ as
#       a whole (see stormguard_view_header): a header of a library it does not link is "not
#       found" at compile time (the layer probes of tests/CMakeLists.txt show it). Internal build-only targets (stormguard_json_reader) go into PRIVATE_DEPS as
#       $<BUILD_INTERFACE:...>. Compiled with hidden visibility (-fvisibility=hidden,
#       -fvisibility-inlines-hidden): a shared library exports only what its public headers mark
#       STORMGUARD_EXPORT (stormguard/export.hpp; one macro for every library, which is enough on
#       ELF). HIDDEN_VISIBILITY is accepted and changes nothing (every library has it).
#       SOVERSION: MAJOR.MINOR while 0.x (a new minor version may change the ABI).
#
#   stormguard_view_header(<component> <file> <path under stormguard/>)
#       Puts one public header into the component's header view: the folder
#       <build>/include-view/<component>/ holds stormguard/<path> as a symbolic link to <file>, and
#       is the component's only public include directory in the build tree (an installed consumer
#       gets <prefix>/include, where every installed component's headers are). So a consumer's
#       #include <stormguard/...> path is the same in the build tree and installed, and a library
#       sees exactly the headers of the components it links. The header is installed with the
#       component (cmake/StormguardInstall.cmake). stormguard_add_library calls it for HEADERS;
#       call it directly for a generated header (stormguard/export.hpp).
#
#   stormguard_private_include(<target> <PRIVATE|INTERFACE> <path under src/>)
#       Makes "#include "<path>/..."" (or "<path>" for one file) resolve for <target> (PRIVATE) or
#       its users (INTERFACE): src/<path> appears as <path> under a per-target include root in the
#       build tree (a symbolic link), so a library names its private headers as before
#       ("http/transfer.hpp") and another library's private folder stays out of reach.
include_guard(GLOBAL)

# Settings every stormguard-owned target gets (libraries, tests, examples, benchmarks, CLI).
function(stormguard_target_defaults target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:stormguard_warnings>)
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF)
endfunction()

function(stormguard_view_header component file path)
  set(view "${PROJECT_BINARY_DIR}/include-view/${component}")
  get_filename_component(parent "${view}/stormguard/${path}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${file}" "${view}/stormguard/${path}" SYMBOLIC)
  set_property(GLOBAL APPEND PROPERTY STORMGUARD_VIEW_${component} "${path}")
  set_property(GLOBAL APPEND PROPERTY STORMGUARD_HEADERS_${component} "${file}|${path}")
endfunction()

# Removes from a component's header view every link that no longer names one of its headers (a
# header taken off a HEADERS list, or moved to another component, must stop resolving at once).
function(stormguard_prune_view component)
  set(view "${PROJECT_BINARY_DIR}/include-view/${component}")
  get_property(paths GLOBAL PROPERTY STORMGUARD_VIEW_${component})
  file(GLOB_RECURSE present LIST_DIRECTORIES false RELATIVE "${view}/stormguard" "${view}/stormguard/*")
  foreach(p IN LISTS present)
    if(NOT p IN_LIST paths)
      file(REMOVE "${view}/stormguard/${p}")
    endif()
  endforeach()
endfunction()

function(stormguard_private_include target scope path)
  set(root "${PROJECT_BINARY_DIR}/private-include/${target}")
  get_filename_component(parent "${root}/${path}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${path}" "${root}/${path}" SYMBOLIC)
  get_target_property(dirs ${target} STORMGUARD_PRIVATE_INCLUDE_ROOT)
  if(NOT dirs)
    target_include_directories(${target} ${scope} "$<BUILD_INTERFACE:${root}>")
    set_target_properties(${target} PROPERTIES STORMGUARD_PRIVATE_INCLUDE_ROOT "${root}")
  endif()
endfunction()

function(stormguard_require component scope)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "DEBIAN" "PACKAGE;PKG_CONFIG;HEADER;PC")
  string(TOUPPER "${component}" upper)
  set(option "STORMGUARD_WITH_${upper}")
  set(hint "(Debian: ${arg_DEBIAN}; `scripts/bootstrap --components ${component}` installs it)")
  if(arg_PACKAGE)
    list(GET arg_PACKAGE 0 name)
    find_package(${arg_PACKAGE} QUIET)
    if(NOT ${name}_FOUND)
      message(FATAL_ERROR "${option} is ON but the package ${name} was not found ${hint}; "
        "set -D${option}=OFF to build without stormguard::${component}")
    endif()
    string(REPLACE ";" "|" lookup "PACKAGE|${arg_PACKAGE}")
    set(pc_modules ${arg_PC})
  elseif(arg_PKG_CONFIG)
    list(POP_FRONT arg_PKG_CONFIG prefix)
    find_package(PkgConfig QUIET)
    if(NOT PKG_CONFIG_FOUND)
      message(FATAL_ERROR "${option} is ON but pkg-config was not found (Debian: pkg-config), "
        "needed to find ${arg_PKG_CONFIG}; set -D${option}=OFF to build without stormguard::${component}")
    endif()
    if(NOT TARGET PkgConfig::${prefix})
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${arg_PKG_CONFIG})
    endif()
    if(NOT TARGET PkgConfig::${prefix})
      message(FATAL_ERROR "${option} is ON but the pkg-config package(s) ${arg_PKG_CONFIG} "
        "were not found ${hint}; set -D${option}=OFF to build without stormguard::${component}")
    endif()
    string(REPLACE ";" "|" lookup "PKG_CONFIG|${prefix}|${arg_PKG_CONFIG}")
    set(pc_modules ${arg_PKG_CONFIG})
  elseif(arg_HEADER)
    list(GET arg_HEADER 0 variable)
    list(GET arg_HEADER 1 header)
    find_path(${variable} ${header})
    if(NOT ${variable})
      message(FATAL_ERROR "${option} is ON but ${header} was not found ${hint}; "
        "set -D${option}=OFF to build without stormguard::${component}")
    endif()
    set(lookup "HEADER|${header}")
    set(pc_modules "")
  else()
    message(FATAL_ERROR "stormguard_require: PACKAGE, PKG_CONFIG or HEADER expected")
  endif()
  # What an installed consumer needs: PUBLIC dependencies, and PRIVATE ones of static libraries.
  if(scope STREQUAL "PUBLIC" OR NOT BUILD_SHARED_LIBS)
    set_property(GLOBAL APPEND PROPERTY STORMGUARD_LOOKUPS_${component} "${lookup}")
    set_property(GLOBAL APPEND PROPERTY STORMGUARD_PC_REQUIRES_${component} ${pc_modules})
  elseif(pc_modules)
    set_property(GLOBAL APPEND PROPERTY STORMGUARD_PC_REQUIRES_PRIVATE_${component} ${pc_modules})
  endif()
endfunction()

function(stormguard_add_library component)
  cmake_parse_arguments(PARSE_ARGV 1 arg "HEADER_ONLY;HIDDEN_VISIBILITY" ""
    "SOURCES;HEADERS;PUBLIC_DEPS;PRIVATE_DEPS")
  set(target "stormguard_${component}")
  list(TRANSFORM arg_SOURCES PREPEND "${PROJECT_SOURCE_DIR}/src/")
  list(TRANSFORM arg_HEADERS PREPEND "${PROJECT_SOURCE_DIR}/include/stormguard/")
  if(arg_HEADER_ONLY)
    set(scope INTERFACE)
    add_library(${target} INTERFACE)
  else()
    set(scope PUBLIC)
    add_library(${target} ${arg_SOURCES})
    if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/src/${component}")
      stormguard_private_include(${target} PRIVATE "${component}")
    endif()
    set_target_properties(${target} PROPERTIES
      OUTPUT_NAME "${target}"
      POSITION_INDEPENDENT_CODE ON
      VERSION "${PROJECT_VERSION}"
      # 0.x: every minor version may change the ABI.
      SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
    # Every library: only what the public headers mark STORMGUARD_EXPORT leaves a shared
    # library (HIDDEN_VISIBILITY is accepted and is what every library gets).
    set_target_properties(${target} PROPERTIES
      CXX_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON)
    stormguard_target_defaults(${target})
  endif()
  add_library(stormguard::${component} ALIAS ${target})
  foreach(header IN LISTS arg_HEADERS)
    file(RELATIVE_PATH path "${PROJECT_SOURCE_DIR}/include/stormguard" "${header}")
    stormguard_view_header(${component} "${header}" "${path}")
  endforeach()
  target_include_directories(${target} ${scope}
    "$<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include-view/${component}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  if(NOT arg_HEADER_ONLY)
    # Listed for IDEs only; the include path is the view above.
    target_sources(${target} PRIVATE ${arg_HEADERS})
  endif()
  target_compile_features(${target} ${scope} cxx_std_20)
  target_link_libraries(${target} ${scope} ${arg_PUBLIC_DEPS})
  if(arg_PRIVATE_DEPS)
    target_link_libraries(${target} PRIVATE ${arg_PRIVATE_DEPS})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME "${component}")

  # The other stormguard components an installed consumer of this one needs loaded first.
  set(needs "")
  foreach(dep IN LISTS arg_PUBLIC_DEPS arg_PRIVATE_DEPS)
    if(dep MATCHES "^stormguard_(.+)$" AND NOT dep STREQUAL "stormguard_warnings")
      list(APPEND needs "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY STORMGUARD_COMPONENTS "${component}")
  set_property(GLOBAL PROPERTY STORMGUARD_NEEDS_${component} ${needs})
  set_property(GLOBAL PROPERTY STORMGUARD_PUBLIC_NEEDS_${component} ${arg_PUBLIC_DEPS})
  set_property(GLOBAL PROPERTY STORMGUARD_HEADER_ONLY_${component} ${arg_HEADER_ONLY})
endfunction()

#   stormguard_add_internal_library(<name> DIR <path under src/> SOURCES <file under src/>...
#                                   [PUBLIC_DEPS <target>...] [PRIVATE_DEPS <target>...])
#       An internal library (e.g. a piece that two components share): the OBJECT library
#       stormguard_<name>, never installed, whose headers under src/<DIR> its users include as
#       "<DIR>/...". A component links it as PRIVATE_DEPS $<BUILD_INTERFACE:stormguard_<name>>:
#       its objects go into the component's own library (static or shared), so an installed
#       consumer needs nothing more.
function(stormguard_add_internal_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DIR" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS")
  set(target "stormguard_${name}")
  list(TRANSFORM arg_SOURCES PREPEND "${PROJECT_SOURCE_DIR}/src/")
  add_library(${target} OBJECT ${arg_SOURCES})
  stormguard_private_include(${target} PUBLIC "${arg_DIR}")
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PUBLIC ${arg_PUBLIC_DEPS} PRIVATE ${arg_PRIVATE_DEPS})
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  stormguard_target_defaults(${target})
endfunction()

#   stormguard_write_layers(<file>)
#       Writes CMake's own graph of the components, after every component is defined, as JSON:
#       {"<component>": {"links": [<components it links, PUBLIC or PRIVATE>],
#       (the internal libraries of STORMGUARD_INTERNAL_LIBRARIES, e.g. app, are listed the same
#       way, with no public headers)
#                        "headers": [<its public headers, under include/>],
#                        "private": [<its folder under src/, if any>]}, ...}.
#       scripts/check-limits reads it (the allowed includes between libraries are these links,
#       transitively closed), so the table of layers is never kept by hand.
function(stormguard_write_layers file)
  get_property(components GLOBAL PROPERTY STORMGUARD_COMPONENTS)
  # Internal libraries with a private folder of their own (stormguard_app), as libraries too.
  get_property(internal GLOBAL PROPERTY STORMGUARD_INTERNAL_LIBRARIES)
  list(APPEND components ${internal})
  set(json "{")
  set(first TRUE)
  foreach(component IN LISTS components)
    set(target "stormguard_${component}")
    get_target_property(type ${target} TYPE)
    set(links "")
    foreach(property INTERFACE_LINK_LIBRARIES LINK_LIBRARIES)
      if(property STREQUAL "LINK_LIBRARIES" AND type STREQUAL "INTERFACE_LIBRARY")
        continue()
      endif()
      get_target_property(deps ${target} ${property})
      foreach(dep IN LISTS deps)
        # $<BUILD_INTERFACE:x>, $<LINK_ONLY:x>: the target named inside.
        string(REGEX REPLACE "^\\$<[A-Z_]+:(.*)>$" "\\1" dep "${dep}")
        # (Two ifs: ${CMAKE_MATCH_1} in the condition itself would be expanded before MATCHES.)
        if(dep MATCHES "^stormguard_(.+)$")
          set(name "${CMAKE_MATCH_1}")
          if(name IN_LIST components)
            list(APPEND links "\"${name}\"")
          endif()
        endif()
      endforeach()
    endforeach()
    list(REMOVE_DUPLICATES links)
    list(JOIN links ", " links)
    get_property(paths GLOBAL PROPERTY STORMGUARD_HEADERS_${component})
    set(headers "")
    foreach(entry IN LISTS paths)
      string(REPLACE "|" ";" entry "${entry}")
      list(GET entry 0 header)
      # Generated headers (export.hpp) are the build's, not the tree's.
      cmake_path(IS_PREFIX PROJECT_BINARY_DIR "${header}" generated)
      if(NOT generated)
        file(RELATIVE_PATH header "${PROJECT_SOURCE_DIR}" "${header}")
        list(APPEND headers "\"${header}\"")
      endif()
    endforeach()
    list(JOIN headers ", " headers)
    set(private "")
    if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/src/${component}")
      set(private "\"src/${component}\"")
    endif()
    if(NOT first)
      string(APPEND json ",")
    endif()
    set(first FALSE)
    string(APPEND json "\n  \"${component}\": {\"links\": [${links}], \"headers\": [${headers}], "
      "\"private\": [${private}]}")
  endforeach()
  string(APPEND json "\n}\n")
  file(WRITE "${file}.tmp" "${json}")
  file(COPY_FILE "${file}.tmp" "${file}" ONLY_IF_DIFFERENT)
  file(REMOVE "${file}.tmp")
endfunction()

#   stormguard_grpc_proto(<target> <file under proto/>)
#       An internal static library (never installed) of one .proto file's messages and gRPC
#       service: protoc (protobuf-compiler) and gRPC's C++ plugin (protobuf-compiler-grpc) write
#       <build>/generated/proto/<path>.pb.{h,cc} and .grpc.pb.{h,cc} at build time; users include
#       "<path>.grpc.pb.h" (e.g. "stormguard/lab/v1/lab.grpc.pb.h"). Needs gRPC found (the grpc
#       block); a missing protoc or plugin is a configure error naming the Debian package.
function(stormguard_grpc_proto target proto)
  set(hint "(`scripts/bootstrap --components grpc` installs it)")
  if(TARGET protobuf::protoc)
    set(protoc $<TARGET_FILE:protobuf::protoc>)
  else()
    find_program(STORMGUARD_PROTOC protoc)
    if(NOT STORMGUARD_PROTOC)
      message(FATAL_ERROR "STORMGUARD_WITH_GRPC is ON in a top-level build (the .proto of serve --grpc, the tests and the example), but "
        "protoc was not found (Debian: protobuf-compiler) ${hint}")
    endif()
    set(protoc "${STORMGUARD_PROTOC}")
  endif()
  if(TARGET gRPC::grpc_cpp_plugin)
    set(plugin $<TARGET_FILE:gRPC::grpc_cpp_plugin>)
  else()
    find_program(STORMGUARD_GRPC_CPP_PLUGIN grpc_cpp_plugin)
    if(NOT STORMGUARD_GRPC_CPP_PLUGIN)
      message(FATAL_ERROR "STORMGUARD_WITH_GRPC is ON in a top-level build (the .proto of serve --grpc, the tests and the example), but "
        "grpc_cpp_plugin was not found (Debian: protobuf-compiler-grpc) ${hint}")
    endif()
    set(plugin "${STORMGUARD_GRPC_CPP_PLUGIN}")
  endif()
  set(out "${PROJECT_BINARY_DIR}/generated/proto")
  string(REGEX REPLACE "\\.proto$" "" stem "${proto}")
  set(generated "${out}/${stem}.pb.h" "${out}/${stem}.pb.cc" "${out}/${stem}.grpc.pb.h"
    "${out}/${stem}.grpc.pb.cc")
  add_custom_command(OUTPUT ${generated}
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${out}"
    COMMAND ${protoc} "--proto_path=${PROJECT_SOURCE_DIR}/proto" "--cpp_out=${out}"
      "--grpc_out=${out}" "--plugin=protoc-gen-grpc=${plugin}" "${PROJECT_SOURCE_DIR}/proto/${proto}"
    DEPENDS "${PROJECT_SOURCE_DIR}/proto/${proto}"
    COMMENT "protoc: ${proto}"
    VERBATIM)
  add_library(${target} STATIC ${generated})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out}>")
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  target_compile_features(${target} PUBLIC cxx_std_20)
endfunction()
