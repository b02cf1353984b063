# The core's sources with its Lua scripts embedded, for every build that
# compiles the core in (the C library here, the JNI library in bindings/java).
# Needs RL_ROOT (the repository root); sets RL_CORE_SOURCES (core/src/*.c and
# the generated rl_scripts.c) and RL_CORE_INCLUDE_DIRS.
file(GLOB_RECURSE RL_LUA_SCRIPTS CONFIGURE_DEPENDS "${RL_ROOT}/lua/*.lua")
set(RL_GEN_DIR "${CMAKE_CURRENT_BINARY_DIR}/generated")
file(MAKE_DIRECTORY "${RL_GEN_DIR}")
# regenerated when a script changes; never committed
add_custom_command(
  OUTPUT "${RL_GEN_DIR}/rl_scripts.c" "${RL_GEN_DIR}/rl_scripts.h"
  COMMAND ${CMAKE_COMMAND} -DLUA_DIR=${RL_ROOT}/lua -DOUT_DIR=${RL_GEN_DIR}
          -P ${RL_ROOT}/cmake/embed_lua.cmake
  DEPENDS ${RL_LUA_SCRIPTS} "${RL_ROOT}/cmake/embed_lua.cmake"
  COMMENT "Embedding Lua scripts")
file(GLOB RL_CORE_SOURCES CONFIGURE_DEPENDS "${RL_ROOT}/core/src/*.c")
list(APPEND RL_CORE_SOURCES "${RL_GEN_DIR}/rl_scripts.c")
set(RL_CORE_INCLUDE_DIRS "${RL_ROOT}/core/include" "${RL_ROOT}/core/src" "${RL_GEN_DIR}")

# hiredis, and TLS when it can: rl_find_hiredis(<target> [STATIC]) creates
# the INTERFACE target <target> (hiredis's include dirs and flags, its
# libraries, and with TLS hiredis_ssl + OpenSSL and RL_HAVE_TLS=1) and sets
#   RL_HAVE_TLS            TRUE/FALSE
#   RL_HIREDIS_VERSION     e.g. 1.2.0 or 0.14.1
#   RL_HIREDIS_FROM_PREFIX TRUE when it came from RL_HIREDIS_PREFIX
#   RL_HIREDIS_LIBS        the hiredis library files linked (hiredis_ssl first)
# STATIC: link the static archives (the JNI library must not need libhiredis).
# Cache variables:
#   RL_HIREDIS_PREFIX  a hiredis prefix to prefer over the system's ("auto":
#                      build/deps/hiredis from scripts/hiredis.sh when it
#                      exists; empty or NONE: pkg-config's system hiredis only).
#                      Defaults to $ENV{RL_HIREDIS_PREFIX}, else auto.
#   RL_TLS             ON (default; $ENV{RL_TLS} when set): TLS when hiredis
#                      >= 1.0, hiredis_ssl and OpenSSL are found; OFF: never.
if(DEFINED ENV{RL_HIREDIS_PREFIX})
  set(_rl_prefix_default "$ENV{RL_HIREDIS_PREFIX}")
else()
  set(_rl_prefix_default auto)
endif()
set(RL_HIREDIS_PREFIX "${_rl_prefix_default}" CACHE STRING
  "hiredis prefix to prefer: a path, auto (build/deps/hiredis when it exists) or empty (system hiredis)")
set(_rl_tls_default ON)
if(DEFINED ENV{RL_TLS} AND NOT "$ENV{RL_TLS}" STREQUAL "")
  if("$ENV{RL_TLS}")
    set(_rl_tls_default ON)
  else()
    set(_rl_tls_default OFF)
  endif()
endif()
option(RL_TLS "TLS (rediss://) when hiredis >= 1.0 with hiredis_ssl and OpenSSL are found" ${_rl_tls_default})

