// What the fuzz targets of the service (fuzz_service_request, fuzz_mcp_jsonrpc, fuzz_mcp_modern,
// fuzz_e2b_wire, fuzz_audit_tail, fuzz_console_path, fuzz_terminal_input) check with: a
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
