# SPDX-License-Identifier: MIT
# Turns IN (scripts/sluice.lua) into OUT, a C file defining `const char sluice__lua_library[]`.
# "@LIBRARY_HASH@" in the text becomes the SHA-1 of the source, so sluice_version tells a
# client whether the server runs exactly its library (else it is loaded with REPLACE).
file(READ ${IN} text)
string(SHA1 hash "${text}")
string(SUBSTRING "${hash}" 0 16 hash)
string(REPLACE "@LIBRARY_HASH@" "${hash}" text "${text}")
file(WRITE ${OUT}.lua "${text}")
file(READ ${OUT}.lua hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from scripts/sluice.lua; do not edit */\n#include <stddef.h>\n"
     "const char sluice__lua_library[] = {\n${body}0x00};\n"
     "const size_t sluice__lua_library_len = ${bytes};\n")
