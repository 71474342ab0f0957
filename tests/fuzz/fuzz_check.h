// What the service's fuzz targets (fuzz_service_request, fuzz_mcp_jsonrpc) check with: a
// property that must hold (else abort, which libFuzzer reports with the input) and whether a
// reply is valid JSON.
#pragma once

#include <cstdlib>
#include <string>

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

namespace pvs::fuzz {

inline void require(bool ok) {
  if (!ok) std::abort();
}

inline bool valid_json(const std::string& text) {
  try {
    Poco::JSON::Parser().parse(text);
    return true;
  } catch (const Poco::Exception&) {
    return false;
  }
}

}  // namespace pvs::fuzz
