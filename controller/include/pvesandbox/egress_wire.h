// The agent's egress verbs on the wire (docs/protocol.md: EGRESS, EGRESSES) for AgentClient, in
// the controller's EgressList: formatted and parsed by the codec the agent itself uses
// (pvesandbox/common/protocol.h, proto::EgressRequest, proto::parse_egresses_payload):
//
//   EGRESS 10.99.0.7 ports=80,443 names=pypi.org,*.github.com   -> OK
//   EGRESS 10.99.0.7 off                                         -> OK
//   EGRESSES                                    -> OK 1 10.99.0.7=80,443/pypi.org,*.github.com
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/egress.h"

namespace pvs::egress_wire {

// The request lines (no newline). The list is sent as given (normalise it first).
std::string format_egress(Ipv4Address address, const EgressList& list);
std::string format_egress_off(Ipv4Address address);
inline constexpr std::string_view kEgressesRequest = "EGRESSES";

// The payload of an EGRESSES reply (what follows "OK "): every source's list, normalised.
// kInvalidArgument for a malformed payload (a count that does not match, a bad address, port
// or name, an address twice).
Result<std::map<Ipv4Address, EgressList>> parse_egresses_payload(std::string_view payload);

}  // namespace pvs::egress_wire
