# Warnings are errors everywhere: a warning-free build is part of "main is green".
add_compile_options(-Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wformat=2)
# In a unity batch every source is an included file, and g++ then takes a class of a .cc that
# holds a type of its anonymous namespace (a pimpl's Impl) for a header's: a false alarm there.
if(PVS_UNITY AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-subobject-linkage)
endif()

if(PVS_SANITIZE)
  set(_pvs_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${_pvs_san})
  add_link_options(${_pvs_san})
endif()

if(PVS_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "PVS_FUZZ needs clang (configure with CXX=clang++)")
endif()
