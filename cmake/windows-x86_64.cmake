# Cross-building the core for Windows x86_64 (x86_64-windows-gnu: MinGW-w64
# headers, winpthreads, Winsock) with Zig's cc. scripts/windows-test.sh
# passes CMAKE_C_COMPILER (a wrapper running `zig cc -target
# x86_64-windows-gnu`), RL_HIREDIS_PREFIX and OPENSSL_ROOT_DIR (both built
# for this target from Debian's sources); the host's libraries are never
# looked for.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(OPENSSL_USE_STATIC_LIBS TRUE)
# pkg-config answers for hiredis from RL_HIREDIS_PREFIX only
set(ENV{PKG_CONFIG_LIBDIR} "")
# the core compiles with -fexceptions (its cleanups run when a thread
# unwinds): Zig links no unwinder for C unless asked (MinGW's gcc would
# bring libgcc_eh); lld-link resolves it in any order
set(CMAKE_EXE_LINKER_FLAGS_INIT "-lunwind")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-lunwind")
