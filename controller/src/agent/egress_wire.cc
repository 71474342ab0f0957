// The controller's view of the egress verbs on top of the one codec both sides share
// (pvesandbox/common/protocol.h): pvs::EgressList (names, ports; normalised) <-> proto::EgressList.
#include "pvesandbox/egress_wire.h"

#include <utility>

#include "pvesandbox/common/protocol.h"

namespace pvs::egress_wire {

std::string format_egress(Ipv4Address address, const EgressList& list) {
  return proto::format_request(
      proto::EgressRequest{address, proto::EgressList{list.ports, list.names}});
}

std::string format_egress_off(Ipv4Address address) {
  return proto::format_request(proto::EgressRequest{address, std::nullopt});
}

Result<std::map<Ipv4Address, EgressList>> parse_egresses_payload(std::string_view payload) {
  auto entries = proto::parse_egresses_payload(payload);
  if (!entries) {
    return fail(ErrorCode::kInvalidArgument, "EGRESSES reply: " + entries.error().message);
  }
  std::map<Ipv4Address, EgressList> out;
  for (auto& e : *entries) {
    EgressList list{std::move(e.list.names), std::move(e.list.ports)};
    normalize_egress_list(list);
    if (auto ok = validate_stored_egress_list(list); !ok) {
      return fail(ErrorCode::kInvalidArgument, "EGRESSES reply: " + ok.error().message);
    }
    out.emplace(e.address, std::move(list));
  }
  return out;
}

}  // namespace pvs::egress_wire
