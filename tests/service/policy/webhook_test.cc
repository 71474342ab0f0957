// The approvals webhook against a real HTTP receiver (Poco's HTTPServer on loopback): signed
// deliveries a receiver can verify with its own HMAC, retried on 5xx and connection refusal,
// not on a final 4xx, in order, and config errors named.
#include "policy/webhook.h"

#include <gtest/gtest.h>

#include <thread>

#include "service/support/webhook_receiver.h"

namespace pvs::service {
namespace {

using test::Receiver;
using test::receiver_signature;

WebhookConfig config_for(const std::string& url) {
  WebhookConfig c;
  c.url = url;
  c.secret = "s3cret-for-tests";
  c.first_backoff = std::chrono::milliseconds(20);
  c.attempts = 4;
  return c;
}

struct Outcomes {
  std::mutex mu;
  std::vector<std::string> seen;
  std::function<void(std::string_view)> fn() {
    return [this](std::string_view o) {
      std::lock_guard lock(mu);
      seen.emplace_back(o);
    };
  }
};

TEST(Webhook, SignedDeliveriesAreRetriedUntilTheReceiverTakesThem) {
  Receiver receiver({503, 500});
  Outcomes outcomes;
  {
    Webhook hook(config_for(receiver.url()), outcomes.fn());
    hook.post("approval.pending", R"({"event":"approval.pending","approval":{"id":"ap-1"}})");
    hook.post("approval.decided", R"({"event":"approval.decided","approval":{"id":"ap-1"}})");
    auto got = receiver.wait_for(4);
    ASSERT_EQ(got.size(), 4u);
    for (const auto& d : got) {
      EXPECT_EQ(d.content_type, "application/json");
      EXPECT_EQ(d.signature, receiver_signature("s3cret-for-tests", d.timestamp, d.body)) << d.body;
      EXPECT_NE(d.signature, receiver_signature("another secret", d.timestamp, d.body));
      EXPECT_LE(std::abs(std::stoll(d.timestamp) - std::time(nullptr)), 5);
    }
    // Three attempts of the first event (same delivery id), then the second, in order.
    EXPECT_EQ(got[0].id, got[2].id);
    EXPECT_EQ(got[2].event, "approval.pending");
    EXPECT_EQ(got[3].event, "approval.decided");
    EXPECT_NE(got[3].id, got[0].id);
  }
  EXPECT_EQ(outcomes.seen,
            (std::vector<std::string>{"retried", "retried", "delivered", "delivered"}));
}

TEST(Webhook, AFinal4xxIsNotRetriedAndARefusedConnectionIs) {
  Receiver receiver({404});
  Outcomes outcomes;
  {
    Webhook hook(config_for(receiver.url()), outcomes.fn());
    hook.post("approval.pending", "{}");
    hook.post("approval.pending", "{}");
    EXPECT_EQ(receiver.wait_for(2).size(), 2u);
  }
  EXPECT_EQ(outcomes.seen, (std::vector<std::string>{"failed", "delivered"}));

  // Nobody listens: every attempt fails at once, then the event is given up.
  Poco::Net::ServerSocket probe(Poco::Net::SocketAddress("127.0.0.1", 0));
  std::string closed = "http://127.0.0.1:" + std::to_string(probe.address().port()) + "/";
  probe.close();
  Outcomes refused;
  {
    Webhook hook(config_for(closed), refused.fn());
    hook.post("approval.pending", "{}");
    for (int i = 0; i < 3000; ++i) {  // 30 s at most
      {
        std::lock_guard lock(refused.mu);
        if (refused.seen.size() == 4) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(refused.seen, (std::vector<std::string>{"retried", "retried", "retried", "failed"}));
}

TEST(Webhook, TheSignatureIsHmacSha256OfTimestampDotBody) {
  EXPECT_EQ(webhook_signature("key", "1700000000", R"({"a":1})"),
            receiver_signature("key", "1700000000", R"({"a":1})"));
  EXPECT_EQ(webhook_signature("key", "1", "x").size(), 7u + 64u);
}

}  // namespace
}  // namespace pvs::service
