# libFuzzer targets (RL_FUZZ=ON, clang only): one per parser, linked against
# the core's sources compiled again with coverage instrumentation
# (-fsanitize=fuzzer-no-link) under ASan and UBSan. Included from the top
# CMakeLists.txt, so the generated rl_scripts.c is at hand. scripts/fuzz.sh
# builds and runs them.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "RL_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
endif()
set(RL_FUZZ_SANITIZERS -fno-omit-frame-pointer -fno-sanitize-recover=all)
add_library(rl_fuzz_core OBJECT ${RL_CORE_SOURCES})
target_include_directories(rl_fuzz_core PUBLIC ${RL_CORE_INCLUDE_DIRS})
target_compile_options(rl_fuzz_core PRIVATE -fsanitize=fuzzer-no-link,address,undefined ${RL_FUZZ_SANITIZERS})
target_link_libraries(rl_fuzz_core PUBLIC rl_hiredis Threads::Threads)
set(RL_FUZZ_TARGETS fuzz_url fuzz_rate fuzz_spec fuzz_reply)
foreach(target ${RL_FUZZ_TARGETS})
  add_executable(${target} fuzz/${target}.c)
  target_compile_options(${target} PRIVATE -fsanitize=fuzzer,address,undefined ${RL_FUZZ_SANITIZERS})
  target_link_options(${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${target} PRIVATE rl_fuzz_core)
endforeach()
add_custom_target(fuzz DEPENDS ${RL_FUZZ_TARGETS})
