// Custom templates from a recipe (Manager::build_template) on the whole stack (pvesim netns
// backend: each container is a namespace with its own sshd, sharing this machine's file
// system as the stack's user). So recipes here copy files into and run scripts on the stack's
// own directory only; the clean command is replaced by a harmless one that leaves a mark.
#include <gtest/gtest.h>
#include <unistd.h>
#include <filesystem>

#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/template_recipe.h"
#include "sim.h"
#include "support/sshd_fixture.h"
#include "support/stack_detail.h"
#include "support/stack_fixture.h"

#ifndef PVS_LIFECYCLE_DRIVER
#error "PVS_LIFECYCLE_DRIVER must name the driver binary"
#endif

namespace pvs {
namespace {

using test::stack_detail::slurp;

class TemplateBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    work_ = stack_->dir() + "/tpl";
    // The containers' sshds run as the stack's user: the recipes' files and scripts are theirs.
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    auto* pw = ::getpwnam(stack_->user().c_str());
    ASSERT_TRUE(pw);
    ASSERT_EQ(::chown(work_.c_str(), pw->pw_uid, pw->pw_gid), 0);
  }
  void TearDown() override { stack_.reset(); }

  ManagerConfig config() const {
    auto c = stack_->manager_config();
    c.template_clean_command = "touch " + work_ + "/cleaned";
    return c;
  }
  std::unique_ptr<Manager> open() {
    auto m = lifecycle::open_manager(config(), {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  TemplateRecipe recipe(const std::string& script = "") const {
    std::string yaml =
        "name: tools\n"
        "files:\n"
        "  - path: " +
        work_ +
        "/etc/hello.txt\n"
        "    content: \"hello from the recipe\\n\"\n"
        "    mode: \"0640\"\n"
        "script: |\n"
        "  echo building\n"
        "  " +
        (script.empty() ? "echo ran >" + work_ + "/script.out" : script) + "\n";
    auto r = parse_recipe(yaml, "test.yaml");
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return *r;
  }
  bool is_template(int vmid) const {
    auto client = pve::Client::create(stack_->manager_config().proxmox);
    if (!client) return false;
    auto conf = (*client)->config("pve", vmid);
    return conf && conf->count("template") && conf->at("template") == "1";
  }

  std::unique_ptr<test::Stack> stack_;
  std::string work_;
};

TEST_F(TemplateBuildTest, BuildsCopiesRunsAndCachesAndASandboxUsesIt) {
  auto m = open();
  ASSERT_TRUE(m);
  std::vector<std::string> lines;
  auto built = m->build_template(recipe(), [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_FALSE(built->cached);
  EXPECT_GT(built->made.vmid, 0);
  EXPECT_EQ(built->made.name, "tools");
  EXPECT_EQ(built->made.digest, recipe().digest());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "building"), lines.end()) << built->log;
  EXPECT_NE(built->log.find("==> script"), std::string::npos);
  EXPECT_EQ(slurp(work_ + "/etc/hello.txt"), "hello from the recipe\n");
  EXPECT_EQ(slurp(work_ + "/script.out"), "ran\n");
  EXPECT_TRUE(std::ifstream(work_ + "/cleaned").good());
  EXPECT_TRUE(is_template(built->made.vmid));
  EXPECT_EQ(stack_->containers(), std::vector<int>{});  // the build's container is the template
  EXPECT_TRUE(stack_->ct_namespaces().empty());

  // The same recipe again: a cache hit, nothing cloned.
  auto clones = stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone");
  auto again = m->build_template(recipe(), {});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->made.vmid, built->made.vmid);
  EXPECT_EQ(stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"), clones);
  // Another recipe under the same name: refused.
  auto other = m->build_template(recipe("true"), {});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);

  // A sandbox from it by name: cloned from the template, labelled, its file there.
  CreateOptions o;
  o.template_name = "tools";
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ((*sb)->info().labels.at(std::string(kTemplateNameLabel)), "tools");
  auto cat =
      (*sb)->exec("cat " + work_ + "/etc/hello.txt && stat -c %a " + work_ + "/etc/hello.txt");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->out, "hello from the recipe\n640\n");
  auto list = m->custom_templates();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].in_use, 1);

  // In use: not deleted; once the sandbox is gone, deleted.
  auto refused = m->delete_template("tools");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  ASSERT_TRUE((*sb)->destroy());
  auto deleted = m->delete_template("tools");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_TRUE(m->custom_templates().empty());
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
  CreateOptions gone;
  gone.template_name = "tools";
  auto no = m->create(gone);
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(TemplateBuildTest, AHotPoolProfileNamesTheTemplate) {
  auto c = config();
  HotPoolProfile hot;
  hot.name = "tools-hot";
  hot.template_name = "tools";
  hot.size = 1;
  c.hot_pools.push_back(hot);
  auto opened = lifecycle::open_manager(c, {});
  ASSERT_TRUE(opened) << opened.error().message;
  auto& m = *opened;
  auto pool = [&] { return m->pools().at(0); };
  EXPECT_EQ(pool().template_vmid, 0);  // not built yet: no members
  auto built = m->build_template(recipe(), {});
  ASSERT_TRUE(built) << built.error().message;
  // The profile's template now: a member is made (an event, bounded only against a hang).
  for (int i = 0; i < 1200 && pool().ready < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(pool().ready, 1);
  EXPECT_EQ(pool().template_vmid, built->made.vmid);
  CreateOptions o;
  o.template_name = "tools";
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(pool().claims, 1u);  // served by the hot member
  auto cat = (*sb)->exec("cat " + work_ + "/etc/hello.txt");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->out, "hello from the recipe\n");
  // The pool feeds on it: not deleted while the profile wants members.
  ASSERT_TRUE((*sb)->destroy());
  auto refused = m->delete_template("tools");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
}

