// The OpenAPI 3 document of the REST API (docs/openapi.json, compiled in).
#pragma once

#include <string_view>

namespace pvs::service {
std::string_view openapi_document();
}  // namespace pvs::service
