# cmake -DIN=file.py -DOUT=file.c -DSYM=name -P embed_py.cmake
# Writes OUT defining `const char SYM[]`: the bytes of IN, NUL-terminated, so
# the shim can exec the same Python source gen_api_table.py imports.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp"
    "/* Generated from ${IN} by embed_py.cmake; do not edit. */\n"
    "const char ${SYM}[] = {${bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
