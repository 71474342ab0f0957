#include "api/mcp/request_state.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "http/auth.h"
#include "http/json.h"
#include "http/seal.h"
#include "pvesandbox/common/random.h"

namespace pvs::service::mcp {

namespace {

constexpr std::string_view kPrefix = "v1.";

std::optional<std::string> string_field(const Poco::JSON::Object::Ptr& o, const char* key) {
  if (!o->has(key) || !o->get(key).isString()) return std::nullopt;
  return o->get(key).extract<std::string>();
}

}  // namespace

std::string new_state_key() {
  return new_seal_key();
}

std::string arguments_digest(std::string_view arguments_json) {
  return sha256_hex(arguments_json);
}

std::string seal_state(const PendingState& state, std::string_view key) {
  JsonWriter w;
  w.begin_object().key("a").value(state.approval_id).key("t").value(state.token);
  w.key("n").value(state.tool).key("d").value(state.digest).key("e").value(state.expires);
  return seal(kPrefix, w.end_object().str(), key);
}

tl::expected<PendingState, std::string> open_state(std::string_view text, std::string_view key,
                                                   std::int64_t now) {
  const std::string bad = "requestState is not one this server issued";
  if (text.size() > kMaxStateBytes) return tl::unexpected(bad);
  auto payload = unseal(kPrefix, text, key);
  if (!payload) return tl::unexpected(bad + " (or it is from before a controller restart)");
  PendingState out;
  try {
    auto v = Poco::JSON::Parser().parse(*payload);
    auto o = v.extract<Poco::JSON::Object::Ptr>();
    auto a = string_field(o, "a"), t = string_field(o, "t"), n = string_field(o, "n"),
         d = string_field(o, "d");
    if (!a || !t || !n || !d || !o->has("e") || !o->get("e").isInteger())
      return tl::unexpected(bad);
    out = {*a, *t, *n, *d, o->get("e").convert<std::int64_t>()};
  } catch (const Poco::Exception&) {
    return tl::unexpected(bad);
  } catch (const std::exception&) {
    return tl::unexpected(bad);
  }
  if (now > out.expires)
    return tl::unexpected(std::string("requestState expired: call again without it to ask anew"));
  return out;
}

bool state_matches(const PendingState& state, std::string_view token, std::string_view tool,
                   std::string_view digest) {
  return state.token == token && state.tool == tool && state.digest == digest;
}

}  // namespace pvs::service::mcp
