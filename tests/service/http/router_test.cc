#include "http/router.h"

#include <gtest/gtest.h>

namespace pvs::service {
namespace {

TEST(Router, MatchesParamsMethodsAnd405) {
  Router<int> r;
  r.add("GET", "/v1/sandboxes", 1);
  r.add("POST", "/v1/sandboxes", 2);
  r.add("GET", "/v1/sandboxes/{id}", 3);
  r.add("DELETE", "/v1/sandboxes/{id}", 4);
  r.add("POST", "/v1/sandboxes/{id}/snapshots/{name}/rollback", 5);

  auto m = r.match("GET", "/v1/sandboxes");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(*m.handler, 1);
  EXPECT_EQ(*r.match("POST", "/v1/sandboxes/").handler, 2);
  m = r.match("DELETE", "/v1/sandboxes/sb-1");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(*m.handler, 4);
  EXPECT_EQ(m.params.at("id"), "sb-1");
  m = r.match("POST", "/v1/sandboxes/sb-1/snapshots/s1/rollback");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(m.params.at("name"), "s1");
  EXPECT_EQ(*r.match("HEAD", "/v1/sandboxes").handler, 1);

  m = r.match("PUT", "/v1/sandboxes/sb-1");
  EXPECT_FALSE(m.handler);
  EXPECT_EQ(m.allowed, "GET, DELETE");
  m = r.match("GET", "/v1/nope");
  EXPECT_FALSE(m.handler);
  EXPECT_EQ(m.allowed, "");
  EXPECT_FALSE(r.match("GET", "/v1//sandboxes").handler);
  EXPECT_FALSE(r.match("GET", "/v1/sandboxes//").handler);
  EXPECT_FALSE(r.match("GET", "v1/sandboxes").handler);
  EXPECT_FALSE(r.match("GET", "").handler);
}

TEST(Router, TailParameterTakesTheRestOfThePath) {
  Router<int> r;
  r.add("GET", "/v1/sandboxes/{id}/ports", 1);
  r.add("GET", "/v1/sandboxes/{id}/ports/{port}/{path...}", 2);
  r.add("POST", "/v1/sandboxes/{id}/ports/{port}/{path...}", 3);

  auto m = r.match("GET", "/v1/sandboxes/sb-1/ports");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(*m.handler, 1);
  m = r.match("GET", "/v1/sandboxes/sb-1/ports/8080");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(*m.handler, 2);
  EXPECT_EQ(m.params.at("port"), "8080");
  EXPECT_EQ(m.params.at("path"), "");
  m = r.match("POST", "/v1/sandboxes/sb-1/ports/8080/a/b//c.html");
  ASSERT_TRUE(m.handler);
  EXPECT_EQ(*m.handler, 3);
  EXPECT_EQ(m.params.at("path"), "a/b//c.html");
  EXPECT_EQ(m.params.at("id"), "sb-1");
  m = r.match("PUT", "/v1/sandboxes/sb-1/ports/8080/x");
  EXPECT_FALSE(m.handler);
  EXPECT_EQ(m.allowed, "GET, POST");
  // The fixed segments still must be there and not empty.
  EXPECT_FALSE(r.match("GET", "/v1/sandboxes//ports/8080/x").handler);
  EXPECT_FALSE(r.match("GET", "/v1/sandboxes/sb-1/port/8080/x").handler);
}

TEST(Router, SplitPath) {
  EXPECT_EQ(split_path("/").size(), 0u);
  EXPECT_EQ(split_path("/a/b").size(), 2u);
  EXPECT_EQ(split_path("/a//b").size(), 3u);
}

}  // namespace
}  // namespace pvs::service
