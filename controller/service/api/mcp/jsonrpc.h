// JSON-RPC 2.0 as MCP uses it: the messages of one POST body (one message, or a batch where the
// negotiated protocol revision allows it), parsed and checked, and the responses written back.
// Pure: no I/O, fuzzed by tests/fuzz/fuzz_mcp_jsonrpc.cc.
//
//   auto parsed = mcp::parse_messages(body);
//   if (parsed.fatal) reply(400, mcp::error_json("null", parsed.fatal->code,
//   parsed.fatal->message)); for (auto& item : parsed.items) ...   // mcp::Message, or mcp::Invalid
//   (answer its error)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <Poco/JSON/Object.h>

namespace pvs::service::mcp {

// The protocol's error codes (JSON-RPC 2.0).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// Transport-level refusals (wrong headers, unknown session): the implementation-defined range.
inline constexpr int kServerError = -32000;

struct Message {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  std::string id;                  // as JSON text: "7" or "\"abc\"" (requests and responses)
  std::string method;              // requests and notifications
  Poco::JSON::Object::Ptr params;  // never null for requests and notifications ({} if absent)
};

// A message that is not valid JSON-RPC: answered with this error (id "null" when unknown).
struct Invalid {
  std::string id = "null";
  int code = kInvalidRequest;
  std::string message;
};

using Item = std::variant<Message, Invalid>;

struct Parsed {
  bool batch = false;            // the body was an array
  std::vector<Item> items;       // in body order
  std::optional<Invalid> fatal;  // nothing to answer item by item: not JSON, empty batch, ...
};

inline constexpr std::size_t kMaxBatch = 64;

Parsed parse_messages(std::string_view body);

// {"jsonrpc":"2.0","id":<id>,"result":<result>}
std::string result_json(std::string_view id, std::string_view result);
// {"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":"..."}}
std::string error_json(std::string_view id, int code, std::string_view message);
// {"jsonrpc":"2.0","method":"...","params":<params>}
std::string notification_json(std::string_view method, std::string_view params);

// An id or progress token as JSON text: a string or an integer; "" for anything else.
std::string id_json(const Poco::Dynamic::Var& id);

// Poco's JSON text of a value (compact).
std::string to_json(const Poco::Dynamic::Var& value);

}  // namespace pvs::service::mcp
