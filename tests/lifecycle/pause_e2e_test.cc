// Pause and resume (docs/design/pause.md) on the whole stack (pvesim netns backend: each
// started CT is a namespace with its own sshd; a stop tears it down). The netns CTs share the
// host's file system, so files live in the stack's throw-away home; that files survive inside
// a real container is the lxc suite's part (tests/lxc/lxc_e2e_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <thread>

#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using std::chrono::seconds;

std::int64_t now() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

class PauseE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { stack_ = std::make_unique<test::Stack>(); }
  void TearDown() override { stack_.reset(); }

  ManagerConfig config() const {
    auto c = stack_->manager_config();
    c.max_paused = seconds(3600);
    return c;
  }
  std::unique_ptr<Manager> open(ManagerConfig c, lifecycle::FaultHook hook = {}) {
    lifecycle::TestPeers peers;
    peers.fault_hook = std::move(hook);
    auto m = lifecycle::open_manager(std::move(c), std::move(peers));
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  std::shared_ptr<Sandbox> create(Manager& m, CreateOptions o = {}) {
    o.internet = true;
    if (o.ttl.count() == 0) o.ttl = seconds(600);
    o.owner = "alice";
    o.labels = {{"team", "ml"}};
    auto sb = m.create(o);
    EXPECT_TRUE(sb) << (sb ? "" : sb.error().message);
    return sb ? *sb : nullptr;
  }
  std::string file_of(const Sandbox& sb) const { return stack_->home() + "/pause-" + sb.id(); }

  std::unique_ptr<test::Stack> stack_;
};

TEST_F(PauseE2eTest, PauseStopsItKeepingItsIdentityAndResumeHandsItBackOverSsh) {
  auto m = open(config());
  ASSERT_TRUE(m);
  auto sb = create(*m);
  ASSERT_TRUE(sb);
  auto before = sb->info();
  ASSERT_TRUE(sb->write_file(file_of(*sb), "kept across a pause", 0600));

  ASSERT_TRUE(sb->pause()) << "pause";
  auto paused = sb->info();
  EXPECT_EQ(paused.phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(paused.status, "stopped");
  EXPECT_EQ(paused.id, before.id);
  EXPECT_EQ(paused.vmid, before.vmid);
  EXPECT_EQ(paused.address, before.address);
  EXPECT_EQ(paused.labels, before.labels);
  EXPECT_EQ(paused.owner, "alice");
  EXPECT_EQ(paused.host_key, before.host_key);
  EXPECT_TRUE(paused.internet);
  // The paused TTL replaces its own.
  EXPECT_GE(paused.expires_at, now() + 3600 - 5);
  EXPECT_LE(paused.expires_at, now() + 3600);
  // Proxmox: stopped, its disk kept (the container is still there); the netns CT is gone.
  auto st = sb->status();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->status, "stopped");
  EXPECT_EQ(stack_->containers(), std::vector<int>{before.vmid});
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  // Its address keeps its grant and binding: nobody else gets them while it is paused.
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{before.address->to_string()});
  auto listed = m->list({{"team", "ml"}});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(m->stats().paused, 1u);

  // While paused: no commands, no TTL change, no second pause, no memory mode.
  auto e = sb->exec("true");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kConflict) << e.error().message;
  EXPECT_NE(e.error().message.find("paused"), std::string::npos) << e.error().message;
  EXPECT_EQ(sb->extend_ttl(seconds(60)).error().code, ErrorCode::kConflict);
  EXPECT_EQ(sb->pause().error().code, ErrorCode::kConflict);
  auto mem = sb->pause(PauseMode::kMemory);
  ASSERT_FALSE(mem);
  EXPECT_EQ(mem.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(mem.error().message.find("filesystem"), std::string::npos) << mem.error().message;

  ASSERT_TRUE(sb->resume()) << "resume";
  auto back = sb->info();
  EXPECT_EQ(back.phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(back.status, "running");
  EXPECT_EQ(back.host_key, before.host_key);
  // The time it had left (600 s, less the seconds the test took), not the paused TTL.
  EXPECT_LE(back.expires_at, now() + 600);
  EXPECT_GE(back.expires_at, now() + 600 - 60);
  EXPECT_TRUE(sb->is_connected());  // handed back with its SSH session up
  auto r = sb->exec("cat " + file_of(*sb) + "; echo; ip -4 -o addr show dev eth0");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out.substr(0, r->out.find('\n')), "kept across a pause");
  EXPECT_NE(r->out.find(before.address->to_string()), std::string::npos) << r->out;
  EXPECT_EQ(sb->resume().error().code, ErrorCode::kConflict);
  EXPECT_EQ(m->stats().paused, 0u);
  EXPECT_EQ(m->stats().pauses.count, 1u);  // the refused ones not counted
  EXPECT_EQ(m->stats().resumes.count, 1u);
  EXPECT_EQ(m->stats().resumes.errors, 0u);

  ASSERT_TRUE(sb->destroy());
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->internet_set().empty());
}

