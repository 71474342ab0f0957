// ProxmoxClient over libcurl: a bounded pool of easy handles sharing DNS and TLS sessions,
// token auth, TLS verification or SHA-256 certificate pinning, and retries only where safe.
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <Poco/Dynamic/Var.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "proxmox/decode.h"
#include "proxmox/internal.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/proxmox_client.h"

namespace pvs::pve {

namespace {

std::once_flag g_curl_init;
int g_ssl_ex_index = -1;

using Bytes = std::array<unsigned char, 32>;

bool parse_fingerprint(std::string_view text, Bytes* out) {
  std::string hex;
  for (char c : text) {
    if (c == ':' || c == ' ') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (hex.size() != 64) return false;
  for (std::size_t i = 0; i < 32; ++i)
    (*out)[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

// OpenSSL verify callback for pinning: the leaf certificate's SHA-256 must equal the pin;
// the chain above it is irrelevant (Proxmox certificates are self-signed or from the node CA).
int pin_verify_callback(int /*preverify_ok*/, X509_STORE_CTX* store) {
  if (X509_STORE_CTX_get_error_depth(store) != 0) {
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
  }
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl == nullptr) return 0;
  auto* pin = static_cast<const Bytes*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), g_ssl_ex_index));
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  if (pin == nullptr || cert == nullptr) return 0;
  Bytes digest{};
  unsigned int len = 0;
  if (X509_digest(cert, EVP_sha256(), digest.data(), &len) != 1 || len != digest.size()) return 0;
  if (digest != *pin) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
    return 0;
  }
  X509_STORE_CTX_set_error(store, X509_V_OK);
  return 1;
}

CURLcode ssl_ctx_callback(CURL* /*curl*/, void* ssl_ctx, void* user) {
  auto* ctx = static_cast<SSL_CTX*>(ssl_ctx);
  SSL_CTX_set_ex_data(ctx, g_ssl_ex_index, user);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, pin_verify_callback);
  return CURLE_OK;
}

std::string encode_params(const Params& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (!out.empty()) out += '&';
    out += url_encode(key);
    out += '=';
    out += url_encode(value);
  }
  return out;
}

size_t write_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

struct HeaderState {
  int status = 0;
  std::string reason;
};

size_t write_header(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<HeaderState*>(user);
  std::string_view line(data, size * count);
  if (line.substr(0, 5) == "HTTP/") {
    // "HTTP/1.1 500 CT is locked (disk)\r\n"
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      std::string_view rest = line.substr(sp + 1);
      int status = 0;
      std::size_t i = 0;
      while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])))
        status = status * 10 + (rest[i++] - '0');
      state->status = status;
      rest.remove_prefix(i);
      if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.remove_suffix(1);
      state->reason = std::string(rest);
    }
  }
  return size * count;
}

bool is_tls_error(CURLcode code) {
  switch (code) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS: return true;
    default: return false;
  }
}

// Failures where the request provably never left this process.
bool is_connect_failure(CURLcode code) {
  return code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
         code == CURLE_COULDNT_RESOLVE_PROXY;
}

}  // namespace

std::string url_encode(std::string_view in) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size() * 3);
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

struct Client::Impl {
  ClientOptions options;
  std::string api_base;
  std::string auth_header;
  Bytes pin{};
  bool pinned = false;

  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> share_locks;

  std::mutex pool_mutex;
  std::condition_variable pool_cv;
  std::vector<CURL*> idle;
  int created = 0;

  std::atomic<uint64_t> sent{0};

  ~Impl() {
    for (CURL* h : idle) curl_easy_cleanup(h);
    if (share != nullptr) curl_share_cleanup(share);
  }

  static void lock_cb(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<Impl*>(user)->share_locks[data].lock();
  }
  static void unlock_cb(CURL*, curl_lock_data data, void* user) {
    static_cast<Impl*>(user)->share_locks[data].unlock();
  }

  CURL* acquire() {
    std::unique_lock lock(pool_mutex);
    pool_cv.wait(lock, [&] { return !idle.empty() || created < options.max_connections; });
    if (!idle.empty()) {
      CURL* h = idle.back();
      idle.pop_back();
      return h;
    }
    ++created;
    lock.unlock();
    CURL* h = curl_easy_init();
    if (h == nullptr) {
      std::lock_guard again(pool_mutex);
      --created;
      pool_cv.notify_one();
    }
    return h;
  }

  void release(CURL* h) {
    {
      std::lock_guard lock(pool_mutex);
      idle.push_back(h);
    }
    pool_cv.notify_one();
  }

  Result<Response> perform_once(std::string_view method, const std::string& url,
                                const std::string& body) {
    CURL* h = acquire();
    if (h == nullptr)
      return tl::unexpected(make_error(ErrorKind::kTransport, -1, "curl_easy_init failed"));
    curl_easy_reset(h);  // keeps the live connection and caches
    Response response;
    HeaderState header;
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, auth_header.c_str());
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SHARE, share);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options.request_timeout.count()));
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    // pveproxy speaks HTTP/1.1, and errors live in the reason phrase, which HTTP/2 lacks.
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(
        h, CURLOPT_SSLVERSION,
        static_cast<long>(
            CURL_SSLVERSION_TLSv1_2));  // no "/../" squashing: the path is what we built
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, write_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &header);
    if (pinned) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);  // the callback below decides
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);  // the pin is the identity
      curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_callback);
      curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, &pin);
    } else if (options.insecure_skip_verify) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
      if (!options.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options.ca_file.c_str());
    }
    if (method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
      curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, body.c_str());
    } else if (method == "PUT") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
      curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, body.c_str());
    } else {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
    }
    sent.fetch_add(1, std::memory_order_relaxed);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    release(h);
    if (rc != CURLE_OK) {
      // http_status -1 marks "never sent" (retryable whatever the method).
      return tl::unexpected(make_error(is_tls_error(rc) ? ErrorKind::kTls : ErrorKind::kTransport,
                                       is_connect_failure(rc) ? -1 : 0,
                                       std::string(curl_easy_strerror(rc))));
    }
    response.status = header.status;
    response.reason = header.reason;
    return response;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

