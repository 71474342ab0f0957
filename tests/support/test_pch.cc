// Compiled only so that pvs_test_pch has a target to build the test programs' shared precompiled
// header with (tests/CMakeLists.txt); it defines nothing.
