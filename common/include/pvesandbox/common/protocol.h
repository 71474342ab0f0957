// The agent wire protocol (docs/protocol.md): one request and one reply per line,
// ASCII, '\n'-terminated.
//
//   HELLO 1                      -> OK pve-sandbox-agent <version> proto=1
//   ALLOW <ipv4> [ttl=<seconds>] -> OK
//   REVOKE <ipv4>                -> OK
//   SYNC [<ipv4>[@<ttl>] ...]    -> OK <n>
//   LIST                         -> OK <n> <ipv4>[@<seconds-left>] ...
//   BIND <port> <mac> <ipv4>     -> OK
//   UNBIND <port>                -> OK
//   BINDINGS                     -> OK <n> <port>=<mac>/<ipv4> ...
//   STATUS                       -> OK <key>=<value> ...
//   EGRESS <ipv4> ports=<p>[,<p>...] names=<name>[,<name>...] -> OK
//   EGRESS <ipv4> off            -> OK
//   EGRESSES                     -> OK <n> <ipv4>=<ports>/<names> ...
//   ASK <ipv4> <name>            -> OK allow ports=<p>[,<p>...] | OK deny
//   PAIR <ipv4> <name> <dst>[,<dst>...] ttl=<seconds> -> OK <n>
//   ROUTE <ipv4> <tcp port> <seconds> -> OK
//   UNROUTE <ipv4> <tcp port>    -> OK
//   anything wrong               -> ERR <code> <message>
//
// The codec is strict: fields are separated by exactly one space, verbs are upper case, and any
// byte outside printable ASCII (NUL, CR, TAB, >= 0x7f) rejects the line. Every function here
// takes a line *without* its terminating '\n'; framing is the caller's job.
//
// Policy (which addresses are allowed, the element limit) is not checked here: the codec only
// knows what is well-formed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/mac_address.h"

