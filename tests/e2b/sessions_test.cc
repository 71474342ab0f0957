// E2B sessions kept across a restart (e2b/session_store.h): what a registry with a sessions
// file writes, what a new registry on that file takes up, and what a bad file does.
#include "e2b/sessions.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2b/filesystem/files_wire.h"
#include "e2b/refusing_sandbox.h"
#include "e2b/session_store.h"

namespace pvs::service::e2b {
namespace {

class SessionsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("pvs-e2b-sessions-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / "sessions.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::shared_ptr<pvs::Sandbox> sandbox(const std::string& id) {
    return std::make_shared<RefusingSandbox>(id, "agent");
  }
  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(SessionsFileTest, ARestartKeepsTokensEnvAndOwner) {
  std::string token, traffic;
  {
    SessionRegistry first(file_);
    auto a = first.ensure(sandbox("sb-00000000000a"), "base", {{"KEPT", "yes"}},
                          {false, "h-${PORT}.example.org"});
    first.ensure(sandbox("sb-00000000000b"));
    token = a->access_token;
    traffic = a->traffic_token;
    first.erase("sb-00000000000b");
    first.flush();
    struct stat st {};
    ASSERT_EQ(::stat(file_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);  // it holds the access tokens
    first.shutdown();                     // the controller stops: the file keeps them
  }
  SessionRegistry second(file_);
  EXPECT_EQ(second.load_error(), "");
  EXPECT_FALSE(second.find("sb-00000000000a"));  // not live until its next call
  EXPECT_EQ(second.kept_owner("sb-00000000000a"), "agent");
  EXPECT_EQ(second.kept_owner("sb-00000000000b"), "");  // erased before the restart
  EXPECT_TRUE(second.token_matches("sb-00000000000a", token));
  std::string wrong = token;
  wrong[0] = wrong[0] == 'x' ? 'y' : 'x';
  EXPECT_FALSE(second.token_matches("sb-00000000000a", wrong));
  EXPECT_TRUE(second.traffic_token_matches("sb-00000000000a", traffic));
  FileSignature u{"/tmp/f", "read", "", file_signature("/tmp/f", "read", "", token, std::nullopt),
                  std::nullopt};
  EXPECT_EQ(second.signed_by(u), "sb-00000000000a");
  auto live = second.ensure(sandbox("sb-00000000000a"));
  EXPECT_EQ(live->access_token, token);
  EXPECT_EQ(live->env_vars.at("KEPT"), "yes");
  EXPECT_EQ(live->mask_host, "h-${PORT}.example.org");
  EXPECT_EQ(live->owner, "agent");
  EXPECT_EQ(second.kept_owner("sb-00000000000a"), "");  // live now
  second.erase("sb-00000000000a");
  second.flush();
  auto left = SessionStore(file_, [] { return SessionFile{}; }).load();
  ASSERT_TRUE(left);
  EXPECT_TRUE(left->sessions.empty());
}

// The key volume tokens are sealed with outlives a restart with the file (a Volume handle keeps
// working); without a file each registry has a key of its own.
TEST_F(SessionsFileTest, TheVolumeKeyIsKept) {
  std::string key;
  {
    SessionRegistry first(file_);
    key = first.volume_key();
    EXPECT_EQ(key.size(), 32u);
  }  // no session was made: the key alone was written
  EXPECT_EQ(SessionRegistry(file_).volume_key(), key);
  EXPECT_NE(SessionRegistry().volume_key(), SessionRegistry().volume_key());
}

TEST_F(SessionsFileTest, KeptSessionsOfGoneSandboxesArePruned) {
  {
    SessionRegistry first(file_);
    first.ensure(sandbox("sb-00000000000d"));
    first.ensure(sandbox("sb-00000000000e"));
    first.shutdown();
  }
  SessionRegistry second(file_);
  second.ensure(sandbox("sb-00000000000e"));  // live again: not the pruner's to judge
  std::vector<std::string> asked;
  auto n = second.prune_kept([&](const SessionRecord& r) {
    asked.push_back(r.id);
    return true;
  });
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(asked, std::vector<std::string>{"sb-00000000000d"});
  EXPECT_EQ(second.kept_owner("sb-00000000000d"), "");
  second.flush();
  auto left = SessionStore(file_, [] { return SessionFile{}; }).load();
  ASSERT_TRUE(left);
  ASSERT_EQ(left->sessions.size(), 1u);
  EXPECT_EQ(left->sessions[0].id, "sb-00000000000e");
}

// A kept session names its sandbox's node, so that the prune goes on for the nodes read whole
// while another is still down (kept_prunable); one from an older file waits for every node.
TEST_F(SessionsFileTest, AKeptSessionNamesItsNodeForThePrune) {
  {
    SessionRegistry first(file_);
    first.ensure(std::make_shared<RefusingSandbox>("sb-00000000000c", "agent", "pve2"));
    first.flush();
    first.shutdown();
  }
  auto left = SessionStore(file_, [] { return SessionFile{}; }).load();
  ASSERT_TRUE(left);
  ASSERT_EQ(left->sessions.size(), 1u);
  const SessionRecord& r = left->sessions[0];
  EXPECT_EQ(r.node, "pve2");
  EXPECT_TRUE(kept_prunable(r, {}));
  EXPECT_TRUE(kept_prunable(r, {"pve1"}));
  EXPECT_FALSE(kept_prunable(r, {"pve2"}));
  SessionRecord older = r;
  older.node.clear();
  EXPECT_FALSE(kept_prunable(older, {"pve1"}));
  EXPECT_TRUE(kept_prunable(older, {}));
}

TEST_F(SessionsFileTest, ABadFileIsReportedAndReplaced) {
  std::ofstream(file_) << R"({"version":1,"sessions":[{"id":"sb-00000000000a"}]})";
  SessionRegistry r(file_);
  EXPECT_NE(r.load_error().find("sessions[0]: id, access_token and owner are required"),
            std::string::npos)
      << r.load_error();
  EXPECT_NE(r.load_error().find(file_), std::string::npos);
  r.ensure(sandbox("sb-00000000000c"));
  r.flush();
  auto now = SessionStore(file_, [] { return SessionFile{}; }).load();
  ASSERT_TRUE(now) << now.error().message;
  ASSERT_EQ(now->sessions.size(), 1u);
  EXPECT_EQ(now->sessions[0].id, "sb-00000000000c");
}

// A file that cannot be written (its directory is missing): the sessions still work in memory.
TEST_F(SessionsFileTest, AnUnwritableFileLeavesTheSessionsInMemory) {
  const std::string missing = (dir_ / "none" / "sessions.json").string();
  SessionRegistry r(missing);
  EXPECT_EQ(r.load_error(), "");  // nothing to read yet
  auto s = r.ensure(sandbox("sb-00000000000f"));
  r.flush();
  EXPECT_TRUE(r.token_matches("sb-00000000000f", s->access_token));
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST(SessionStoreText, RoundTripAndRefusals) {
  SessionRecord r{"sb-1", "tok", "base", {{"A", "1 \"2\""}}, "agent", "", "m", "pve"};
  auto back = SessionStore::decode(SessionStore::encode({{r}, std::string(32, '\x01')}));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->sessions.size(), 1u);
  EXPECT_EQ(back->sessions[0].env_vars.at("A"), "1 \"2\"");
  EXPECT_EQ(back->sessions[0].mask_host, "m");
  EXPECT_EQ(back->sessions[0].node, "pve");
  EXPECT_EQ(back->volume_key, std::string(32, '\x01'));
  for (const char* bad : {"", "[]", R"({"version":2,"sessions":[]})", R"({"version":"1"})",
                          R"({"version":1})", R"({"version":1,"sessions":[7]})",
                          R"({"version":1,"sessions":[{"id":"a","access_token":"t","owner":1}]})",
                          R"({"version":1,"sessions":[{"id":"a","access_token":"t",)"
                          R"("owner":"o","env_vars":{"A":1}}]})",
                          R"({"version":1,"volume_key":"c2hvcnQ=","sessions":[]})",
                          R"({"version":1,"volume_key":7,"sessions":[]})"})
    EXPECT_FALSE(SessionStore::decode(bad)) << bad;
}

}  // namespace
}  // namespace pvs::service::e2b
