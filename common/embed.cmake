# SPDX-License-Identifier: MIT
# Turns IN (a text file) into OUT, a C file defining `const char sluice__lua_library[]`.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from scripts/sluice.lua; do not edit */\n#include <stddef.h>\n"
     "const char sluice__lua_library[] = {\n${body}0x00};\n"
     "const size_t sluice__lua_library_len = ${bytes};\n")
