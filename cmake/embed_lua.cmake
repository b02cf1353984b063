# Turns lua/*.lua into a C source and header (name, SHA1, text) so the
# scripts are embedded byte for byte, never copied by hand. A line
# "--@include <path>" is replaced by that file (relative to lua/): the
# algorithms in lua/algorithms/ are written once and shared.
# Usage: cmake -DLUA_DIR=<dir> -DOUT_DIR=<dir> -P embed_lua.cmake
# Used by the CMake build, setup.py and the Maven build alike.
if(NOT LUA_DIR OR NOT OUT_DIR)
  message(FATAL_ERROR "embed_lua.cmake needs -DLUA_DIR and -DOUT_DIR")
endif()
file(GLOB scripts "${LUA_DIR}/*.lua")
list(SORT scripts)
set(enum "")
set(defs "")
set(index 0)
foreach(script IN LISTS scripts)
  get_filename_component(name "${script}" NAME_WE)
  string(TOUPPER "${name}" upper)
  file(READ "${script}" text)
  string(REGEX MATCHALL "--@include [^\n]+" includes "${text}")
  foreach(line IN LISTS includes)
    string(REPLACE "--@include " "" path "${line}")
    file(READ "${LUA_DIR}/${path}" included)
    string(REPLACE "${line}\n" "${included}" text "${text}")
  endforeach()
  string(SHA1 sha "${text}")
  string(HEX "${text}" hex)
  string(LENGTH "${text}" size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  " bytes "${bytes}")
  string(APPEND enum "    RL_SCRIPT_${upper} = ${index},\n")
  string(APPEND defs "static const char text_${name}[] = {\n  ${bytes}0x00};\n")
  list(APPEND table "    {\"${name}\", \"${sha}\", text_${name}, ${size}},\n")
  math(EXPR index "${index} + 1")
endforeach()
string(REPLACE ";" "" table "${table}")

set(header "/* Generated from the lua/ scripts by cmake/embed_lua.cmake: do not edit. */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H
#include <stddef.h>
typedef struct {
    const char *name;
    const char *sha1;
    const char *text;
    size_t length;
} rl_script_def;
enum {
${enum}    RL_SCRIPT_COUNT = ${index}
};
extern const rl_script_def rl_scripts[RL_SCRIPT_COUNT];
#endif
")
set(source "/* Generated from the lua/ scripts by cmake/embed_lua.cmake: do not edit. */
#include \"rl_scripts.h\"
${defs}
const rl_script_def rl_scripts[RL_SCRIPT_COUNT] = {
${table}};
")
# rewrite only on change so dependents are not rebuilt needlessly
foreach(pair "rl_scripts.h;header" "rl_scripts.c;source")
  list(GET pair 0 file)
  list(GET pair 1 var)
  set(path "${OUT_DIR}/${file}")
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL "${${var}}")
    file(WRITE "${path}" "${${var}}")
  endif()
endforeach()
