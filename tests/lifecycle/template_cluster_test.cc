// Custom templates on a two-node cluster (pvesim over HTTPS, netns backend, a real agent and
// ruleset per node): a copy built on each node (templates on local storage) or once (a template
// on shared storage, cloned to the other node with `target`), cache hits on both, a failure on
// one node leaving nothing on either, pool_size making a hot pool on each node, and delete on
// both. The containers share this machine's file system as the stack's user: the recipes only
// copy files into and run harmless scripts on the stack's own directory.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/template_recipe.h"
#include "sim.h"
#include "support/stack_detail.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using test::stack_detail::slurp;

int copy_vmid(const CustomTemplate& t, const std::string& node) {
  for (auto& c : t.copies)
    if (c.node == node) return c.vmid;
  return 0;
}

class TemplateClusterTest : public ::testing::Test {
 protected:
  void start(std::vector<int> shared = {}) {
    test::StackOptions so;
    so.nodes = 2;
    so.shared_templates = std::move(shared);
    stack_ = std::make_unique<test::Stack>(so);
    work_ = stack_->dir() + "/tpl";
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    auto* pw = ::getpwnam(stack_->user().c_str());
    ASSERT_TRUE(pw);
    ASSERT_EQ(::chown(work_.c_str(), pw->pw_uid, pw->pw_gid), 0);
  }
  void TearDown() override { stack_.reset(); }