TEST_F(PauseE2eTest, ARestartedControllerKeepsItPausedAndResumable) {
  SandboxInfo before;
  {
    auto m = open(config());
    ASSERT_TRUE(m);
    auto sb = create(*m);
    ASSERT_TRUE(sb);
    ASSERT_TRUE(sb->write_file(file_of(*sb), "across a restart", 0600));
    ASSERT_TRUE(sb->pause());
    before = sb->info();
  }  // the controller goes away; only Proxmox remembers
  auto m = open(config());
  ASSERT_TRUE(m);
  auto listed = m->list();
  ASSERT_EQ(listed.size(), 1u);
  auto& found = listed[0];
  EXPECT_EQ(found.id, before.id);
  EXPECT_EQ(found.phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(found.status, "stopped");
  EXPECT_EQ(found.labels, before.labels);
  EXPECT_EQ(found.owner, "alice");
  EXPECT_EQ(found.address, before.address);
  EXPECT_EQ(found.host_key, before.host_key);
  EXPECT_EQ(found.expires_at, before.expires_at);
  EXPECT_EQ(m->count_owned("alice"), 1u);
  EXPECT_EQ(m->count_paused("alice"), 1u);  // recovered paused, counted paused
  EXPECT_EQ(m->count_paused("bob"), 0u);
  // A reconcile leaves it paused: not an orphan, not started.
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(m->list()[0].phase, SandboxMetadata::Phase::kPaused);
  EXPECT_TRUE(stack_->ct_namespaces().empty());

  auto sb = m->attach(before.id);
  ASSERT_TRUE(sb) << sb.error().message;
  ASSERT_TRUE((*sb)->resume(seconds(120)));
  EXPECT_EQ(m->count_paused("alice"), 0u);
  auto info = (*sb)->info();
  EXPECT_LE(info.expires_at, now() + 120);
  EXPECT_GE(info.expires_at, now() + 120 - 30);
  // Its own host key, from the metadata, is the one pinned.
  auto r = (*sb)->exec("cat " + file_of(**sb));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "across a restart");
  ASSERT_TRUE((*sb)->destroy());
  EXPECT_TRUE(stack_->containers().empty());
}

// A controller killed between a pause's two steps leaves "paused" recorded and the container
// running: the restarted controller adopts it paused and stops it.
TEST_F(PauseE2eTest, APausedSandboxFoundRunningIsStopped) {
  SandboxInfo before;
  {
    auto m = open(config());
    ASSERT_TRUE(m);
    auto sb = create(*m);
    ASSERT_TRUE(sb);
    before = sb->info();
  }
  // The first step of a pause, as the killed controller wrote it.
  auto client = pve::Client::create(config().proxmox);
  ASSERT_TRUE(client) << client.error().message;
  auto conf = (*client)->config("pve", before.vmid);
  ASSERT_TRUE(conf);
  auto md = decode_description(conf->at("description"));
  ASSERT_TRUE(md) << md.error().message;
  md->phase = SandboxMetadata::Phase::kPaused;
  md->ttl_left = 600;
  ASSERT_TRUE(
      (*client)->update_config("pve", before.vmid, {{"description", encode_description(*md)}}));
  ASSERT_EQ(stack_->ct_namespaces().size(), 1u);

  auto m = open(config());  // its first reconcile adopts the sandbox and stops the container
  ASSERT_TRUE(m);
  auto listed = m->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(listed[0].status, "stopped");
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  auto sb = m->attach(before.id);
  ASSERT_TRUE(sb);
  ASSERT_TRUE((*sb)->resume());
  ASSERT_TRUE((*sb)->exec("true"));
  ASSERT_TRUE((*sb)->destroy());
}

