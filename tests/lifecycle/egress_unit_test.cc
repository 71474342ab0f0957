// Egress allowlists in the Manager over in-memory peers (fake_peers.h): create with a list,
// the order of every transition (never a window wider than either end), failures and their
// rollback, recovery re-asserting a list from the description, and reconcile repairing the
// agent's lists.
#include <gtest/gtest.h>

#include <algorithm>

#include "fake_peers.h"
#include "manager_testing.h"
#include "shared_peers.h"

namespace pvs {
namespace {

class EgressUnitTest : public ::testing::Test {
 protected:
  EgressUnitTest() : pve_(9000) {
    config_.node = "pve";
    config_.template_vmid = 9000;
    config_.vmid_min = 100;
    config_.vmid_max = 199;
    config_.sandbox_cidr = *Cidr::parse("10.99.0.0/24");
    config_.gateway = *Ipv4Address::parse("10.99.0.1");
    config_.wait_for_ssh = false;
    config_.background = false;
  }
  void SetUp() override { open(); }

  void open() {  // a (re)started controller over the same cluster and agent
    m_.reset();
    lifecycle::TestPeers peers;
    peers.proxmox = std::make_unique<test::SharedProxmox>(&pve_);
    peers.agent = std::make_unique<test::SharedAgent>(&agent_);
    auto m = lifecycle::open_manager(config_, std::move(peers));
    ASSERT_TRUE(m) << m.error().message;
    m_ = std::move(*m);
  }

  std::shared_ptr<Sandbox> create(const Egress& e) {
    CreateOptions o;
    o.egress = e;
    auto sb = m_->create(o);
    EXPECT_TRUE(sb) << sb.error().message;
    return sb ? *sb : nullptr;
  }

  static std::string text(const Egress& e) {
    if (e.mode == Egress::Mode::kOn) return "on";
    if (e.mode == Egress::Mode::kOff) return "off";
    std::string s = "allow:";
    for (auto& n : e.list.names) s += n + ",";
    return s;
  }

