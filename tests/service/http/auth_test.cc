#include "http/auth.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace pvs::service {
namespace {

TEST(Auth, Sha256MatchesKnownVector) {
  EXPECT_EQ(sha256_hex("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// Every request hashes its token; the request threads do it at once. (A Poco::Crypto
// DigestEngine per call once corrupted the heap here: see sha256_hex.)
TEST(Auth, Sha256FromManyThreadsAtOnce) {
  const std::string want = sha256_hex("tok");
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i)
        if (sha256_hex("tok") != want) ++wrong[t];
    });
  }
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
}

TEST(Auth, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(Auth, GeneratedTokensAreDistinctAndUrlSafe) {
  std::string a = generate_token(), b = generate_token();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("pvs_", 0), 0u);
  EXPECT_EQ(a.size(), 4u + 43u);
  EXPECT_EQ(
      a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", 4),
      std::string::npos);
}

TEST(Auth, AuthenticatesBearerTokensByHash) {
  TokenStore store(
      {{"ci", sha256_hex("tok-ci"), 3, false}, {"ops", sha256_hex("tok-ops"), 0, true}}, 16);
  auto ci = store.authenticate("Bearer tok-ci");
  ASSERT_TRUE(ci);
  EXPECT_EQ(ci->name, "ci");
  EXPECT_EQ(ci->max_sandboxes, 3);
  EXPECT_FALSE(ci->admin);
  auto ops = store.authenticate("bearer  tok-ops ");
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops->name, "ops");
  EXPECT_EQ(ops->max_sandboxes, 16);
  EXPECT_TRUE(ops->admin);
  EXPECT_FALSE(store.authenticate("Bearer tok-cj"));
  EXPECT_FALSE(store.authenticate("Bearer "));
  EXPECT_FALSE(store.authenticate("Basic dG9rLWNp"));
  EXPECT_FALSE(store.authenticate("tok-ci"));
  EXPECT_FALSE(store.authenticate(""));
  // The stored hash itself is not a token.
  EXPECT_FALSE(store.authenticate("Bearer " + sha256_hex("tok-ci")));
}

}  // namespace
}  // namespace pvs::service