TEST_F(PauseE2eTest, AFailedStepLeavesItWhereItWas) {
  std::atomic<bool> fail_stop{true}, fail_mark{true};
  auto m = open(config(), [&](std::string_view step) -> Status {
    if (step == "pause:stop" && fail_stop) return fail(ErrorCode::kUnavailable, "injected");
    if (step == "resume:mark" && fail_mark) return fail(ErrorCode::kUnavailable, "injected");
    return {};
  });
  ASSERT_TRUE(m);
  auto sb = create(*m);
  ASSERT_TRUE(sb);
  auto expires = sb->info().expires_at;
  // The stop fails: still ready, running, its TTL its own.
  ASSERT_FALSE(sb->pause());
  EXPECT_EQ(sb->info().phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(sb->info().expires_at, expires);
  ASSERT_TRUE(sb->exec("true"));
  EXPECT_EQ(m->stats().pauses.errors, 1u);
  fail_stop = false;
  ASSERT_TRUE(sb->pause());
  // The last step of the resume fails: paused again, and stopped.
  ASSERT_FALSE(sb->resume());
  EXPECT_EQ(sb->info().phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(sb->status()->status, "stopped");
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  fail_mark = false;
  ASSERT_TRUE(sb->resume());
  ASSERT_TRUE(sb->exec("true"));
  ASSERT_TRUE(sb->destroy());
}

TEST_F(PauseE2eTest, APausedSandboxIsDestroyedWhenItsPausedTtlEnds) {
  auto c = config();
  c.max_paused = seconds(1);
  auto m = open(c);
  ASSERT_TRUE(m);
  auto sb = create(*m);
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->pause());
  auto expires = sb->info().expires_at;
  // Wait for the wall clock to pass the paused TTL's end (not a timing threshold: the reaper
  // compares whole seconds).
  while (now() <= expires) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(m->reconcile());
  EXPECT_TRUE(m->list().empty());
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_EQ(m->stats().expired_destroyed, 1u);
}

// CreateOptions::pause_on_expiry (E2B's lifecycle.onTimeout "pause").
CreateOptions pausing(bool auto_resume, seconds ttl) {
  CreateOptions o;
  o.ttl = ttl;
  o.pause_on_expiry = true;
  o.auto_resume = auto_resume;
  return o;
}

// Waits for the wall clock to pass `expires` (the reaper compares whole seconds): not a timing
// threshold, only the order of events.
void wait_past(std::int64_t expires) {
  while (now() <= expires) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST_F(PauseE2eTest, AutoResumeNeedsPauseOnExpiry) {
  auto m = open(config());
  ASSERT_TRUE(m);
  CreateOptions o;
  o.auto_resume = true;
  auto sb = m->create(o);
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sb.error().message.find("pause_on_expiry"), std::string::npos) << sb.error().message;
}

TEST_F(PauseE2eTest, ATtlThatEndsInAPauseKeepsItAndResumeGivesItsTtlAgain) {
  auto m = open(config());
  ASSERT_TRUE(m);
  auto sb = create(*m, pausing(false, seconds(2)));
  ASSERT_TRUE(sb);
  EXPECT_TRUE(sb->info().on_expiry.pause);
  ASSERT_TRUE(sb->write_file(file_of(*sb), "kept", 0600));
  wait_past(sb->info().expires_at);
  ASSERT_TRUE(m->reconcile());
  auto info = sb->info();
  EXPECT_EQ(info.phase, SandboxMetadata::Phase::kPaused);
  EXPECT_EQ(info.status, "stopped");
  EXPECT_EQ(m->stats().expired_paused, 1u);
  EXPECT_EQ(m->stats().expired_destroyed, 0u);
  EXPECT_GT(info.expires_at, now() + 3000);  // the paused TTL (max_paused) now runs
  // Without auto_resume a data-plane call is refused while paused.
  auto refused = sb->exec("true");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  auto before = now();
  ASSERT_TRUE(sb->resume());
  auto after = now();
  EXPECT_GE(sb->info().expires_at, before + 2);  // its TTL of creation, from the resume
  EXPECT_LE(sb->info().expires_at, after + 2);
  auto r = sb->exec("cat " + file_of(*sb));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "kept");
  ASSERT_TRUE(sb->destroy());
}

TEST_F(PauseE2eTest, AutoResumeWakesAPausedSandboxForTheNextCall) {
  auto m = open(config());
  ASSERT_TRUE(m);
  auto sb = create(*m, pausing(true, seconds(1)));
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->write_file(file_of(*sb), "woken", 0600));
  wait_past(sb->info().expires_at);
  ASSERT_TRUE(m->reconcile());
  ASSERT_EQ(sb->info().phase, SandboxMetadata::Phase::kPaused);
  auto r = sb->exec("cat " + file_of(*sb));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "woken");
  EXPECT_EQ(sb->info().phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(sb->info().status, "running");
  EXPECT_EQ(m->stats().auto_resumes, 1u);
  // Paused again at the next end, as often as it comes.
  wait_past(sb->info().expires_at);
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(sb->info().phase, SandboxMetadata::Phase::kPaused);
  auto again = sb->read_file(file_of(*sb));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, "woken");
  EXPECT_EQ(m->stats().auto_resumes, 2u);
  ASSERT_TRUE(sb->destroy());
}

// A TTL that ended while no controller ran: the next one adopts the sandbox and pauses it.
TEST_F(PauseE2eTest, ATtlThatEndedWhileNoControllerRanEndsInAPause) {
  SandboxInfo before;
  {
    auto m = open(config());
    ASSERT_TRUE(m);
    auto sb = create(*m, pausing(true, seconds(1)));
    ASSERT_TRUE(sb);
    before = sb->info();
  }
  wait_past(before.expires_at);
  auto m = open(config());
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->reconcile());
  auto listed = m->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, before.id);
  EXPECT_EQ(listed[0].phase, SandboxMetadata::Phase::kPaused);
  EXPECT_TRUE(listed[0].on_expiry.auto_resume);
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  auto sb = m->attach(before.id);
  ASSERT_TRUE(sb);
  ASSERT_TRUE((*sb)->exec("true"));  // auto-resumed
  ASSERT_TRUE((*sb)->destroy());
}

}  // namespace
}  // namespace pvs
