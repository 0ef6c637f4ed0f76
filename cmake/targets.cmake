# sy_finalize_targets(): called once at the end of the top CMakeLists.txt,
# after every add_subdirectory. It sorts each C++ target into one of two
# classes, by whether it links GoogleTest:
#   lib   libraries and executables: the code under test
#   test  test drivers
# and gives it its class's sanitizer flags (SY_SANITIZE_LIB_FLAGS /
# SY_SANITIZE_TEST_FLAGS, cmake/sanitize.cmake; empty in a normal build) and
# its class's precompiled headers.
#
# Precompiled headers (SY_PCH): the third-party headers that almost every
# translation unit parses again (nlohmann/json, the standard library, and for
# tests GoogleTest and GoogleMock: ~4 s of the ~15 s a test file takes) are
# compiled once per class, in a host target (sy_pch_lib, sy_pch_test) that
# the others reuse (REUSE_FROM). A host has its class's flags; a target whose
# own flags make GCC reject the .gch (feature-test macros from ncurses'
# pkg-config, say) silently parses the headers itself: correct, only slower.
# A PCH force-includes its headers, so a missing #include may go unnoticed in
# a PCH build; the ccache builds (no PCH) still catch it.
#
# Under ccache SY_PCH stays off (CMAKE_CXX_COMPILER_LAUNCHER): ccache
# does not cache compiles that use a .gch without extra sloppiness settings,
# and a warm ccache beats any PCH.
# Off by default: with the PCH, GCC 12 reports false -Warray-bounds inside
# libstdc++ (std::string) at -O3 in a few files that build clean without it.
# The -O1 sanitizer build (clang since 2026-11-27) does not; scripts/build
# --sanitize turns it on (with GCC it took ~8.5 instead of ~11.5 min on 2
# cores). -DSY_PCH=ON for faster local builds.
set(_sy_pch_default OFF)
option(SY_PCH "Precompile the heavy third-party headers (off under ccache)" ${_sy_pch_default})

set(SY_PCH_LIB_HEADERS
    <algorithm> <atomic> <chrono> <cstdint> <deque> <functional> <map> <memory> <mutex>
    <optional> <set> <string> <string_view> <unordered_map> <utility> <variant> <vector>
    <nlohmann/json.hpp>)
set(SY_PCH_TEST_HEADERS ${SY_PCH_LIB_HEADERS} <gtest/gtest.h> <gmock/gmock.h>)

# Test drivers need not be fast, only the code they test: in an optimised
# build they compile at -O1 while the libraries and executables keep the build
# type's level. GCC at -O3 spends most of a test file's time optimising
# GoogleTest's macro expansions. (Not -O0 in the sanitizer build, whose
# libraries are at -O1: the linker keeps a test file's -O0 copy of the
# templates and inline functions it shares with the libraries, and the suite
# ran 24% slower for a build 18% faster.)
set(SY_TEST_OPT_FLAGS "")
if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
  set(SY_TEST_OPT_FLAGS -O1)
endif()

function(_sy_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _sy_collect_targets("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# sy_finalize_targets() also defines sy_programs: every target of the lib
# class (the libraries, the executables, the fixtures and benchmarks the
# tests drive) and the test drivers registered through sy_mark_program_test()
# (the GoogleTest binaries labelled integration or numerics), but no other
# unit-test driver. The Release stage of scripts/test builds it: what ships,
# at the optimisation it ships with, what its integration tests need, and
# the checks of the numerics against the reference at that optimisation.
function(sy_mark_program_test target)
  set_property(GLOBAL APPEND PROPERTY SY_PROGRAM_TESTS ${target})
endfunction()

function(sy_finalize_targets)
  _sy_collect_targets("${CMAKE_SOURCE_DIR}" targets)
  get_property(programs GLOBAL PROPERTY SY_PROGRAM_TESTS)
  if(SY_PCH)
    set(anchor "${CMAKE_BINARY_DIR}/sy_pch_anchor.cc")
    file(CONFIGURE OUTPUT "${anchor}" CONTENT "// Host of the precompiled headers.\n")
    add_library(sy_pch_lib OBJECT "${anchor}")
    target_link_libraries(sy_pch_lib PRIVATE nlohmann_json::nlohmann_json)
    target_precompile_headers(sy_pch_lib PRIVATE ${SY_PCH_LIB_HEADERS})
    add_library(sy_pch_test OBJECT "${anchor}")
    target_link_libraries(sy_pch_test PRIVATE nlohmann_json::nlohmann_json GTest::gtest
                                              GTest::gmock)
    target_precompile_headers(sy_pch_test PRIVATE ${SY_PCH_TEST_HEADERS})
    list(APPEND targets sy_pch_lib sy_pch_test)
  endif()
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(libs ${t} LINK_LIBRARIES)
    if(NOT libs)
      set(libs "")
    endif()
    if(t STREQUAL "sy_pch_test" OR "GTest::gtest" IN_LIST libs OR "GTest::gtest_main" IN_LIST libs)
      set(class test)
      target_compile_options(${t} PRIVATE ${SY_SANITIZE_TEST_FLAGS} ${SY_TEST_OPT_FLAGS})
    else()
      set(class lib)
      target_compile_options(${t} PRIVATE ${SY_SANITIZE_LIB_FLAGS})
      if(NOT t MATCHES "^sy_pch_")
        list(APPEND programs ${t})
      endif()
    endif()
    get_target_property(own ${t} PRECOMPILE_HEADERS)
    get_target_property(reused ${t} PRECOMPILE_HEADERS_REUSE_FROM)
    if(SY_PCH AND NOT own AND NOT reused)
      target_precompile_headers(${t} REUSE_FROM sy_pch_${class})
    endif()
  endforeach()
  add_custom_target(sy_programs)
  add_dependencies(sy_programs ${programs})
endfunction()
