#include "http/seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>

#include "pvesandbox/common/random.h"

namespace pvs::service {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string b64url(std::string_view in) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    acc = (acc << 8) | static_cast<std::uint8_t>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
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

}  // namespace

std::string new_seal_key() {
  return secure_random_or_throw(32, "a sealing key");
}

std::string seal(std::string_view prefix, std::string_view payload, std::string_view key) {
  std::string body = std::string(prefix) + b64url(payload);
  return body + "." + b64url(mac(key, body));
}

std::optional<std::string> unseal(std::string_view prefix, std::string_view text,
                                  std::string_view key) {
  if (text.size() > kMaxSealedBytes || text.substr(0, prefix.size()) != prefix) return std::nullopt;
  auto dot = text.rfind('.');
  if (dot == std::string_view::npos || dot < prefix.size()) return std::nullopt;
  std::string_view body = text.substr(0, dot);
  auto tag = unb64url(text.substr(dot + 1));
  std::string want = mac(key, body);
  if (!tag || tag->size() != want.size() || CRYPTO_memcmp(tag->data(), want.data(), want.size()))
    return std::nullopt;
  return unb64url(body.substr(prefix.size()));
}

}  // namespace pvs::service
