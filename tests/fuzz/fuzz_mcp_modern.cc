// Fuzzes what revision 2026-07-28 of the MCP endpoint reads from a client before any method
// runs (controller/service/mcp/modern.cc, request_state.cc): a request body with its
// MCP-Protocol-Version / Mcp-Method / Mcp-Name headers (era, _meta, header-body checks), a
// header value (the Base64 sentinel) and a requestState. Whatever the bytes: the era is one of
// two, a refusal carries one of the revision's codes with its HTTP status and its reply is
// valid JSON, an accepted request has what the revision requires, and a forged state never
// opens.
//
// Input: the first byte picks the target; for requests, the rest is
// "<protocol-version>\n<method>\n<name>\n<body>" (a header left empty is absent).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/modern.h"
#include "api/mcp/modern_result.h"
#include "api/mcp/request_state.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service;

using pvs::fuzz::require;
using pvs::fuzz::valid_json;

std::string_view next_line(std::string_view& in) {
  auto nl = in.find('\n');
  std::string_view line = in.substr(0, nl);
  in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  return line;
}

void fuzz_request(std::string_view input) {
  std::string_view version = next_line(input), method = next_line(input), name = next_line(input);
  auto parsed = mcp::parse_messages(input);
  if (parsed.fatal || parsed.batch) return;
  const auto* m = std::get_if<mcp::Message>(&parsed.items[0]);
  if (!m) return;
  auto era = mcp::request_era(*m, version);
  require(era == mcp::Era::kModern || era == mcp::Era::kLegacy);
  mcp::RequestHeaders h{std::string(version),
                        method.empty() ? std::nullopt : std::optional<std::string>(method),
                        name.empty() ? std::nullopt : std::optional<std::string>(name)};
  auto meta = mcp::check_modern_request(*m, h);
  if (!meta) {
    const auto& e = meta.error();
    require((e.code == mcp::kInvalidParams && e.http_status == 400) ||
            (e.code == mcp::kHeaderMismatch && e.http_status == 400) ||
            (e.code == mcp::kUnsupportedProtocolVersion && e.http_status == 400));
    require(!e.message.empty());
    require(valid_json(mcp::wire_error_json(m->id, e)));
    return;
  }
  require(mcp::is_modern_version(meta->protocol_version));
  require(meta->protocol_version == version);
  require(meta->client_capabilities);
  require(h.method && *h.method == m->method);
  if (!m->id.empty()) {
    require(valid_json(mcp::result_json(
        m->id, mcp::complete_result("{}", mcp::server_info_json({"a", "1", ""})))));
  }
}

void fuzz_state(std::string_view input) {
  static const std::string key = mcp::new_state_key();
  auto st = mcp::open_state(input, key, 0);
  require(!st);  // only the server can seal one
  require(!st.error().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: fuzz_request(input); break;
    case 1: {
      auto v = mcp::decode_header_value(input);
      if (v && input.rfind("=?base64?", 0) != 0) require(*v == input);
      break;
    }
    case 2: fuzz_state(input); break;
  }
  return 0;
}
