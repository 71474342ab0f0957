// The approvals webhook (docs/policy.md, "Webhook"): each event is an HTTP POST of a JSON body
// to one configured URL, signed so the receiver can tell it came from this controller, and
// retried until the receiver says 2xx.
//
//   Webhook hook(config.webhook, [&](std::string_view outcome) { count(outcome); });
//   hook.post("approval.pending", approval_json);   // returns at once; a worker delivers
//
// Each delivery carries
//   X-Pvs-Event: approval.pending | approval.decided
//   X-Pvs-Delivery: <event id> (the same on every attempt of one event)
//   X-Pvs-Timestamp: <unix seconds of this attempt>
//   X-Pvs-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
// A receiver recomputes the signature and refuses old timestamps (replays). Attempts: on a
// transport error, 408, 429 or 5xx, again after first_backoff, doubling up to 60 s, at most
// `attempts` in all; another 4xx is final. Events wait in a bounded queue (max_queued; the
// oldest is dropped beyond it) delivered one at a time, in order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace pvs::service {

struct WebhookConfig {
  std::string url;     // http:// or https://; empty: no webhook
  std::string secret;  // the HMAC key (policy.webhook.secret_file / secret_env)
  std::string cacert;  // CA bundle for https (empty: the system's)
  int timeout_seconds = 5;
  int attempts = 6;
  std::chrono::milliseconds first_backoff{1000};
  std::size_t max_queued = 1000;
};

// "sha256=<hex>" of HMAC-SHA256(secret, timestamp + "." + body).
std::string webhook_signature(std::string_view secret, std::string_view timestamp,
                              std::string_view body);

class Webhook {
 public:
  // `outcome` is told "delivered", "retried" (one failed attempt that will be tried again),
  // "failed" (given up) or "dropped" (queue full), for metrics.
  Webhook(WebhookConfig config, std::function<void(std::string_view outcome)> outcome);
  ~Webhook();  // stops after the attempt in flight; undelivered events are logged and lost
  Webhook(const Webhook&) = delete;
  Webhook& operator=(const Webhook&) = delete;

  void post(std::string event, std::string body);

 private:
  struct Event {
    std::string kind, id, body;
  };
  void run();
  bool deliver(const Event& e);                      // true: done (delivered or final failure)
  long attempt(const Event& e, std::string* error);  // HTTP status, 0 for a transport error

  WebhookConfig config_;
  std::function<void(std::string_view)> outcome_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> queue_;
  bool stop_ = false;
  std::uint64_t next_id_ = 1;
  std::string instance_;
  std::thread worker_;
};

}  // namespace pvs::service
