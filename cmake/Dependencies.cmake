# Every dependency is a Debian 12 package (scripts/install-deps), found the CMake way.
find_package(PkgConfig REQUIRED)
pkg_check_modules(NFTNL REQUIRED IMPORTED_TARGET libnftnl)
pkg_check_modules(MNL REQUIRED IMPORTED_TARGET libmnl)
pkg_check_modules(SSH2 REQUIRED IMPORTED_TARGET libssh2)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)  # policy patterns: linear-time matching
pkg_check_modules(VTERM REQUIRED IMPORTED_TARGET vterm)  # terminal screens (libvterm-dev)
pkg_check_modules(PSL REQUIRED IMPORTED_TARGET libpsl)  # egress wildcards vs the Public Suffix List

find_package(tl-expected REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Poco REQUIRED COMPONENTS Foundation Net NetSSL Util JSON Crypto)
find_package(Threads REQUIRED)
if(PVS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
