#include "pvesandbox/sandbox_metadata.h"

#include <gtest/gtest.h>

namespace pvs {
namespace {

SandboxMetadata sample() {
  SandboxMetadata m;
  m.id = "sb-4f2a9c1e";
  m.vmid = 120;
  m.phase = SandboxMetadata::Phase::kReady;
  m.created_at = 1795360000;
  m.expires_at = 1795363600;
  m.internet = true;
  m.address = Ipv4Address::parse("10.99.0.20").value();
  m.owner = "ci-runner";
  m.labels = {{"team", "ml"}, {"job.id", "42 \"quoted\" \\ back"}};
  m.host_key = "SHA256:" + std::string(43, 'A');
  return m;
}

TEST(SandboxMetadata, RoundTrips) {
  SandboxMetadata m = sample();
  std::string text = encode_description(m);
  EXPECT_EQ(text.find('\n'), text.rfind('\n')) << "exactly two lines: " << text;
  auto back = decode_description(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
}

TEST(SandboxMetadata, MinimalRoundTrips) {
  SandboxMetadata m;
  m.id = "sb-1";
  m.vmid = 100;
  auto back = decode_description(encode_description(m));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
}

TEST(SandboxMetadata, PooledCloneRoundTrips) {
  SandboxMetadata m;
  m.id = "pool-0123456789ab";
  m.vmid = 10004;
  m.phase = SandboxMetadata::Phase::kPooled;
  m.labels = {{"pve-sandbox/template", "9000"}};
  auto text = encode_description(m);
  EXPECT_NE(text.find("\"phase\":\"pooled\""), std::string::npos) << text;
  auto back = decode_description(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
}

TEST(SandboxMetadata, PausedSandboxRoundTripsWithItsTimeLeft) {
  SandboxMetadata m = sample();
  m.phase = SandboxMetadata::Phase::kPaused;
  m.ttl_left = 1234;
  auto text = encode_description(m);
  EXPECT_NE(text.find("\"phase\":\"paused\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ttl_left\":1234"), std::string::npos) << text;
  auto back = decode_description(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
  // Paused without a TTL of its own: no ttl_left written.
  m.ttl_left = 0;
  text = encode_description(m);
  EXPECT_EQ(text.find("ttl_left"), std::string::npos) << text;
  EXPECT_EQ(decode_description(text).value(), m);
}

TEST(SandboxMetadata, PauseOnExpiryRoundTrips) {
  auto m = sample();
  m.on_expiry = {true, true, 300};
  auto text = encode_description(m);
  EXPECT_NE(text.find("\"on_expiry\":{"), std::string::npos) << text;
  auto back = decode_description(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
  // The default (destroy) writes nothing.
  m.on_expiry = {};
  EXPECT_EQ(encode_description(m).find("on_expiry"), std::string::npos);
}

TEST(SandboxMetadata, FoundBelowAnOperatorsNote) {
  std::string text = "note from the operator: keep\n" + encode_description(sample());
  EXPECT_TRUE(decode_description(text));
}

TEST(SandboxMetadata, FitsProxmoxLimitWithMaximalLabels) {
  SandboxMetadata m = sample();
  m.labels.clear();
  for (std::size_t i = 0; i < kMaxLabels; ++i) {
    std::string key = std::to_string(i) + std::string(kMaxLabelKey - 3, 'k');
    m.labels[key] = std::string(kMaxLabelValue, '"');  // worst case: every byte escaped
  }
  ASSERT_TRUE(validate_labels(m.labels));
  EXPECT_LE(encode_description(m).size(), 8192u);
}

TEST(SandboxMetadata, NotOursIsNotFound) {
  EXPECT_EQ(decode_description("").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(decode_description("a normal container").error().code, ErrorCode::kNotFound);
  // The marker must start a line.
  EXPECT_EQ(decode_description("x pve-sandbox:v1 {}").error().code, ErrorCode::kNotFound);
}

TEST(SandboxMetadata, DamagedIsInvalid) {
  for (const char* text : {"pve-sandbox:v1 {", "pve-sandbox:v1 []", "pve-sandbox:v1 {\"id\":\"x\"}",
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"bogus\","
                           "\"created\":1,\"expires\":0,\"internet\":false}",
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false,\"ip\":\"10.1\"}",
                           "pve-sandbox:v1 {\"id\":\"\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false}",
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false,"
                           "\"host_key\":\"MD5:aa:bb\"}",
                           // on_expiry is written only with pause.
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false,"
                           "\"on_expiry\":{\"pause\":false}}",
                           // ttl_left belongs to a paused sandbox, and is never negative.
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false,\"ttl_left\":5}",
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"paused\","
                           "\"created\":1,\"expires\":0,\"internet\":false,\"ttl_left\":-5}"}) {
    auto r = decode_description(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << text;
  }
}

TEST(Labels, Validation) {
  EXPECT_TRUE(validate_labels({{"a", ""}, {"team.ml/x-y_z", "v"}}));
  EXPECT_FALSE(validate_labels({{"", "v"}}));
  EXPECT_FALSE(validate_labels({{"Upper", "v"}}));
  EXPECT_FALSE(validate_labels({{"-lead", "v"}}));
  EXPECT_FALSE(validate_labels({{"sp ace", "v"}}));
  EXPECT_FALSE(validate_labels({{std::string(64, 'a'), "v"}}));
  EXPECT_FALSE(validate_labels({{"k", std::string(129, 'v')}}));
  EXPECT_FALSE(validate_labels({{"k", "line\nbreak"}}));
  std::map<std::string, std::string> many;
  for (std::size_t i = 0; i <= kMaxLabels; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_FALSE(validate_labels(many));
}

// The controller's own labels (pve-sandbox/...) are read back from descriptions but never taken
// from a client's create.
TEST(Labels, ClientsMayNotSetTheControllersOwn) {
  EXPECT_TRUE(validate_labels({{"pve-sandbox/template-name", "web"}}));
  auto r = validate_client_labels({{"team", "a"}, {"pve-sandbox/template-name", "web"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("\"pve-sandbox/template-name\" is reserved"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(validate_client_labels({{"pve-sandbox/x", ""}}));
  EXPECT_FALSE(validate_client_labels({{"Upper", "v"}}));
  EXPECT_TRUE(validate_client_labels({{"team/pve-sandbox", "v"}, {"pve-sandboxes/x", "v"}}));
}

}  // namespace
}  // namespace pvs
