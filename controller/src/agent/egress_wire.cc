#include "pvesandbox/egress_wire.h"

#include <charconv>
#include <vector>

#include "pvesandbox/common/text.h"

namespace pvs::egress_wire {
namespace {

tl::unexpected<Error> bad(std::string message) {
  return fail(ErrorCode::kInvalidArgument, "EGRESSES reply: " + std::move(message));
}

std::vector<std::string_view> split_on(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    auto at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? text.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

template <class T>
bool parse_number(std::string_view text, T min, T max, T* out) {
  if (text.empty() || text.size() > 10) return false;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max) return false;
  *out = static_cast<T>(v);
  return true;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// "<ports>/<names>"
Result<EgressList> parse_entry(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return bad("entry without / " + quoted(text));
  EgressList list;
  for (auto p : split_on(text.substr(0, slash), ',')) {
    std::uint16_t port = 0;
    if (!parse_number<std::uint16_t>(p, 1, 65535, &port)) return bad("bad port " + quoted(p));
    list.ports.push_back(port);
  }
  for (auto n : split_on(text.substr(slash + 1), ',')) list.names.emplace_back(n);
  normalize_egress_list(list);
  if (auto ok = validate_egress_list(list); !ok) return bad(ok.error().message);
  return list;
}

}  // namespace

std::string format_egress(Ipv4Address address, const EgressList& list) {
  std::vector<std::string> ports;
  for (auto p : list.ports) ports.push_back(std::to_string(p));
  return "EGRESS " + address.to_string() + " ports=" + joined(ports) +
         " names=" + joined(list.names);
}

std::string format_egress_off(Ipv4Address address) {
  return "EGRESS " + address.to_string() + " off";
}

Result<std::map<Ipv4Address, EgressList>> parse_egresses_payload(std::string_view payload) {
  auto fields = split_on(payload, ' ');
  std::uint32_t count = 0;
  if (!parse_number<std::uint32_t>(fields[0], 0, 1'000'000, &count))
    return bad("bad count " + quoted(fields[0]));
  if (count == 0 && fields.size() == 1) return std::map<Ipv4Address, EgressList>{};
  if (fields.size() != count + 1)
    return bad("count " + std::to_string(count) + " but " + std::to_string(fields.size() - 1) +
               " entries");
  std::map<Ipv4Address, EgressList> out;
  for (std::size_t i = 1; i < fields.size(); ++i) {
    auto eq = fields[i].find('=');
    if (eq == std::string_view::npos) return bad("entry without = " + quoted(fields[i]));
    auto address = Ipv4Address::parse(fields[i].substr(0, eq));
    if (!address) return bad(address.error().message);
    auto list = parse_entry(fields[i].substr(eq + 1));
    if (!list) return fail(list.error());
    if (!out.emplace(*address, std::move(*list)).second)
      return bad("address " + address->to_string() + " twice");
  }
  return out;
}

}  // namespace pvs::egress_wire
