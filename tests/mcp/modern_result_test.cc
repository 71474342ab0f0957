// The results of revision 2026-07-28: resultType, the server's identity in _meta, caching hints,
// the InputRequiredResult of a call that waits, server/discover.
#include <gtest/gtest.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "api/mcp/modern_result.h"
#include "service/support/json_object.h"

namespace pvs::service::mcp {
namespace {

const std::string kInfo = server_info_json({"pve-sandbox", "1.2.3", "pve-sandbox"});

TEST(McpModernResult, CompleteCarriesTypeAndServerInfo) {
  auto r =
      json(complete_result(R"({"content":[{"type":"text","text":"hi"}],"isError":false})", kInfo));
  EXPECT_EQ(r->getValue<std::string>("resultType"), "complete");
  auto info = r->getObject("_meta")->getObject("io.modelcontextprotocol/serverInfo");
  EXPECT_EQ(info->getValue<std::string>("name"), "pve-sandbox");
  EXPECT_EQ(info->getValue<std::string>("version"), "1.2.3");
  EXPECT_EQ(r->getArray("content")->size(), 1u);
  EXPECT_FALSE(r->getValue<bool>("isError"));
  auto empty = json(complete_result("{}", kInfo));
  EXPECT_EQ(empty->size(), 2u);
  auto spaced = json(complete_result(" { } ", kInfo));
  EXPECT_EQ(spaced->size(), 2u);
}

TEST(McpModernResult, CacheableResultsCarryTtlAndScope) {
  auto r = json(complete_result(R"({"tools":[]})", kInfo, {300000, false}));
  EXPECT_EQ(r->getValue<std::int64_t>("ttlMs"), 300000);
  EXPECT_EQ(r->getValue<std::string>("cacheScope"), "private");
  EXPECT_EQ(r->getArray("tools")->size(), 0u);
  auto p = json(complete_result("{}", kInfo, {-5, true}));
  EXPECT_EQ(p->getValue<std::int64_t>("ttlMs"), 0);
  EXPECT_EQ(p->getValue<std::string>("cacheScope"), "public");
}

TEST(McpModernResult, InputRequiredAsksForARetryWithTheState) {
  auto r = json(input_required_result("v1.abc.def\"", kInfo));
  EXPECT_EQ(r->getValue<std::string>("resultType"), "input_required");
  EXPECT_EQ(r->getValue<std::string>("requestState"), "v1.abc.def\"");
  EXPECT_FALSE(r->has("inputRequests"));
  EXPECT_TRUE(r->getObject("_meta")->has("io.modelcontextprotocol/serverInfo"));
}

TEST(McpModernResult, Discover) {
  auto r = json(
      discover_result(R"({"tools":{"listChanged":false}})", "Sandboxes.", kInfo, {300000, false}));
  EXPECT_EQ(r->getValue<std::string>("resultType"), "complete");
  auto versions = r->getArray("supportedVersions");
  ASSERT_EQ(versions->size(), 4u);
  EXPECT_EQ(versions->getElement<std::string>(0), "2026-07-28");
  EXPECT_TRUE(r->getObject("capabilities")->has("tools"));
  EXPECT_EQ(r->getValue<std::string>("instructions"), "Sandboxes.");
  EXPECT_EQ(r->getValue<std::string>("cacheScope"), "private");
  EXPECT_FALSE(json(discover_result("{}", "", kInfo, {}))->has("instructions"));
  EXPECT_FALSE(json(server_info_json({"a", "1", ""}))->has("title"));
}

}  // namespace
}  // namespace pvs::service::mcp
