// The project's version, from the one place it is set (project() in CMakeLists.txt).
#pragma once

#include <string_view>

namespace pvs {

std::string_view version();

}  // namespace pvs
