# Files embedded into the binary at build time, the one way msprobe does it:
# what a report page needs (Chart.js from Debian's libjs-chart.js, the page's
# own script and style) and the Python sources msprobe runs (the replay worker,
# the shim's API rules, the pip listing) are in msprobe itself and never looked
# up at run time.
#
#   msp_embed(OUT_C SYMBOL INPUT): a custom command writing OUT_C, which defines
#   `const char SYMBOL[]` (the bytes of INPUT, NUL-terminated) and
#   `const size_t SYMBOL_len`. Add OUT_C to a target's sources.
#
# As a script: cmake -DIN=file -DOUT=file.c -DSYM=name -P MspEmbed.cmake
if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${IN}" hex HEX)
  string(LENGTH "${hex}" nhex)
  math(EXPR n "${nhex} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  file(WRITE "${OUT}.tmp"
      "/* Generated from ${IN} by MspEmbed.cmake; do not edit. */\n"
      "#include <stddef.h>\n"
      "extern const char ${SYM}[];\n"
      "extern const size_t ${SYM}_len;\n"
      "const char ${SYM}[] = {${bytes}0x00};\n"
      "const size_t ${SYM}_len = ${n};\n")
  file(RENAME "${OUT}.tmp" "${OUT}")
  return()
endif()

set(MSP_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
function(msp_embed out_c sym input)
  add_custom_command(
    OUTPUT ${out_c}
    COMMAND ${CMAKE_COMMAND} -DIN=${input} -DOUT=${out_c} -DSYM=${sym} -P ${MSP_EMBED_SCRIPT}
    DEPENDS ${input} ${MSP_EMBED_SCRIPT}
    COMMENT "Embedding ${input}"
    VERBATIM)
endfunction()