  std::unique_ptr<Manager> open(int shared_template = 0, std::vector<HotPoolProfile> hot = {}) {
    auto c = stack_->manager_config();
    c.hot_pools = std::move(hot);
    c.template_clean_command = "true";
    if (shared_template != 0) {  // every node clones the shared template
      c.template_vmid = shared_template;
      for (auto& n : c.nodes) n.template_vmid = 0;
    }
    auto m = lifecycle::open_manager(c, {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  // A file, and a script that records the address of the container it runs in (so: the node).
  TemplateRecipe recipe(const std::string& extra_script = "", int pool_size = 0) const {
    std::string yaml =
        "name: tools\npool_size: " + std::to_string(pool_size) + "\nfiles:\n  - path: " + work_ +
        "/hello.txt\n    content: \"hello\\n\"\n"
        "script: |\n"
        "  ip -4 -o addr show scope global | awk '{print $4}' >> " +
        work_ + "/builds\n  " + (extra_script.empty() ? "true" : extra_script) + "\n";
    auto r = parse_recipe(yaml, "test.yaml");
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return *r;
  }
  // Templates in the controller's VMID range, on node i.
  std::vector<int> templates(int node) const {
    auto client = pve::Client::create(stack_->manager_config().proxmox);
    std::vector<int> out;
    if (!client) return out;
    auto cts = (*client)->list_containers(test::Stack::node_name(node));
    for (auto& ct : cts ? *cts : std::vector<pve::ContainerStatus>{})
      if (ct.is_template && ct.vmid >= 10000) out.push_back(ct.vmid);
    return out;
  }
  std::size_t clones() { return stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"); }
  std::shared_ptr<Sandbox> create_on(Manager& m, const std::string& node) {
    CreateOptions o;
    o.template_name = "tools";
    o.node = node;
    auto sb = m.create(o);
    EXPECT_TRUE(sb) << node << ": " << (sb ? "" : sb.error().message);
    return sb ? *sb : nullptr;
  }

  // The pools named "tools", by node.
  static std::map<std::string, PoolInfo> tools_pools(Manager& m) {
    std::map<std::string, PoolInfo> out;
    for (auto& p : m.pools())
      if (p.name == "tools") out[p.node] = p;
    return out;
  }
  // A member of "tools" ready on each node (an event, bounded only against a hang).
  static void wait_for_members(Manager& m) {
    for (int i = 0; i < 1200; ++i) {
      auto p = tools_pools(m);
      if (p.size() == 2 && p["pve1"].ready == 1 && p["pve2"].ready == 1) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::unique_ptr<test::Stack> stack_;
  std::string work_;
};

TEST_F(TemplateClusterTest, LocalStorageBuildsOnEveryNodeCachesAndDeletesEverywhere) {
  start();
  auto m = open();
  ASSERT_TRUE(m);
  std::vector<std::string> lines;
  auto built = m->build_template(recipe(), [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->built_on, (std::vector<std::string>{"pve1", "pve2"}));
  ASSERT_EQ(built->made.copies.size(), 2u);
  EXPECT_EQ(built->made.nodes, (std::vector<std::string>{"pve1", "pve2"}));
  for (int i = 0; i < 2; ++i) {
    auto& c = built->made.copies[static_cast<std::size_t>(i)];
    EXPECT_EQ(c.node, test::Stack::node_name(i + 1));
    EXPECT_EQ(c.base_vmid, 9000 + i);  // each node's own template
    EXPECT_EQ(templates(i + 1), std::vector<int>{c.vmid});
  }
  // Each node's lines carry its name; the script ran once on each node's network.
  for (const char* node : {"[pve1] ==> script", "[pve2] ==> script"})
    EXPECT_NE(std::find(lines.begin(), lines.end(), node), lines.end()) << built->log;
  auto builds = slurp(work_ + "/builds");
  EXPECT_NE(builds.find("10.91."), std::string::npos) << builds;
  EXPECT_NE(builds.find("10.92."), std::string::npos) << builds;

  // A create on either node clones that node's copy.
  auto on1 = create_on(*m, "pve1"), on2 = create_on(*m, "pve2");
  ASSERT_TRUE(on1 && on2);
  for (auto& sb : {on1, on2}) {
    auto cat = sb->exec("cat " + work_ + "/hello.txt");
    ASSERT_TRUE(cat);
    EXPECT_EQ(cat->out, "hello\n");
  }
  EXPECT_EQ(on2->info().node, "pve2");
  EXPECT_EQ(m->custom_templates().at(0).in_use, 2);

  // The same recipe: a hit on both nodes, nothing cloned.
  auto before = clones();
  auto again = m->build_template(recipe(), {});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(clones(), before);

  // In use on one node: refused; then deleted on both.
  ASSERT_TRUE(on1->destroy());
  auto refused = m->delete_template("tools");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  ASSERT_TRUE(on2->destroy());
  ASSERT_TRUE(m->delete_template("tools"));
  EXPECT_TRUE(m->custom_templates().empty());
  EXPECT_TRUE(templates(1).empty());
  EXPECT_TRUE(templates(2).empty());
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
}

TEST_F(TemplateClusterTest, AFailureOnTheSecondNodeLeavesNothingOnEither) {
  start();
  auto m = open();
  ASSERT_TRUE(m);
  auto failed = m->build_template(
      recipe("if ip -4 -o addr show | grep -q ' 10\\.92\\.'; then echo not here; exit 7; fi"), {});
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("pve2: script: exited with 7"), std::string::npos)
      << failed.error().message;
  EXPECT_EQ(failed.error().message.find("pve1:"), std::string::npos) << failed.error().message;
  EXPECT_NE(failed.error().message.find("not here"), std::string::npos);
  EXPECT_TRUE(m->custom_templates().empty());
  EXPECT_TRUE(templates(1).empty());  // pve1's copy was made, then destroyed
  EXPECT_TRUE(templates(2).empty());
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  // Built on both; then pve2's copy is gone behind the controller's back: the next build makes
  // pve2's only, pve1's is a hit.
  auto built = m->build_template(recipe(), {});
  ASSERT_TRUE(built) << built.error().message;
  int on1 = copy_vmid(built->made, "pve1"), on2 = copy_vmid(built->made, "pve2");
  auto client = pve::Client::create(stack_->manager_config().proxmox);
  ASSERT_TRUE(client);
  ASSERT_TRUE((*client)->destroy("pve2", on2));
  for (int i = 0; i < 200 && !templates(2).empty(); ++i)  // the task ends (bounded: a hang)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(m->reconcile());
  ASSERT_EQ(m->custom_templates().at(0).nodes, std::vector<std::string>{"pve1"});
  auto again = m->build_template(recipe(), {});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->cached);
  EXPECT_EQ(again->built_on, std::vector<std::string>{"pve2"});
  EXPECT_EQ(copy_vmid(again->made, "pve1"), on1);
  EXPECT_EQ(templates(2).size(), 1u);
  ASSERT_TRUE(m->delete_template("tools"));
}

TEST_F(TemplateClusterTest, PoolSizeMakesAHotPoolOnEachNode) {
  start();
  auto m = open();
  ASSERT_TRUE(m);
  auto built = m->build_template(recipe("", 1), {});
  ASSERT_TRUE(built) << built.error().message;
  auto pools = [&] { return tools_pools(*m); };
  wait_for_members(*m);
  auto p = pools();
  ASSERT_EQ(p.size(), 2u);
  for (auto& [node, pool] : p) {
    EXPECT_EQ(pool.size, 1) << node;
    EXPECT_EQ(pool.ready, 1) << node;
    EXPECT_EQ(pool.template_vmid, copy_vmid(built->made, node)) << node;
  }
  auto sb = create_on(*m, "pve2");
  ASSERT_TRUE(sb);
  EXPECT_EQ(pools()["pve2"].claims, 1u);  // a hot hit
  auto cat = sb->exec("cat " + work_ + "/hello.txt");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->out, "hello\n");
  ASSERT_TRUE(sb->destroy());
  // Its own pool does not hold the delete back: its members go first.
  auto deleted = m->delete_template("tools");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_TRUE(pools().empty());  // its pool retired with it
  EXPECT_TRUE(templates(1).empty());
  EXPECT_TRUE(templates(2).empty());
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
}

TEST_F(TemplateClusterTest, ARestartAdoptsThePoolSizeMembers) {
  start();
  auto m = open();
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->build_template(recipe("", 1), {}));
  wait_for_members(*m);
  auto members = stack_->containers();
  ASSERT_EQ(members.size(), 2u);
  m.reset();
  auto before = clones();
  m = open();
  ASSERT_TRUE(m);
  // The template's pool is back before the first reconcile looks at its members: adopted.
  auto p = tools_pools(*m);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p["pve1"].ready, 1);
  EXPECT_EQ(p["pve2"].ready, 1);
  EXPECT_EQ(stack_->containers(), members);
  EXPECT_EQ(clones(), before);
  ASSERT_TRUE(m->delete_template("tools"));
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
}

TEST_F(TemplateClusterTest, AConfiguredProfileOfTheTemplateWinsOverPoolSize) {
  start();
  HotPoolProfile mine;
  mine.name = "mine";
  mine.template_name = "tools";
  mine.size = 0;  // the operator's choice: none
  auto m = open(0, {mine});
  ASSERT_TRUE(m);
  std::vector<std::string> lines;
  auto built = m->build_template(recipe("", 2), [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_TRUE(tools_pools(*m).empty());
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "==> pool_size 2 not applied: the configuration's hot pool profile mine "
                      "serves it"),
            lines.end())
      << built->log;
  EXPECT_EQ(stack_->containers(), std::vector<int>{});  // no member made
  ASSERT_TRUE(m->delete_template("tools"));
}

TEST_F(TemplateClusterTest, SharedStorageBuildsOnceAndTheOtherNodeClonesItByTarget) {
  start({9100});
  auto m = open(9100);
  ASSERT_TRUE(m);
  auto built = m->build_template(recipe(), {});
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->built_on, std::vector<std::string>{"pve1"});
  ASSERT_EQ(built->made.copies.size(), 1u);
  EXPECT_EQ(built->made.copies[0].serves, (std::vector<std::string>{"pve1", "pve2"}));
  EXPECT_EQ(built->made.nodes, (std::vector<std::string>{"pve1", "pve2"}));
  EXPECT_TRUE(templates(2).empty());
  auto sb = create_on(*m, "pve2");
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->info().node, "pve2");
  auto cat = sb->exec("cat " + work_ + "/hello.txt");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->out, "hello\n");
  // What the catalogue says survives a restart (the copy's label names the nodes it serves).
  ASSERT_TRUE(sb->destroy());
  m.reset();
  m = open(9100);
  ASSERT_TRUE(m);
  auto list = m->custom_templates();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].nodes, (std::vector<std::string>{"pve1", "pve2"}));
  auto again = m->build_template(recipe(), {});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->cached);
  ASSERT_TRUE(m->delete_template("tools"));
  EXPECT_TRUE(templates(1).empty());
}

}  // namespace
}  // namespace pvs
