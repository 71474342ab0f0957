// Fuzzes what the MCP endpoint parses from a client before any tool runs
// (controller/service/api/mcp): the JSON-RPC body (one message or a batch), the edit of edit_file
// with its diff, and the Accept / Origin header rules. Whatever the bytes, the parser returns
// messages or errors with a JSON-RPC code, every reply built from them is valid JSON, an edit
// either fails with a message or replaces what it says, and no rule crashes.
//
// Input: the first byte picks the target, the rest is its input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/protocol.h"
#include "core/text/file_edit.h"
#include "fuzz_check.h"

namespace {

using namespace pvs;
using namespace pvs::service;

using fuzz::require;
using fuzz::valid_json;

bool known_code(int code) {
  return code == mcp::kParseError || code == mcp::kInvalidRequest || code == mcp::kInvalidParams;
}

void fuzz_messages(std::string_view body) {
  auto parsed = mcp::parse_messages(body);
  if (parsed.fatal) {
    require(parsed.items.empty());
    require(known_code(parsed.fatal->code));
    require(
        valid_json(mcp::error_json(parsed.fatal->id, parsed.fatal->code, parsed.fatal->message)));
    return;
  }
  require(!parsed.items.empty());
  require(parsed.batch || parsed.items.size() == 1);
  require(parsed.items.size() <= mcp::kMaxBatch);
  for (const auto& item : parsed.items) {
    if (const auto* bad = std::get_if<mcp::Invalid>(&item)) {
      require(known_code(bad->code));
      require(valid_json(mcp::error_json(bad->id, bad->code, bad->message)));
      continue;
    }
    const auto& m = std::get<mcp::Message>(item);
    if (m.kind != mcp::Message::Kind::kResponse) require(m.params);
    if (m.kind == mcp::Message::Kind::kNotification) continue;
    require(!m.id.empty());
    require(valid_json(mcp::result_json(m.id, "{}")));
    require(valid_json(mcp::error_json(m.id, mcp::kMethodNotFound, m.method)));
  }
}

// "old\0new\0content": an edit, checked against what it claims.
void fuzz_edit(std::string_view input, bool all) {
  auto a = input.find('\0');
  auto b = a == std::string_view::npos ? a : input.find('\0', a + 1);
  if (b == std::string_view::npos) return;
  std::string old_s(input.substr(0, a)), new_s(input.substr(a + 1, b - a - 1));
  std::string_view content = input.substr(b + 1);
  auto r = apply_edit(content, {old_s, new_s, all});
  if (!r) {
    require(!r.error().message.empty());
    return;
  }
  require(r->replaced >= 1 && (all || r->replaced == 1));
  require(r->offsets.size() == r->replaced);
  require(r->content.size() + r->replaced * r->old_length ==
          content.size() + r->replaced * r->new_text.size());
  std::string diff = unified_diff("f", content, *r, {3, 2048, 80});
  require(diff.rfind("--- f\n+++ f\n", 0) == 0);
  require(diff.size() <= 2048 + 64);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: fuzz_messages(input); break;
    case 1: fuzz_edit(input, data[0] & 4); break;
    case 2: (void)mcp::accepts(input, "application/json"); break;
    case 3: (void)mcp::origin_allowed(input, {}); break;
  }
  return 0;
}