pvs::Result<std::unique_ptr<Client>> Client::create(ClientOptions options) {
  std::call_once(g_curl_init, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    g_ssl_ex_index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  });
  if (options.base_url.empty())
    return pvs::fail(ErrorCode::kInvalidArgument, "proxmox base_url is empty");
  if (options.token_id.find('!') == std::string::npos ||
      options.token_id.find('@') == std::string::npos)
    return pvs::fail(ErrorCode::kInvalidArgument,
                     "proxmox token_id must look like user@realm!tokenid");
  if (options.token_secret.empty())
    return pvs::fail(ErrorCode::kInvalidArgument, "proxmox token secret is empty");
  if (options.max_connections < 1) options.max_connections = 1;
  if (options.max_attempts < 1) options.max_attempts = 1;
  auto impl = std::make_unique<Impl>();
  if (!options.fingerprint.empty()) {
    if (!parse_fingerprint(options.fingerprint, &impl->pin))
      return pvs::fail(ErrorCode::kInvalidArgument,
                       "proxmox fingerprint must be a SHA-256 in hex (64 digits, colons allowed)");
    impl->pinned = true;
  } else if (options.insecure_skip_verify) {
    pvs::log::warn("proxmox: TLS verification disabled for " + options.base_url +
                   " (insecure_skip_verify); use a fingerprint or CA file");
  }
  std::string base = options.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  impl->api_base = base + "/api2/json";
  impl->auth_header = "Authorization: PVEAPIToken=" + options.token_id + "=" + options.token_secret;
  impl->options = std::move(options);
  impl->share = curl_share_init();
  curl_share_setopt(impl->share, CURLSHOPT_LOCKFUNC, &Impl::lock_cb);
  curl_share_setopt(impl->share, CURLSHOPT_UNLOCKFUNC, &Impl::unlock_cb);
  curl_share_setopt(impl->share, CURLSHOPT_USERDATA, impl.get());
  curl_share_setopt(impl->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(impl->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

uint64_t Client::requests_sent() const {
  return impl_->sent.load();
}

namespace {

// Whether another attempt is safe: GETs always; other methods only when the request cannot
// have reached the API daemon (no connection, or pveproxy's 595 "Errors during connection
// establishment" to pvedaemon). 596 (pvedaemon did not answer in time) may mean the request is
// being executed, so it is retried for GETs only.
bool retryable(std::string_view method, const Error& error) {
  bool idempotent = method == "GET";
  ErrorKind kind = kind_of(error);
  int status = error.proxmox ? error.proxmox->http_status : 0;
  if (kind == ErrorKind::kTls) return false;
  if (status == -1) return true;  // connect failure
  if (status == 0) return idempotent && kind == ErrorKind::kTransport;
  if (status == 595) return true;
  if (status == 596) return idempotent;
  return false;
}

}  // namespace

Result<std::string> Client::call(std::string_view method, std::string_view path,
                                 const Params& params) {
  auto data = ClientAccess::request(*this, method, path, params, nullptr);
  if (!data) return tl::unexpected(data.error());
  return decode::json_text(*data);
}

Result<Poco::Dynamic::Var> ClientAccess::request(Client& client, std::string_view method,
                                                 std::string_view path, const Params& params,
                                                 int* total) {
  Client::Impl& impl = *client.impl_;
  std::string url = impl.api_base + std::string(path);
  std::string body;
  if (method == "GET" || method == "DELETE") {
    if (!params.empty()) url += "?" + encode_params(params);
  } else {
    body = encode_params(params);
  }
  thread_local std::mt19937 rng(std::random_device{}());
  auto backoff = impl.options.backoff_initial;
  for (int attempt = 1;; ++attempt) {
    auto start = std::chrono::steady_clock::now();
    auto response = impl.perform_once(method, url, body);
    Error error;
    if (response) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      if (pvs::log::level() <= pvs::log::Level::kDebug)
        pvs::log::debug("proxmox " + std::string(method) + " " + std::string(path) + " -> " +
                        std::to_string(response->status) + " (" + std::to_string(ms) + " ms)");
      auto data = decode::envelope(response->status, response->reason, response->body, total);
      if (data) return data;
      error = std::move(data.error());
      if (error.is(ErrorKind::kProtocol)) {
        detail(error).attempts = attempt;
        return tl::unexpected(std::move(error));
      }
    } else {
      error = response.error();
    }
    detail(error).attempts = attempt;
    if (attempt >= impl.options.max_attempts || !retryable(method, error)) {
      if (detail(error).http_status == -1) detail(error).http_status = 0;
      return tl::unexpected(std::move(error));
    }
    pvs::log::info("proxmox " + std::string(method) + " " + std::string(path) + " failed (" +
                   describe(error) + "), retry " + std::to_string(attempt));
    auto jitter = std::uniform_int_distribution<long>(0, backoff.count() / 2 + 1)(rng);
    std::this_thread::sleep_for(backoff + std::chrono::milliseconds(jitter));
    backoff = std::min(impl.options.backoff_max, backoff * 2);
  }
}

}  // namespace pvs::pve
