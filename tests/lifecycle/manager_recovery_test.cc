// Recovery that Proxmox cuts short: a container whose configuration cannot be read leaves its
// node unrecovered, so nothing new is placed there (its address may be in use) while the
// containers after it are adopted still.
#include "manager_model_fixture.h"

namespace pvs {
namespace {

std::vector<std::string> addresses(Manager& m) {
  std::vector<std::string> out;
  for (const auto& info : m.list()) out.push_back(info.address ? info.address->to_string() : "");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_F(ManagerModelTest, ANodeTakesNothingNewUntilEveryContainerOnItWasRead) {
  {
    auto m = open();
    ASSERT_TRUE(m);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(m->create({}));
  }  // the manager goes away without destroying anything
  // The restart's first config read (10000's: Proxmox lists in VMID order) is refused.
  stack_->sim().set_faults(
      {{"GET", "/nodes/{node}/lxc/{vmid}/config", 500, "config refused", 1.0, 1}});
  auto m = open();
  ASSERT_TRUE(m);
  stack_->sim().set_faults({});
  EXPECT_EQ(addresses(*m), (std::vector<std::string>{"10.99.0.3", "10.99.0.4"}));
  auto node = m->nodes().at(0);
  EXPECT_FALSE(node.recovered);
  EXPECT_NE(node.error.find("read config of 10000"), std::string::npos) << node.error;
  // 10.99.0.2 is 10000's, unknown to the node's pool. A create took it before (and only the
  // agent's BIND saved the day: 409, bound to veth10000i0); now it is refused, and makes nothing.
  auto refused = m->create({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("pve: recovering"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(stack_->containers(), (std::vector<int>{10000, 10001, 10002}));

  ASSERT_TRUE(m->reconcile());
  node = m->nodes().at(0);
  EXPECT_TRUE(node.recovered);
  EXPECT_TRUE(node.error.empty()) << node.error;
  EXPECT_EQ(addresses(*m), (std::vector<std::string>{"10.99.0.2", "10.99.0.3", "10.99.0.4"}));
  auto made = m->create({});
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ((*made)->info().address->to_string(), "10.99.0.5");
  for (auto& info : m->list()) ASSERT_TRUE(m->destroy_by_id(info.id));
  expect_clean();
}

// The background loop renews the leases of a node it has not read whole by ALLOW, one grant at a
// time: a SYNC would make the agent's set exactly what it knows, and take the grant, the list and
// the binding of every sandbox it has not adopted yet away.
TEST_F(ManagerModelTest, ANodeNotRecoveredKeepsWhatItHasNotReadYet) {
  {
    auto m = open();
    ASSERT_TRUE(m);
    CreateOptions o;
    o.internet = true;
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(m->create(o));
  }
  stack_->sim().set_faults(
      {{"GET", "/nodes/pve/lxc/10000/config", 500, "config refused", 1.0, -1}});
  auto seen = stack_->agent_log().size();
  auto config = stack_->manager_config();
  config.background = true;
  config.internet_lease = std::chrono::seconds(2);  // renewed every second
  auto m = open(config);
  ASSERT_TRUE(m);
  EXPECT_EQ(addresses(*m), std::vector<std::string>{"10.99.0.3"});
  // Two renewals of 10001's grant (or whatever the loop does instead).
  std::string log;
  auto renewals = [&] {
    log = stack_->agent_log().substr(seen);
    std::size_t n = 0;
    for (auto at = log.find("verb=ALLOW address=10.99.0.3 "); at != std::string::npos;
         at = log.find("verb=ALLOW address=10.99.0.3 ", at + 1))
      ++n;
    return n;
  };
  for (int i = 0; i < 600 && renewals() < 2 && log.find("verb=SYNC") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(renewals(), 2u) << log;
  for (const char* verb : {"verb=SYNC", "verb=REVOKE", "verb=UNBIND", "verb=EGRESS "})
    EXPECT_EQ(log.find(verb), std::string::npos) << verb << " in\n" << log;
  EXPECT_EQ(stack_->internet_set(), (std::set<std::string>{"10.99.0.2", "10.99.0.3"}));
  EXPECT_EQ(stack_->bound_ports().size(), 2u);
  EXPECT_FALSE(m->nodes().at(0).recovered);

  stack_->sim().set_faults({});
  ASSERT_TRUE(m->reconcile());
  EXPECT_TRUE(m->nodes().at(0).recovered);
  EXPECT_EQ(addresses(*m), (std::vector<std::string>{"10.99.0.2", "10.99.0.3"}));
  for (auto& info : m->list()) ASSERT_TRUE(m->destroy_by_id(info.id));
  expect_clean();
}

// A fork base goes once no sandbox uses it, which only a view of every node tells: a fork not
// adopted yet would count as none.
TEST_F(ManagerModelTest, AForkBaseStaysWhileANodeIsNotReadWhole) {
  auto bases = [](Manager& m) {
    auto all = m.custom_templates();
    return std::count_if(all.begin(), all.end(),
                         [](const CustomTemplate& t) { return t.fork_base; });
  };
  int fork_vmid = 0;
  std::string fork_id;
  {
    auto m = open();
    ASSERT_TRUE(m);
    CreateOptions o;
    o.owner = "tok";
    auto source = m->create(o);
    ASSERT_TRUE(source);
    auto forks = m->fork((*source)->id(), 1, "tok", [&](const std::string& base) {
      CreateOptions f;
      f.owner = "tok";
      f.template_name = base;
      return m->create(f);
    });
    ASSERT_TRUE(forks) << forks.error().message;
    fork_vmid = (*forks)[0]->info().vmid;
    fork_id = (*forks)[0]->id();
    EXPECT_EQ(bases(*m), 1);
  }
  stack_->sim().set_faults({{"GET", "/nodes/pve/lxc/" + std::to_string(fork_vmid) + "/config", 500,
                             "config refused", 1.0, -1}});
  auto m = open();
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->reconcile());
  EXPECT_EQ(bases(*m), 1);
  stack_->sim().set_faults({});
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(bases(*m), 1);  // its fork is adopted: in use
  ASSERT_TRUE(m->destroy_by_id(fork_id));
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(bases(*m), 0);
  for (auto& info : m->list()) ASSERT_TRUE(m->destroy_by_id(info.id));
  expect_clean();
}

class ManagerVolumeRecoveryTest : public ManagerModelTest {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.backend = "model";
    o.volume_holder = true;
    stack_ = std::make_unique<test::Stack>(o);
  }
};

// A volume goes (or grows) only when no sandbox mounts it, which a node not read whole cannot
// tell: the sandbox that mounts it may be the one not adopted yet.
TEST_F(ManagerVolumeRecoveryTest, AVolumeStaysWhileItsNodeIsNotReadWhole) {
  auto config = stack_->manager_config();
  config.volumes.holder_template_vmid = test::kVolumeHolderTemplate;
  std::string volume, user;
  int user_vmid = 0;
  {
    auto m = open(config);
    ASSERT_TRUE(m);
    auto v = m->create_volume({"data", 1, "tok", ""});
    ASSERT_TRUE(v) << v.error().message;
    volume = v->id;
    CreateOptions o;
    o.owner = "tok";
    o.volumes = {{volume, "/data", false}};
    auto sb = m->create(o);
    ASSERT_TRUE(sb) << sb.error().message;
    user = (*sb)->id();
    user_vmid = (*sb)->info().vmid;
  }
  stack_->sim().set_faults({{"GET", "/nodes/pve/lxc/" + std::to_string(user_vmid) + "/config", 500,
                             "config refused", 1.0, -1}});
  auto m = open(config);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->volumes().size(), 1u);  // its holder was read, the sandbox that mounts it not
  for (auto st : {m->delete_volume(volume), m->resize_volume(volume, 2).map([](auto&&) {})}) {
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(st.error().message.find("pve: recovering"), std::string::npos) << st.error().message;
  }
  stack_->sim().set_faults({});
  ASSERT_TRUE(m->reconcile());
  auto held = m->delete_volume(volume);
  ASSERT_FALSE(held);
  EXPECT_EQ(held.error().code, ErrorCode::kConflict) << held.error().message;
  ASSERT_TRUE(m->destroy_by_id(user));
  ASSERT_TRUE(m->delete_volume(volume));
  expect_clean();
}

}  // namespace pvs
