# Included by CMakeLists.txt once the Manager exists.
add_library(pvs_service STATIC server.cc)
target_include_directories(pvs_service PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(pvs_service PUBLIC pvs_service_core pvesandbox Poco::Net Poco::NetSSL
                                         Poco::Util Poco::Foundation Threads::Threads)

add_executable(pve-sandbox-controller main.cc)
target_link_libraries(pve-sandbox-controller PRIVATE pvs_service)
