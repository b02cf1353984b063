# The core's sources with its Lua scripts embedded, for every build that
# compiles the core in (the C library here, the JNI library in bindings/java).
# Needs RL_ROOT (the repository root); sets RL_CORE_SOURCES (core/src/*.c and
# the generated rl_scripts.c) and RL_CORE_INCLUDE_DIRS.
file(GLOB RL_LUA_SCRIPTS CONFIGURE_DEPENDS "${RL_ROOT}/lua/*.lua")
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
