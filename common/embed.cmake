# SPDX-License-Identifier: MIT
# Builds the function library from its modules and embeds it. MODULES: the files of
# scripts/lua/ separated by '|', in load order (a module uses only the modules before it). Writes OUT.lua, the
# library as Redis loads it: the shebang, then each module under a line "-- @module NAME" (the
# marker scripts.c cuts an EVALSHA script at), and OUT, a C file defining
# `const char sluice__lua_library[]`. "@LIBRARY_HASH@" in the text becomes the SHA-1 of the
# library, so sluice_version tells a client whether the server runs exactly its library (else
# it is loaded with REPLACE).
set(text "#!lua name=sluice\n")
string(REPLACE "|" ";" MODULES "${MODULES}")
foreach(m IN LISTS MODULES)
    get_filename_component(name ${m} NAME_WE)
    string(REGEX REPLACE "^[0-9]+_" "" name "${name}")
    file(READ ${m} body)
    string(APPEND text "-- @module ${name}\n${body}")
endforeach()
string(SHA1 hash "${text}")
string(SUBSTRING "${hash}" 0 16 hash)
string(REPLACE "@LIBRARY_HASH@" "${hash}" text "${text}")
file(WRITE ${OUT}.lua "${text}")
file(READ ${OUT}.lua hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from the modules of scripts/lua/; do not edit */\n#include <stddef.h>\n"
     "const char sluice__lua_library[] = {\n${body}0x00};\n"
     "const size_t sluice__lua_library_len = ${bytes};\n")
