#include "http/auth.h"

#include <Poco/Base64Encoder.h>
#include <Poco/Crypto/DigestEngine.h>
#include <Poco/Crypto/OpenSSLInitializer.h>

#include <sstream>

#include "pvesandbox/common/random.h"

namespace pvs::service {

namespace {

Poco::DigestEngine::Digest sha256(std::string_view text) {
  // Poco's OpenSSLInitializer is reference counted: every DigestEngine takes a reference, and
  // the last one to go tears OpenSSL's locks down, which races with a request thread taking
  // the first reference again (a controller under concurrent requests died of heap corruption
  // in ~OpenSSLInitializer, seen with bench_service list). One reference held for the life of
  // the process keeps the count above zero.
  static const Poco::Crypto::OpenSSLInitializer keep_openssl_initialized;
  Poco::Crypto::DigestEngine engine("SHA256");
  engine.update(text.data(), static_cast<unsigned>(text.size()));
  return engine.digest();
}

}  // namespace

std::string sha256_hex(std::string_view text) {
  return Poco::DigestEngine::digestToHex(sha256(text));
}

std::string sha256_bytes(std::string_view text) {
  auto d = sha256(text);
  return std::string(d.begin(), d.end());
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string generate_token(std::string_view prefix) {
  const std::string raw = secure_random_or_throw(32, "a token");
  std::ostringstream out;
  Poco::Base64Encoder encoder(out, Poco::BASE64_URL_ENCODING | Poco::BASE64_NO_PADDING);
  encoder.rdbuf()->setLineLength(0);
  encoder << raw;
  encoder.close();
  return std::string(prefix) + out.str();
}

TokenStore::TokenStore(const std::vector<TokenConfig>& tokens, int default_max_sandboxes,
                       int default_max_paused) {
  for (const auto& t : tokens) {
    entries_.push_back({t.sha256,
                        {t.name, t.max_sandboxes > 0 ? t.max_sandboxes : default_max_sandboxes,
                         t.admin, t.approver, t.max_paused > 0 ? t.max_paused : default_max_paused},
                        t.e2b_key_sha256});
  }
}

std::optional<Principal> TokenStore::authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.size() > 4096) return std::nullopt;
  for (std::size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i]))) {
      return std::nullopt;
    }
  }
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  std::string hash = sha256_hex(token);
  // Compare with every entry (no early exit), so timing does not tell which one matched.
  const Entry* match = nullptr;
  for (const auto& e : entries_) {
    if (constant_time_equal(hash, e.sha256)) match = &e;
  }
  if (!match) return std::nullopt;
  return match->principal;
}

std::optional<Principal> TokenStore::authenticate_e2b_key(std::string_view key) const {
  if (key.size() < 5 || key.size() > 256 || key.substr(0, 4) != "e2b_") return std::nullopt;
  std::string hash = sha256_hex(key);
  const Entry* match = nullptr;
  for (const auto& e : entries_) {
    if (!e.e2b_key_sha256.empty() && constant_time_equal(hash, e.e2b_key_sha256)) match = &e;
  }
  if (!match) return std::nullopt;
  return match->principal;
}

std::optional<Principal> TokenStore::find(std::string_view name) const {
  if (name.empty()) return std::nullopt;
  for (const auto& e : entries_)
    if (e.principal.name == name) return e.principal;
  return std::nullopt;
}

}  // namespace pvs::service