  ManagerConfig config_;
  test::FakeProxmox pve_;
  test::FakeAgent agent_;
  std::unique_ptr<Manager> m_;
};

const Egress kPython = Egress::allow({"pypi.org", "files.pythonhosted.org"});
const Egress kGit = Egress::allow({"*.github.com"}, {443});

TEST_F(EgressUnitTest, CreateWithAnAllowlistListsItAndDestroyRemovesIt) {
  auto sb = create(kPython);
  ASSERT_TRUE(sb);
  auto a = *sb->info().address;
  EXPECT_EQ(sb->info().egress, kPython);
  EXPECT_FALSE(sb->info().internet);
  EXPECT_TRUE(agent_.set().empty());  // not in the ALLOW set
  ASSERT_EQ(agent_.lists().size(), 1u);
  EXPECT_EQ(agent_.lists().at(a), kPython.list);
  ASSERT_TRUE(sb->destroy());
  EXPECT_TRUE(agent_.lists().empty());
  EXPECT_TRUE(pve_.containers().empty());
}

// Each step of each change leaves the sandbox reaching no more than the wider end.
TEST_F(EgressUnitTest, TransitionsNeverOpenAWindowWiderThanEitherEnd) {
  auto sb = create(Egress::off());
  ASSERT_TRUE(sb);
  auto a = *sb->info().address;
  std::vector<Egress> path = {kPython,      Egress::on(),  kGit, kPython,      Egress::off(),
                              Egress::on(), Egress::off(), kGit, Egress::off()};
  Egress from = Egress::off();
  for (const auto& to : path) {
    auto before = agent_.history(a).size();
    ASSERT_TRUE(sb->set_egress(to)) << text(from) << " -> " << text(to);
    auto h = agent_.history(a);
    for (auto i = before; i < h.size(); ++i)
      EXPECT_TRUE(h[i] == text(from) || h[i] == text(to))
          << text(from) << " -> " << text(to) << ": step " << h[i];
    ASSERT_FALSE(h.empty());
    EXPECT_EQ(h.back(), text(to));
    EXPECT_EQ(sb->info().egress, to);
    from = to;
  }
}

TEST_F(EgressUnitTest, TheVerbsFollowTheContractOrder) {
  auto sb = create(Egress::off());
  ASSERT_TRUE(sb);
  auto a = sb->info().address->to_string();
  auto after = [&](const Egress& e) {
    auto n = agent_.verbs().size();
    EXPECT_TRUE(sb->set_egress(e));
    auto v = agent_.verbs();
    return std::vector<std::string>(v.begin() + static_cast<long>(n), v.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(after(kPython), (V{"EGRESS " + a}));
  EXPECT_EQ(after(Egress::on()), (V{"ALLOW " + a, "EGRESS-OFF " + a}));
  EXPECT_EQ(after(kGit), (V{"EGRESS " + a, "REVOKE " + a}));
  EXPECT_EQ(after(kPython), (V{"EGRESS " + a}));
  EXPECT_EQ(after(Egress::off()), (V{"REVOKE " + a, "EGRESS-OFF " + a}));
  EXPECT_EQ(after(Egress::on()), (V{"ALLOW " + a}));
  EXPECT_EQ(after(Egress::off()), (V{"REVOKE " + a}));  // no EGRESS for a sandbox never listed
}

TEST_F(EgressUnitTest, SetInternetIsTheShorthand) {
  auto sb = create(kPython);
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->set_internet(true));
  EXPECT_EQ(sb->info().egress, Egress::on());
  EXPECT_TRUE(sb->info().internet);
  EXPECT_TRUE(agent_.lists().empty());
  EXPECT_EQ(agent_.set().size(), 1u);
  ASSERT_TRUE(sb->set_internet(false));
  EXPECT_EQ(sb->info().egress, Egress::off());
  EXPECT_TRUE(agent_.set().empty());
}

TEST_F(EgressUnitTest, AFailedEgressKeepsTheOldOneAndRecordsNothing) {
  auto sb = create(Egress::on());
  ASSERT_TRUE(sb);
  agent_.fail_egress = true;
  auto r = sb->set_egress(kPython);
  ASSERT_FALSE(r);
  EXPECT_EQ(sb->info().egress, Egress::on());
  EXPECT_EQ(agent_.set().size(), 1u);
  agent_.fail_egress = false;
  open();  // the description still says on
  auto again = m_->attach(sb->id());
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->info().egress, Egress::on());
}

TEST_F(EgressUnitTest, AFailedEgressAtCreateRollsBackEverything) {
  agent_.fail_egress = true;
  CreateOptions o;
  o.egress = kPython;
  ASSERT_FALSE(m_->create(o));
  EXPECT_TRUE(pve_.containers().empty());
  EXPECT_TRUE(agent_.lists().empty());
  EXPECT_EQ(m_->stats().live, 0u);
  // EGRESS off failed as well: the address stays quarantined until a reconcile proves the
  // agent holds no list for it.
  EXPECT_EQ(m_->stats().quarantined_addresses, 1u);
  agent_.fail_egress = false;
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(m_->stats().quarantined_addresses, 0u);
}

TEST_F(EgressUnitTest, BadEgressIsRefusedBeforeAnythingIsCloned) {
  CreateOptions both;
  both.internet = true;
  both.egress = kPython;
  auto r = m_->create(both);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  CreateOptions bad;
  bad.egress = Egress::allow({"PyPI.org"});
  r = m_->create(bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pve_.calls("clone"), 0);
  auto sb = create(Egress::off());
  ASSERT_TRUE(sb);
  auto set = sb->set_egress(Egress::allow({"*.com"}));
  ASSERT_FALSE(set);
  EXPECT_EQ(set.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(agent_.verbs().empty());
}

TEST_F(EgressUnitTest, ARestartedControllerReassertsTheListFromTheDescription) {
  auto sb = create(kPython);
  ASSERT_TRUE(sb);
  auto id = sb->id();
  auto a = *sb->info().address;
  sb.reset();
  agent_.forget_lists();  // e.g. the agent lost its journal
  open();
  EXPECT_EQ(agent_.lists().at(a), kPython.list);
  auto back = m_->attach(id);
  ASSERT_TRUE(back);
  EXPECT_EQ((*back)->info().egress, kPython);
  EXPECT_TRUE(agent_.set().empty());
}

TEST_F(EgressUnitTest, ReconcileMakesTheListsExactlyTheWantedOnes) {
  auto sb = create(kPython);
  ASSERT_TRUE(sb);
  auto a = *sb->info().address;
  auto stray = *Ipv4Address::parse("10.99.0.77");
  ASSERT_TRUE(agent_.egress(stray, kGit.list));
  ASSERT_TRUE(agent_.egress(a, kGit.list));  // changed behind our back
  ASSERT_TRUE(m_->reconcile());
  auto lists = agent_.lists();
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_EQ(lists.at(a), kPython.list);
}

// An agent from before #20 answers 400 to EGRESS and EGRESSES: sandboxes without a list work
// as before, a list is refused (and leaves nothing behind).
TEST_F(EgressUnitTest, AnAgentWithoutEgressVerbsServesEverythingButLists) {
  agent_.no_egress_verbs = true;
  agent_.reconnect();  // e.g. the agent was downgraded and restarted
  auto statuses = agent_.statuses();
  auto egresses = agent_.egresses_calls();
  ASSERT_TRUE(m_->reconcile());
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(agent_.statuses(), statuses + 1);     // asked once per connection
  EXPECT_EQ(agent_.egresses_calls(), egresses);   // nothing to compare: no EGRESSES
  EXPECT_EQ(m_->stats().agent_calls.errors, 0u);  // and no failed call counted
  auto on = create(Egress::on());
  ASSERT_TRUE(on);
  ASSERT_TRUE(on->set_internet(false));
  ASSERT_TRUE(on->destroy());
  CreateOptions o;
  o.egress = kPython;
  auto r = m_->create(o);
  ASSERT_FALSE(r);
  EXPECT_TRUE(pve_.containers().empty());
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(m_->stats().quarantined_addresses, 0u);
}

TEST_F(EgressUnitTest, ARemovalThatFailsRecordsTheNewEgressAndQuarantines) {
  auto sb = create(kPython);
  ASSERT_TRUE(sb);
  agent_.fail_egress = true;  // ALLOW works, EGRESS off does not
  auto r = sb->set_egress(Egress::on());
  ASSERT_FALSE(r);
  EXPECT_EQ(sb->info().egress, Egress::on());
  EXPECT_EQ(m_->stats().quarantined_addresses, 1u);
  agent_.fail_egress = false;
  ASSERT_TRUE(m_->reconcile());
  EXPECT_TRUE(agent_.lists().empty());
  EXPECT_EQ(agent_.set().size(), 1u);
  EXPECT_EQ(m_->stats().quarantined_addresses, 0u);
}

}  // namespace
}  // namespace pvs
