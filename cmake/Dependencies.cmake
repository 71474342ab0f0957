# Every dependency is a package of Debian 13 or Debian 12 (scripts/install-deps), found the CMake
# way; what differs between the two releases is handled here, each in one place.
find_package(PkgConfig REQUIRED)
pkg_check_modules(NFTNL REQUIRED IMPORTED_TARGET libnftnl)
pkg_check_modules(MNL REQUIRED IMPORTED_TARGET libmnl)
pkg_check_modules(SSH2 REQUIRED IMPORTED_TARGET libssh2)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
# RE2 (policy patterns: linear-time matching) as PkgConfig::RE2. Debian 13's re2.pc (20240702)
# requires 15 Abseil modules, and pkg_check_modules' --static queries of that graph take minutes
# with pkgconf; the build links RE2 shared, so the plain --cflags and --libs are all it needs.
foreach(what cflags libs)
  execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --${what} re2 RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "re2 not found by pkg-config (libre2-dev, scripts/install-deps)")
  endif()
  separate_arguments(RE2_${what} UNIX_COMMAND "${out}")
endforeach()
list(REMOVE_DUPLICATES RE2_libs)
add_library(PkgConfig::RE2 INTERFACE IMPORTED)
target_compile_options(PkgConfig::RE2 INTERFACE ${RE2_cflags})
target_link_libraries(PkgConfig::RE2 INTERFACE ${RE2_libs})
pkg_check_modules(VTERM REQUIRED IMPORTED_TARGET vterm)  # terminal screens (libvterm-dev)
pkg_check_modules(PSL REQUIRED IMPORTED_TARGET libpsl)  # egress wildcards vs the Public Suffix List

find_package(tl-expected REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Poco REQUIRED COMPONENTS Foundation Net NetSSL Util JSON Crypto)
find_package(Threads REQUIRED)
if(PVS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
