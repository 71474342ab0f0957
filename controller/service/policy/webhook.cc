#include "policy/webhook.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <memory>
#include <random>

#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"

namespace pvs::service {

std::string webhook_signature(std::string_view secret, std::string_view timestamp,
                              std::string_view body) {
  std::string message;
  message.reserve(timestamp.size() + 1 + body.size());
  message.append(timestamp).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256=";
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

Webhook::Webhook(WebhookConfig config, std::function<void(std::string_view)> outcome)
    : config_(std::move(config)), outcome_(std::move(outcome)) {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  instance_ = buf;
  worker_ = std::thread([this] { run(); });
}

Webhook::~Webhook() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  if (!queue_.empty())
    log::warn("webhook: " + std::to_string(queue_.size()) + " events not delivered at shutdown");
}

void Webhook::post(std::string event, std::string body) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= config_.max_queued) {
    log::warn("webhook: queue full (" + std::to_string(config_.max_queued) + "): dropped event " +
              queue_.front().id);
    queue_.pop_front();
    if (outcome_) outcome_("dropped");
  }
  queue_.push_back(
      {std::move(event), "wh-" + instance_ + "-" + std::to_string(next_id_++), std::move(body)});
  cv_.notify_all();
}

void Webhook::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Event e = queue_.front();
    lock.unlock();
    bool done = deliver(e);
    lock.lock();
    if (done || stop_) {
      if (!queue_.empty() && queue_.front().id == e.id) queue_.pop_front();
    }
  }
}

bool Webhook::deliver(const Event& e) {
  auto backoff = config_.first_backoff;
  for (int n = 1; n <= config_.attempts; ++n) {
    std::string error;
    long status = attempt(e, &error);
    if (status >= 200 && status < 300) {
      if (outcome_) outcome_("delivered");
      return true;
    }
    std::string why = status ? "HTTP " + std::to_string(status) : error;
    bool final = status >= 400 && status < 500 && status != 408 && status != 429;
    if (final || n == config_.attempts) {
      log::warn("webhook: " + e.kind + " " + e.id + " not delivered after " + std::to_string(n) +
                " attempts: " + why);
      if (outcome_) outcome_("failed");
      return true;
    }
    log::info("webhook: " + e.kind + " " + e.id + " attempt " + std::to_string(n) + ": " + why +
              "; again in " + std::to_string(backoff.count()) + " ms");
    if (outcome_) outcome_("retried");
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, backoff, [&] { return stop_; })) return false;
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(60));
  }
  return true;
}

long Webhook::attempt(const Event& e, std::string* error) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    *error = "curl_easy_init failed";
    return 0;
  }
  std::string timestamp = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  curl_slist* raw = nullptr;
  for (const std::string& h :
       {std::string("Content-Type: application/json"), "X-Pvs-Event: " + e.kind,
        "X-Pvs-Delivery: " + e.id, "X-Pvs-Timestamp: " + timestamp,
        "X-Pvs-Signature: " + webhook_signature(config_.secret, timestamp, e.body),
        std::string("Expect:")})
    raw = curl_slist_append(raw, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(raw, &curl_slist_free_all);
  std::string agent = "pve-sandbox-controller/" + std::string(pvs::version());
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, config_.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, e.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(e.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, agent.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(config_.timeout_seconds));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is an answer, not a detour
  curl_easy_setopt(
      c, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void*) {
        return size * n;  // the receiver's body is not needed
      });
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (!config_.cacert.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, config_.cacert.c_str());
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    *error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    return 0;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

}  // namespace pvs::service