namespace pvs::proto {

inline constexpr int kProtocolVersion = 1;
// Longest request line, '\n' excluded. A longer line is answered with ERR 413.
inline constexpr std::size_t kMaxRequestLine = 64 * 1024;
// Longest reply line a client accepts. Larger than kMaxRequestLine because LIST and BINDINGS
// grow with the set (max_elements addresses at up to 26 bytes each).
inline constexpr std::size_t kMaxReplyLine = 4 * 1024 * 1024;
// Longest lease: 30 days. Leases are renewed by the controller; older kernels also mishandle
// element timeouts beyond 2^32 ms.
inline constexpr std::uint32_t kMaxTtlSeconds = 30u * 24 * 3600;

// The numeric codes of ERR replies.
enum class ReplyCode : int {
  kBadRequest = 400,
  kForbidden = 403,  // "not authorized" and "address not allowed"
  kConflict = 409,   // "ruleset missing"
  kTooLarge = 413,
  kInternal = 500,
};

// An address with an optional lease in seconds (ALLOW, SYNC), or with the seconds left on
// its lease (LIST). No ttl means no timeout.
struct Grant {
  Ipv4Address address;
  std::optional<std::uint32_t> ttl_seconds;
  bool operator==(const Grant&) const = default;
};

// The L2 guard of one bridge port: frames from `port` must carry `mac`, and their IPv4/ARP
// source must be `address`.
struct Binding {
  std::string port;
  MacAddress mac;
  Ipv4Address address;
  bool operator==(const Binding&) const = default;
};

struct HelloRequest {
  int version = kProtocolVersion;
  bool operator==(const HelloRequest&) const = default;
};
struct AllowRequest {
  Grant grant;
  bool operator==(const AllowRequest&) const = default;
};
struct RevokeRequest {
  Ipv4Address address;
  bool operator==(const RevokeRequest&) const = default;
};
struct SyncRequest {
  std::vector<Grant> grants;  // no address twice
  bool operator==(const SyncRequest&) const = default;
};
struct ListRequest {
  bool operator==(const ListRequest&) const = default;
};
struct BindRequest {
  Binding binding;
  bool operator==(const BindRequest&) const = default;
};
struct UnbindRequest {
  std::string port;
  bool operator==(const UnbindRequest&) const = default;
};
struct BindingsRequest {
  bool operator==(const BindingsRequest&) const = default;
};
struct StatusRequest {
  bool operator==(const StatusRequest&) const = default;
};

// ---- the port proxy's routes (docs/protocol.md "Routes") ---------------------------------

// Longest life of a route element: a connection that lasts longer is refreshed by the
// controller (ROUTE again) before its element ends.
inline constexpr std::uint32_t kMaxRouteSeconds = 300;

// ROUTE: the controller addresses may open TCP connections to `port` of `address` for
// `seconds` (1-kMaxRouteSeconds); UNROUTE removes that at once.
struct RouteRequest {
  Ipv4Address address;
  std::uint16_t port = 0;  // 1-65535
  std::uint32_t seconds = 0;
  bool operator==(const RouteRequest&) const = default;
};
struct UnrouteRequest {
  Ipv4Address address;
  std::uint16_t port = 0;
  bool operator==(const UnrouteRequest&) const = default;
};

// ---- egress by domain (docs/protocol.md "Egress allowlists") ----------------------------

inline constexpr std::size_t kMaxEgressPorts = 16;
inline constexpr std::size_t kMaxEgressNames = 64;
inline constexpr std::size_t kMaxPairDestinations = 64;

// A lower-case DNS name of LDH labels (1-63 bytes each, no leading or trailing '-'), at least
// two labels, at most 253 bytes, no trailing dot. With `allow_wildcard`, also "*." + such a
// name (its subdomains, not the name itself).
bool is_valid_egress_name(std::string_view name, bool allow_wildcard);
// Whether `name` (a valid name without wildcard) is matched by `pattern` (a valid list entry).
bool egress_name_matches(std::string_view pattern, std::string_view name);

// A sandbox's allowlist: the ports (1-65535, at most 16, none twice) and names (at most 64,
// none twice) it may reach.
struct EgressList {
  std::vector<std::uint16_t> ports;
  std::vector<std::string> names;
  bool operator==(const EgressList&) const = default;
};
struct EgressRequest {
  Ipv4Address address;
  std::optional<EgressList> list;  // nullopt: `EGRESS <ipv4> off`
  bool operator==(const EgressRequest&) const = default;
};
struct EgressesRequest {
  bool operator==(const EgressesRequest&) const = default;
};
struct AskRequest {
  Ipv4Address address;
  std::string name;  // valid, no wildcard
  bool operator==(const AskRequest&) const = default;
};
struct PairRequest {
  Ipv4Address address;
  std::string name;                       // valid, no wildcard
  std::vector<Ipv4Address> destinations;  // 1-64, none twice
  std::uint32_t ttl_seconds = 0;          // 0-kMaxTtlSeconds
  bool operator==(const PairRequest&) const = default;
};

// ELOG, resolver -> agent (docs/agent.md "Egress log"): one aggregate of the resolver's
// decisions for a source in one window:
//   ELOG <ipv4> <name>|* allow|refuse n=<count> at=<unix ms> entry=<pattern>|- to=<ipv4>,...|-
// `*`: the names beyond the resolver's per-source bound, counted only.
struct EgressLogLine {
  Ipv4Address source;
  std::string name;  // a valid plain name, or "*"
  bool allowed = false;
  std::uint64_t count = 0;      // 1 or more
  std::int64_t window_ms = 0;   // the window's start, unix ms
  std::string entry;            // the list entry that matched; empty: none
  std::vector<Ipv4Address> to;  // the last answer's addresses (at most kMaxPairDestinations)
  bool operator==(const EgressLogLine&) const = default;
};
struct EgressLogRequest {
  EgressLogLine line;
  bool operator==(const EgressLogRequest&) const = default;
};
// EGRESSLOG <ipv4> (controller): the egress log the agent keeps for a source.
struct EgressLogQuery {
  Ipv4Address address;
  bool operator==(const EgressLogQuery&) const = default;
};
// EGRESSREFUSED <ipv4> (controller): the connections of a source the ruleset refused, as the
// kernel counted them (docs/protocol.md "Egress log").
struct EgressRefusedQuery {
  Ipv4Address address;
  bool operator==(const EgressRefusedQuery&) const = default;
};

using Request =
    std::variant<HelloRequest, AllowRequest, RevokeRequest, SyncRequest, ListRequest, BindRequest,
                 UnbindRequest, BindingsRequest, StatusRequest, EgressRequest, EgressesRequest,
                 AskRequest, PairRequest, EgressLogRequest, EgressLogQuery, EgressRefusedQuery,
                 RouteRequest, UnrouteRequest>;

// Parses one request line. Errors carry ErrorCode::kTooLarge for an overlong line and
// kInvalidArgument otherwise, with a message fit to send back (see reply_code_for()).
Result<Request> parse_request(std::string_view line);
// The canonical line for a request (what parse_request() accepts back unchanged).
std::string format_request(const Request& request);
// "ALLOW", "SYNC", ...
std::string_view verb_name(const Request& request);

// True for the bridge port names Proxmox gives container NICs: veth<vmid>i<n>, or
// fwpr<vmid>p<n> when the NIC has firewall=1 (vmid 100-999999999, n 0-31, at most 15 bytes).
bool is_valid_port_name(std::string_view port);

// ---- replies ----------------------------------------------------------------------------

// A reply line split into its status and its text: the payload after "OK" (may be empty) or
// the message after "ERR <code>".
struct Reply {
  bool ok = false;
  int code = 0;  // 0 for OK
  std::string text;
  bool operator==(const Reply&) const = default;
};

Result<Reply> parse_reply(std::string_view line);

std::string format_ok(std::string_view payload = {});
// The message is made safe for the wire: bytes outside printable ASCII become '?', and it is
// cut to a sane length.
std::string format_error(ReplyCode code, std::string_view message);
// The ERR code to answer a codec or policy error with.
ReplyCode reply_code_for(const Error& error);
// The Error a client reports for an ERR reply: 400 -> kInvalidArgument, 403 -> kPermissionDenied,
// 409 -> kConflict, 413 -> kTooLarge, anything else -> kInternal.
Error error_from_reply(const Reply& reply);

// Payloads of the OK replies that carry data.
struct HelloInfo {
  std::string agent_version;
  int protocol = 0;
  bool operator==(const HelloInfo&) const = default;
};
std::string format_hello_payload(std::string_view agent_version);
Result<HelloInfo> parse_hello_payload(std::string_view payload);

Result<std::uint64_t> parse_count_payload(std::string_view payload);  // SYNC: "<n>"

std::string format_list_payload(const std::vector<Grant>& grants);
Result<std::vector<Grant>> parse_list_payload(std::string_view payload);

std::string format_bindings_payload(const std::vector<Binding>& bindings);
Result<std::vector<Binding>> parse_bindings_payload(std::string_view payload);

// STATUS: space-separated key=value pairs in the agent's order; keys [a-z0-9_], unique;
// values printable ASCII without spaces.
using StatusFields = std::vector<std::pair<std::string, std::string>>;
std::string format_status_payload(const StatusFields& fields);
Result<StatusFields> parse_status_payload(std::string_view payload);
std::optional<std::string_view> find_field(const StatusFields& fields, std::string_view key);

// EGRESSES: "<n> <ipv4>=<p>,<p>/<name>,<name> ...".
struct EgressEntry {
  Ipv4Address address;
  EgressList list;
  bool operator==(const EgressEntry&) const = default;
};
std::string format_egresses_payload(const std::vector<EgressEntry>& entries);
Result<std::vector<EgressEntry>> parse_egresses_payload(std::string_view payload);

// ASK: "allow ports=<p>[,<p>...][ entry=<pattern>]" or "deny".
struct AskAnswer {
  bool allow = false;
  std::vector<std::uint16_t> ports;  // empty when denied
  std::string entry;                 // the list entry that matched ("*.github.com"); may be empty
  bool operator==(const AskAnswer&) const = default;
};
std::string format_ask_payload(const AskAnswer& answer);
Result<AskAnswer> parse_ask_payload(std::string_view payload);

std::string format_egress_log(const EgressLogLine& line);
Result<EgressLogLine> parse_egress_log(std::string_view line);
// EGRESSLOG's reply: "<n> <name>/<allow|refuse>/<count>/<at>/<entry|->/<to|-> ..." for one
// source, oldest first.
std::string format_egress_log_payload(const std::vector<EgressLogLine>& lines);
Result<std::vector<EgressLogLine>> parse_egress_log_payload(Ipv4Address source,
                                                            std::string_view payload);

// One destination a source was refused: protocol (6 tcp, 17 udp, others with port 0), address
// and port, how many packets were refused, the first and the last at unix ms. `others`: the sum
// of the destinations beyond the reply's bound (address 0.0.0.0, port 0, protocol 0).
struct RefusedConnection {
  Ipv4Address destination;
  std::uint16_t port = 0;
  std::uint8_t protocol = 0;
  bool others = false;
  std::uint64_t count = 0;
  std::int64_t first_ms = 0;
  std::int64_t last_ms = 0;
  bool operator==(const RefusedConnection&) const = default;
};
inline constexpr std::size_t kMaxRefusedPerReply = 32;
// EGRESSREFUSED's reply: "<n> <ipv4>:<port>/<tcp|udp|proto number|*>/<count>/<first>/<last> ...",
// at most kMaxRefusedPerReply destinations and one "0.0.0.0:0/*/..." item for the rest.
std::string format_egress_refused_payload(const std::vector<RefusedConnection>& items);
Result<std::vector<RefusedConnection>> parse_egress_refused_payload(std::string_view payload);

}  // namespace pvs::proto
