# SPDX-License-Identifier: MIT
# Embeds the operator's page (producer/ui/) in sluice-gateway. FILES: the files separated by
# '|'; OUT: a C file defining, for each file "index.html", `const char gw_ui_index_html[]`
# (NUL-terminated) and `const size_t gw_ui_index_html_len` (without the NUL).
string(REPLACE "|" ";" FILES "${FILES}")
set(out "/* generated from producer/ui/; do not edit */\n#include <stddef.h>\n")
foreach(f IN LISTS FILES)
    get_filename_component(name ${f} NAME)
    string(MAKE_C_IDENTIFIER "gw_ui_${name}" id)
    file(READ ${f} hex HEX)
    string(LENGTH "${hex}" n)
    math(EXPR bytes "${n} / 2")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
    string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
           body "${body}")
    string(APPEND out "extern const char ${id}[];\nextern const size_t ${id}_len;\n"
           "const char ${id}[] = {\n${body}0x00};\nconst size_t ${id}_len = ${bytes};\n")
endforeach()
file(WRITE ${OUT} "${out}")
