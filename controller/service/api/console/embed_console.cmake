# Writes OUT: a C++ file defining pvs::service::console_assets() as the files FILES (a
# ;-separated list of paths relative to DIR), each as its bytes.
set(decls "")
set(rows "")
set(i 0)
foreach(rel IN LISTS FILES)
  file(READ ${DIR}/${rel} content HEX)
  string(LENGTH "${content}" hex_length)
  math(EXPR length "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
  string(APPEND decls "const unsigned char k${i}[] = {${bytes} 0};\n")
  string(APPEND rows "    {\"${rel}\", {reinterpret_cast<const char*>(k${i}), ${length}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE ${OUT}.tmp
  "// Generated from controller/console/ by embed_console.cmake.\n"
  "#include \"api/console/console.h\"\n"
  "namespace pvs::service {\n"
  "namespace {\n${decls}"
  "const ConsoleAsset kAssets[] = {\n${rows}};\n"
  "}  // namespace\n"
  "std::span<const ConsoleAsset> console_assets() { return kAssets; }\n"
  "}  // namespace pvs::service\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