function(rl_find_hiredis target)
  cmake_parse_arguments(arg "STATIC" "" "" ${ARGN})
  find_package(PkgConfig REQUIRED)
  set(prefix "${RL_HIREDIS_PREFIX}")
  if(prefix STREQUAL "auto")
    set(prefix "")
    if(EXISTS "${RL_ROOT}/build/deps/hiredis/lib/pkgconfig/hiredis.pc")
      set(prefix "${RL_ROOT}/build/deps/hiredis")
    endif()
  elseif(prefix MATCHES "^(NONE|none|OFF|off|system)$")
    set(prefix "")
  endif()
  set(saved_pc_path "$ENV{PKG_CONFIG_PATH}")
  set(from_prefix FALSE)
  if(prefix)
    if(NOT EXISTS "${prefix}/lib/pkgconfig/hiredis.pc")
      message(FATAL_ERROR "RL_HIREDIS_PREFIX=${prefix}: no lib/pkgconfig/hiredis.pc there "
        "(scripts/hiredis.sh builds one in build/deps/hiredis; empty: use the system hiredis)")
    endif()
    set(from_prefix TRUE)
    set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig:${saved_pc_path}")
  endif()

  # pkg_check_modules caches its answers: ask again, the prefix may have changed
  foreach(p RLDEP_HIREDIS RLDEP_HIREDIS_SSL)
    unset(__pkg_config_checked_${p} CACHE)
  endforeach()
  pkg_check_modules(RLDEP_HIREDIS QUIET hiredis)
  if(NOT RLDEP_HIREDIS_FOUND)
    set(ENV{PKG_CONFIG_PATH} "${saved_pc_path}")
    message(FATAL_ERROR "hiredis not found by pkg-config: install it (Debian/Ubuntu: apt-get install "
      "libhiredis-dev libssl-dev, then scripts/hiredis.sh for TLS on Debian bookworm; Fedora: dnf install "
      "hiredis-devel openssl-devel; macOS: brew install hiredis openssl)")
  endif()
  set(tls FALSE)
  set(why "")
  if(NOT RL_TLS)
    set(why "RL_TLS=OFF")
  elseif(RLDEP_HIREDIS_VERSION VERSION_LESS 1.0)
    set(why "hiredis ${RLDEP_HIREDIS_VERSION} < 1.0")
  else()
    pkg_check_modules(RLDEP_HIREDIS_SSL QUIET hiredis_ssl)
    find_package(OpenSSL QUIET)
    if(NOT RLDEP_HIREDIS_SSL_FOUND)
      set(why "hiredis_ssl not found")
    elseif(NOT OPENSSL_FOUND)
      set(why "OpenSSL not found")
    else()
      set(tls TRUE)
    endif()
  endif()
  set(ENV{PKG_CONFIG_PATH} "${saved_pc_path}")

  # the library files, looked up where pkg-config says, then the default
  # paths (Debian's hiredis.pc says /usr/lib, the files are in the multiarch dir)
  set(names hiredis)
  if(tls)
    list(PREPEND names hiredis_ssl)
  endif()
  set(libs "")
  foreach(name IN LISTS names)
    set(file_names ${name})
    if(arg_STATIC OR from_prefix)
      set(file_names lib${name}.a ${name})
    endif()
    set(var RL_${name}_LIBRARY)
    string(TOUPPER "${var}" var)
    unset(${var} CACHE)
    if(from_prefix)
      find_library(${var} NAMES ${file_names} PATHS "${prefix}/lib" NO_DEFAULT_PATH)
    else()
      if(arg_STATIC)
        set(file_names lib${name}.a)
      endif()
      find_library(${var} NAMES ${file_names} HINTS ${RLDEP_HIREDIS_LIBDIR} ${RLDEP_HIREDIS_LIBRARY_DIRS})
    endif()
    if(NOT ${var})
      message(FATAL_ERROR "${file_names} not found (hiredis ${RLDEP_HIREDIS_VERSION}, libdir ${RLDEP_HIREDIS_LIBDIR})")
    endif()
    mark_as_advanced(${var})
    list(APPEND libs "${${var}}")
  endforeach()

  add_library(${target} INTERFACE)
  # with 0.14's hiredis.pc (-I/usr/include/hiredis) <hiredis/hiredis.h> is in
  # /usr/include; with 1.x the prefix's include dir comes first
  target_include_directories(${target} INTERFACE ${RLDEP_HIREDIS_INCLUDE_DIRS})
  target_compile_options(${target} INTERFACE ${RLDEP_HIREDIS_CFLAGS_OTHER})
  target_link_libraries(${target} INTERFACE ${libs})
  if(tls)
    target_compile_definitions(${target} INTERFACE RL_HAVE_TLS=1)
    target_link_libraries(${target} INTERFACE OpenSSL::SSL OpenSSL::Crypto)
    message(STATUS "hiredis ${RLDEP_HIREDIS_VERSION} with TLS (hiredis_ssl, OpenSSL ${OPENSSL_VERSION}): ${libs}")
  else()
    message(STATUS "Building without TLS (${why}): hiredis ${RLDEP_HIREDIS_VERSION}, ${libs}")
  endif()
  set(RL_HAVE_TLS ${tls} PARENT_SCOPE)
  set(RL_HIREDIS_VERSION ${RLDEP_HIREDIS_VERSION} PARENT_SCOPE)
  set(RL_HIREDIS_FROM_PREFIX ${from_prefix} PARENT_SCOPE)
  set(RL_HIREDIS_LIBS "${libs}" PARENT_SCOPE)
endfunction()
