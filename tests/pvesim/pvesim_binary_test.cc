// The pvesim executable as the demo and scripts use it: flags, --info-file, the control
// endpoint, and a clean exit on SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "backend.h"
#include "pvesandbox/proxmox_client.h"

extern char** environ;

namespace {

std::map<std::string, std::string> read_info(const std::string& path) {
  std::map<std::string, std::string> info;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) info[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return info;
}

TEST(PvesimBinary, FlagsInfoFileAndCleanExit) {
  char dir[] = "/tmp/pvesim-bin-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string info_file = std::string(dir) + "/info";
  std::string secret_file = std::string(dir) + "/secret";
  std::ofstream(secret_file) << "s3cr3t-uuid\n";
  std::vector<std::string> args = {PVESIM_BINARY,
                                   "--token-file",
                                   "ci@pve!bin=" + secret_file,
                                   "--auth-delay-ms",
                                   "0",
                                   "--pool",
                                   "sb",
                                   "--template",
                                   "8000",
                                   "--task-ms",
                                   "vzclone=10",
                                   "--fault",
                                   "GET /cluster/nextid=596:1:1",
                                   "--lock",
                                   "8000=backup",
                                   "--info-file",
                                   info_file};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  std::map<std::string, std::string> info;
  for (int i = 0; i < 400 && info.count("fingerprint") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    info = read_info(info_file);
  }
  ASSERT_EQ(info.count("fingerprint"), 1u) << "pvesim did not start";
  pvs::pve::ClientOptions o;
  o.base_url = "https://127.0.0.1:" + info["port"];
  o.token_id = "ci@pve!bin";
  o.token_secret = "s3cr3t-uuid";
  o.fingerprint = info["fingerprint"];
  o.backoff_initial = std::chrono::milliseconds(5);
  auto client = pvs::pve::Client::create(o);
  ASSERT_TRUE(client);
  auto id = (*client)->next_id();  // the first answer is the injected 596, then a retry
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(*id, 100);
  EXPECT_EQ((*client)->requests_sent(), 2u);
  auto locked = (*client)->clone("pve", {8000, 100, "x", "", "sb", "", "", std::nullopt, ""});
  ASSERT_FALSE(locked);
  EXPECT_EQ(locked.error().message, "CT is locked (backup)");
  std::string unlock;
  ASSERT_EQ(
      pvesim::run_command(
          {"curl", "-s", "--cacert", info["cert"], "-H", "Content-Type: application/json", "--data",
           R"({"locks":{"8000":""}})", "https://127.0.0.1:" + info["port"] + "/_pvesim/faults"},
          &unlock),
      0);
  auto upid = (*client)->clone("pve", {8000, 100, "x", "", "sb", "", "", std::nullopt, ""});
  ASSERT_TRUE(upid) << upid.error().to_string();
  ASSERT_TRUE((*client)->wait_task(*upid));
  EXPECT_EQ((*client)->pool("sb")->members.size(), 1u);
  auto stats = (*client)->call("GET", "/../../_pvesim/stats");
  ASSERT_FALSE(stats);  // sent as is (no dot-segment squashing), so no escape from /api2/json
  EXPECT_EQ(stats.error().proxmox->kind, pvs::pve::ErrorKind::kNotImplemented);
  std::string out;
  ASSERT_EQ(pvesim::run_command({"curl", "-s", "--cacert", info["cert"],
                                 "https://127.0.0.1:" + info["port"] + "/_pvesim/stats"},
                                &out),
            0);
  EXPECT_NE(out.find("\"GET /cluster/nextid\":2"), std::string::npos) << out;
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(::access(info["cert"].c_str(), F_OK), 0);  // its temp files are gone
  ::unlink(info_file.c_str());
  ::unlink(secret_file.c_str());
  ::rmdir(dir);
}

TEST(PvesimBinary, NodeDefsMakeACluster) {
  char dir[] = "/tmp/pvesim-bin-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string info_file = std::string(dir) + "/info";
  std::vector<std::string> args = {PVESIM_BINARY,
                                   "--token",
                                   "ci@pve!bin=s",
                                   "--auth-delay-ms",
                                   "0",
                                   "--node-def",
                                   "name=pve1,templates=9001:9002",
                                   "--node-def",
                                   "name=pve2,maxmem=32G,base-mem=1G,maxcpu=8",
                                   "--shared-template",
                                   "9100@pve2",
                                   "--info-file",
                                   info_file};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  std::map<std::string, std::string> info;
  for (int i = 0; i < 400 && info.count("fingerprint") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    info = read_info(info_file);
  }
  ASSERT_EQ(info.count("fingerprint"), 1u) << "pvesim did not start";
  pvs::pve::ClientOptions o;
  o.base_url = "https://127.0.0.1:" + info["port"];
  o.token_id = "ci@pve!bin";
  o.token_secret = "s";
  o.fingerprint = info["fingerprint"];
  auto client = pvs::pve::Client::create(o);
  ASSERT_TRUE(client);
  auto nodes = (*client)->call("GET", "/cluster/resources", {{"type", "node"}});
  ASSERT_TRUE(nodes) << nodes.error().to_string();
  EXPECT_NE(
      nodes->find(R"("maxcpu":8,"maxdisk":107374182400,"maxmem":34359738368,"mem":1073741824)"),
      std::string::npos)
      << *nodes;
  auto pve1 = (*client)->call("GET", "/nodes/pve1/lxc", {});
  ASSERT_TRUE(pve1);
  EXPECT_NE(pve1->find("9002"), std::string::npos);
  auto upid =
      (*client)->call("POST", "/nodes/pve2/lxc/9100/clone", {{"newid", "300"}, {"target", "pve1"}});
  EXPECT_TRUE(upid) << upid.error().to_string();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::unlink(info_file.c_str());
  ::rmdir(dir);
}

TEST(PvesimBinary, RefusesBadFlags) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{PVESIM_BINARY},
        {PVESIM_BINARY, "--token", "a@b!c=d", "--bogus"},
        {PVESIM_BINARY, "--token", "a@b!c=d", "--backend", "netns"},
        {PVESIM_BINARY, "--token", "a@b!c=d", "--node-def", "name=x,colour=red"},
        {PVESIM_BINARY, "--token", "a@b!c=d", "--node-def", "templates=9001"}}) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << args.back();
  }
}

}  // namespace
