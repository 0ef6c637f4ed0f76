# SY_SANITIZE: a checking build under the sanitizers, e.g.
#   cmake -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSY_SANITIZE=address,undefined
# (scripts/test builds one in build-asan through `scripts/build --sanitize`
# and runs the suite there). Leave it empty for a normal build.
#
# What is instrumented, and why (GCC 12 costs, user CPU seconds to compile
# tests/engine/server/rebalance_test.cc: Release -O3 15.6, -O1 13.4, -O1 ASan
# 18.8, -O1 UBSan 22.9, -O1 ASan+UBSan 33.0 (38.5 with -g1), the same
# without UBSan's vptr, null and object-size checks 25.8):
#   - every library and executable (the code under test): all of
#     SY_SANITIZE. UBSan's vptr, null and object-size checks are left out:
#     they double the compile time of template-heavy code, ASan already
#     reports null dereferences (SEGV, with a stack) and out-of-bounds
#     accesses, and nothing here downcasts polymorphic types unchecked.
#   - test drivers (targets that link GoogleTest): AddressSanitizer only.
#     UBSan in GoogleTest's templates costs more than the rest of the build
#     and checks test scaffolding, not the engine; heap errors, leaks and
#     out-of-bounds accesses in tests are still caught.
# UBSan aborts on its first report (-fno-sanitize-recover), so undefined
# behaviour fails the test instead of printing and passing. -O1 keeps the
# instrumented suite fast enough to run. No debug info by default
# (SY_SANITIZE_DEBUG=-g0 overrides the Debug build type's -g; reports still
# name the functions): configure with -DSY_SANITIZE_DEBUG=-g1 for file:line.
# Debug as the build type keeps assert()s on.
#
# Sets SY_SANITIZE_LIB_FLAGS and SY_SANITIZE_TEST_FLAGS, which
# sy_finalize_targets() (cmake/targets.cmake) applies per target.
set(SY_SANITIZE "" CACHE STRING
    "Sanitizers for a checking build, e.g. address,undefined (empty: none)")
set(SY_SANITIZE_DEBUG "-g0" CACHE STRING "Debug info of the sanitizer build (-g0, -g1, -g)")
set(SY_SANITIZE_LIB_FLAGS "")
set(SY_SANITIZE_TEST_FLAGS "")
if(SY_SANITIZE)
  if(SY_FUZZ)
    message(FATAL_ERROR "SY_SANITIZE and SY_FUZZ are separate builds; SY_FUZZ brings its own")
  endif()
  string(REPLACE "," ";" _sy_sanitizers "${SY_SANITIZE}")
  add_compile_options(-O1 -fno-omit-frame-pointer ${SY_SANITIZE_DEBUG})
  add_link_options(-fsanitize=${SY_SANITIZE})
  set(SY_SANITIZE_LIB_FLAGS -fsanitize=${SY_SANITIZE})
  if("undefined" IN_LIST _sy_sanitizers)
    list(APPEND SY_SANITIZE_LIB_FLAGS -fno-sanitize=vptr,null,object-size
         -fno-sanitize-recover=undefined)
  endif()
  list(REMOVE_ITEM _sy_sanitizers undefined)
  if(_sy_sanitizers)
    string(REPLACE ";" "," _sy_test_sanitizers "${_sy_sanitizers}")
    set(SY_SANITIZE_TEST_FLAGS -fsanitize=${_sy_test_sanitizers})
  endif()
endif()
