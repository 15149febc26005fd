# Precompiled headers. Each kind below is compiled once, by a donor target of its own, and reused
# (PRECOMPILE_HEADERS_REUSE_FROM) by every target of that kind: the flags must match the donor's,
# so static libraries (-fPIC) and executables (-fPIE) have donors of their own. GCC drops a PCH
# whose flags differ with a -Winvalid-pch warning (CMake adds it), an error under KLEAF_WERROR;
# clang refuses it outright. Only headers that most units of a kind include: with GCC, a unit pays
# for loading the whole PCH (tests/unit/base/tag_test.cc, which has no JSON: 0.6 s of CPU with
# GoogleTest's PCH, 1.2 s with GoogleTest's and nlohmann/json's; Beast, in 6 units, stays out).
# The client library (hidden visibility, 3 units), the app, benchmarks, fuzzers and examples
# have none. -DKLEAF_PCH=OFF builds without, e.g. to check that each file includes what it uses.
option(KLEAF_PCH "Precompiled headers for kleaf's libraries and tests (cmake/pch.cmake)" ON)

# The standard headers most units include (most through kleaf's own headers).
set(KLEAF_PCH_STD <algorithm> <array> <atomic> <chrono> <condition_variable> <expected>
  <functional> <map> <memory> <mutex> <optional> <set> <span> <sstream> <string> <string_view>
  <unordered_map> <vector>)

# Donors, made on first use: "lib" for static libraries; "unit" for the unit tests (GoogleTest),
# "e2e" for the e2e and integration tests (GoogleTest and nlohmann/json: nearly all of them use it,
# 6 of the 50 unit-test files do).
function(_kleaf_pch_donor kind)
  set(donor kleaf_pch_${kind})
  if(TARGET ${donor})
    return()
  endif()
  set(src ${PROJECT_BINARY_DIR}/kleaf_pch_donor.cc)
  if(NOT EXISTS ${src})
    file(WRITE ${src} "int main() { return 0; }\n")
  endif()
  if(kind STREQUAL "lib")
    add_library(${donor} STATIC ${src})
    target_precompile_headers(${donor} PRIVATE ${KLEAF_PCH_STD})
  else()
    add_executable(${donor} ${src})
    target_link_libraries(${donor} PRIVATE GTest::gtest)
    set(headers ${KLEAF_PCH_STD} <filesystem> <thread> <gtest/gtest.h>)
    if(kind STREQUAL "e2e")
      target_link_libraries(${donor} PRIVATE nlohmann_json::nlohmann_json)
      list(APPEND headers <nlohmann/json.hpp>)
    endif()
    target_precompile_headers(${donor} PRIVATE ${headers})
  endif()
  set_target_properties(${donor} PROPERTIES EXCLUDE_FROM_ALL ON)
endfunction()

# kleaf_precompile_headers(lib|unit|e2e TARGET...): the targets reuse the PCH of that kind.
function(kleaf_precompile_headers kind)
  if(NOT KLEAF_PCH)
    return()
  endif()
  _kleaf_pch_donor(${kind})
  set_target_properties(${ARGN} PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM kleaf_pch_${kind})
endfunction()

# kleaf_pch_skip_with_gcc(SOURCE...): with the PCH, GCC 12 inlines std::string's operator+
# differently in some units and reports its false -Warray-bounds there (char_traits.h: "forming
# offset [32, 48] is out of the bounds [0, 32]"); the same unit without the PCH, or with its
# headers -include'd as text, compiles clean (kafka/log_start.cc, by hand). Three of the 200 units
# of a full GCC build (ninja -k 0) did; they compile without the PCH under GCC.
function(kleaf_pch_skip_with_gcc)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()
