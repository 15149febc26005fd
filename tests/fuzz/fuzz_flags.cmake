# Compiler flags of a KLEAF_FUZZ build: coverage for libFuzzer and ASan+UBSan on all of kleaf's
# code, every UBSan report fatal (a finding, not a log line).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "KLEAF_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-16")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
# libstdc++ 12 offers std::expected (kleaf's Result) only when __cpp_concepts >= 202002L. Clang 16
# implements what <expected> needs (conditionally trivial special members) but still reports
# 201907L, so the macro is raised for this build.
add_compile_options(-Wno-macro-redefined -D__cpp_concepts=202002L)
