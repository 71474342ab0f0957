#include "api/mcp/request_state.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <Poco/Exception.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "http/auth.h"
#include "http/json.h"
#include "pvesandbox/common/random.h"

namespace pvs::service::mcp {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view kPrefix = "v1.";

std::string b64url(std::string_view in) {
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    std::uint32_t n =
        (std::uint8_t(in[i]) << 16) | (std::uint8_t(in[i + 1]) << 8) | std::uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  if (i + 1 == in.size()) {
    std::uint32_t n = std::uint8_t(in[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
  } else if (i + 2 == in.size()) {
    std::uint32_t n = (std::uint8_t(in[i]) << 16) | (std::uint8_t(in[i + 1]) << 8);
    for (int s = 18; s >= 6; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  return out;
}

std::optional<std::string> unb64url(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    auto v = kAlphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

std::string mac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::optional<std::string> string_field(const Poco::JSON::Object::Ptr& o, const char* key) {
  if (!o->has(key) || !o->get(key).isString()) return std::nullopt;
  return o->get(key).extract<std::string>();
}

}  // namespace

std::string new_state_key() {
  return secure_random_or_throw(32, "the MCP request-state key");
}

std::string arguments_digest(std::string_view arguments_json) {
  return sha256_hex(arguments_json);
}

std::string seal_state(const PendingState& state, std::string_view key) {
  JsonWriter w;
  w.begin_object().key("a").value(state.approval_id).key("t").value(state.token);
  w.key("n").value(state.tool).key("d").value(state.digest).key("e").value(state.expires);
  std::string body = std::string(kPrefix) + b64url(w.end_object().str());
  return body + "." + b64url(mac(key, body));
}

tl::expected<PendingState, std::string> open_state(std::string_view text, std::string_view key,
                                                   std::int64_t now) {
  const std::string bad = "requestState is not one this server issued";
  if (text.size() > kMaxStateBytes || text.substr(0, kPrefix.size()) != kPrefix)
    return tl::unexpected(bad);
  auto dot = text.rfind('.');
  if (dot < kPrefix.size()) return tl::unexpected(bad);
  std::string_view body = text.substr(0, dot);
  auto tag = unb64url(text.substr(dot + 1));
  std::string want = mac(key, body);
  if (!tag || tag->size() != want.size() || CRYPTO_memcmp(tag->data(), want.data(), want.size()))
    return tl::unexpected(bad + " (or it is from before a controller restart)");
  auto payload = unb64url(body.substr(kPrefix.size()));
  if (!payload) return tl::unexpected(bad);
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
