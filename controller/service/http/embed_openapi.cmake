# Writes OUT: a C++ file defining pvs::service::openapi_document() as the text of IN.
file(READ ${IN} content HEX)
string(LENGTH "${content}" hex_length)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
math(EXPR length "${hex_length} / 2")
file(WRITE ${OUT}.tmp
  "// Generated from docs/openapi.json by embed_openapi.cmake.\n"
  "#include <string_view>\n"
  "namespace pvs::service {\n"
  "namespace { const char kDocument[] = {${bytes} 0}; }\n"
  "std::string_view openapi_document() { return {kDocument, ${length}}; }\n"
  "}  // namespace pvs::service\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