TEST_F(TemplateBuildTest, ARestartFindsTheTemplateInProxmox) {
  int vmid = 0;
  {
    auto m = open();
    ASSERT_TRUE(m);
    auto built = m->build_template(recipe(), {});
    ASSERT_TRUE(built) << built.error().message;
    vmid = built->made.vmid;
  }
  auto m = open();
  ASSERT_TRUE(m);
  auto list = m->custom_templates();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].vmid, vmid);
  EXPECT_EQ(list[0].digest, recipe().digest());
  auto again = m->build_template(recipe(), {});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->cached);
}

// A recipe's disk_gb grows a smaller base's disk before the build and never shrinks one; past
// limits.max_disk_gb it is refused before anything is cloned.
TEST_F(TemplateBuildTest, DiskGbGrowsASmallerBaseOnly) {
  auto m = open();
  ASSERT_TRUE(m);
  auto client = pve::Client::create(stack_->manager_config().proxmox);
  ASSERT_TRUE(client);
  auto disk_of = [&](int vmid) {
    auto conf = (*client)->config("pve", vmid);
    return conf && conf->count("rootfs") ? conf->at("rootfs") : std::string();
  };
  auto base = disk_of(stack_->manager_config().template_vmid);
  ASSERT_NE(base.find("size=8G"), std::string::npos) << base;
  auto grown = recipe();
  grown.name = "grown";
  grown.disk_gb = 12;
  auto g = m->build_template(grown, {});
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_NE(disk_of(g->made.vmid).find("size=12G"), std::string::npos) << disk_of(g->made.vmid);
  auto kept = recipe();
  kept.name = "kept";
  kept.disk_gb = 2;
  auto k = m->build_template(kept, {});
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_NE(disk_of(k->made.vmid).find("size=8G"), std::string::npos) << disk_of(k->made.vmid);
  auto huge = recipe();
  huge.name = "huge";
  huge.disk_gb = config().max_disk_gb + 1;
  auto h = m->build_template(huge, {});
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("max_disk_gb"), std::string::npos) << h.error().message;
}

TEST_F(TemplateBuildTest, AFailingStepFailsWithItsLogAndLeavesNothing) {
  auto m = open();
  ASSERT_TRUE(m);
  auto failed = m->build_template(recipe("echo about to fail; exit 3"), {});
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("script: exited with 3"), std::string::npos)
      << failed.error().message;
  EXPECT_NE(failed.error().message.find("about to fail"), std::string::npos);
  EXPECT_TRUE(m->custom_templates().empty());
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
  // The VMID went back: the next build succeeds.
  auto built = m->build_template(recipe(), {});
  ASSERT_TRUE(built) << built.error().message;
}

// The netns stand-in shares the host's file system: packages and env (system files) are refused
// before any step runs, and nothing is left. (The default clean skips itself there too: the
// console e2e test builds with it.)
TEST_F(TemplateBuildTest, PackagesAndEnvNeedARealContainer) {
  auto m = open();
  ASSERT_TRUE(m);
  for (const char* extra : {"packages: [hello]\n", "env:\n  EDITOR: vi\n"}) {
    auto r = parse_recipe(
        std::string("name: system\n") + extra + "script: touch " + work_ + "/ran\n", "test.yaml");
    ASSERT_TRUE(r) << r.error().message;
    auto built = m->build_template(*r, {});
    ASSERT_FALSE(built) << extra;
    EXPECT_NE(built.error().message.find("need a real container"), std::string::npos)
        << built.error().message;
    EXPECT_FALSE(std::filesystem::exists(work_ + "/ran"));
    EXPECT_EQ(stack_->containers(), std::vector<int>{});
  }
}

TEST_F(TemplateBuildTest, SigkillMidBuildLeavesNothingAfterRecovery) {
  // A controller (the driver) builds a recipe whose script waits for a file; once the script
  // has said it runs, the controller is killed. The build's container (phase "creating",
  // running) is what recovery finds: the next controller destroys it.
  const std::string go = work_ + "/go", out = work_ + "/driver.out";
  {
    std::ofstream r(work_ + "/recipe.yaml");
    r << "name: killed\nscript: |\n  echo script-started\n  while [ ! -e " << go
      << " ]; do sleep 0.05; done\n";
  }
  test::SpawnOptions so;
  so.stdout_file = out;
  pid_t pid = test::spawn_process(
      {PVS_LIFECYCLE_DRIVER, std::to_string(stack_->port()), stack_->fingerprint(), stack_->dir(),
       "1", "build", work_ + "/recipe.yaml"},
      so);
  ASSERT_GT(pid, 0);
  // Waits for an event (the script's line), not for a time: bounded only against a hang.
  bool started = false;
  for (int i = 0; i < 6000 && !started; ++i) {
    started = slurp(out).find("script-started") != std::string::npos;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(started) << slurp(out);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(stack_->containers().size(), 1u);  // the build's container, left running
  std::ofstream(go).put('x');                  // the script could end now; nobody waits

  auto m = open();
  ASSERT_TRUE(m);
  for (int i = 0; i < 40 && !stack_->containers().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    (void)m->reconcile();
  }
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
  EXPECT_TRUE(m->custom_templates().empty());
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
  // The name is free: the same recipe builds.
  auto r = parse_recipe(slurp(work_ + "/recipe.yaml"), "recipe.yaml");
  ASSERT_TRUE(r);
  auto built = m->build_template(*r, {});
  ASSERT_TRUE(built) << built.error().message;
}

}  // namespace
}  // namespace pvs
