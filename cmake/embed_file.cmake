# cmake -DINPUT=F -DOUTPUT=F.cpp -DNAME=kName -DMARKER=text -P embed_file.cmake
# Writes a C++ file defining `extern const unsigned char NAME[]` (the bytes of INPUT, then a NUL)
# and `extern const std::size_t NAME_size` (without the NUL) in namespace cli, so that a file
# ships inside the binary. With MARKER, INPUT must hold that text: a template without its
# insertion point fails the build, not a user's run.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
if(DEFINED MARKER AND NOT MARKER STREQUAL "")
  file(READ "${INPUT}" text)
  string(FIND "${text}" "${MARKER}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${INPUT} does not hold the marker ${MARKER}")
  endif()
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
     "// Generated from ${INPUT} by cmake/embed_file.cmake: do not edit.\n"
     "#include <cstddef>\n\nnamespace cli {\n\n"
     "extern const unsigned char ${NAME}[];\nextern const std::size_t ${NAME}_size;\n"
     "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
     "const std::size_t ${NAME}_size = ${size};\n\n}  // namespace cli\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
