# Compiler flags of a KLEAF_FUZZ build: coverage for libFuzzer and ASan+UBSan on all of kleaf's
# code, every UBSan report fatal (a finding, not a log line).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "KLEAF_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-16")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
# (The __cpp_concepts raise that lets clang 16 use libstdc++ 12's std::expected is in the top
# CMakeLists.txt, for every clang build.)
