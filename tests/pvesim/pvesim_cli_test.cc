// pvesim's command line (cli.h): every option its usage text lists is one it takes, and bad
// input is an error that names the option.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "cli.h"

namespace {

// A value each option that takes one accepts.
std::map<std::string, std::string> samples(const std::string& token_file) {
  return {{"--listen", "127.0.0.1"},
          {"--port", "0"},
          {"--node", "pve"},
          {"--node-def", "name=pve2,templates=9001,maxmem=64G"},
          {"--shared-template", "9000@pve"},
          {"--schema", "pve-schema.json"},
          {"--token", "a@b!c=d"},
          {"--token-file", "e@f!g=" + token_file},
          {"--auth-delay-ms", "0"},
          {"--task-ms", "vzclone=10"},
          {"--default-task-ms", "5"},
          {"--timing", "fast"},
          {"--latency-ms", "0"},
          {"--fault", "POST /nodes/{node}/lxc/{vmid}/clone=595:1:2"},
          {"--fail-task", "vzstart=boom"},
          {"--lock", "9000=backup"},
          {"--interfaces-delay-ms", "1"},
          {"--rrd-delay-ms", "1"},
          {"--rrd-step-seconds", "60"},
          {"--template", "9000"},
          {"--template-disk", "8G"},
          {"--pool", "agents"},
          {"--dhcp-cidr", "10.99.0.0/16"},
          {"--backend", "model"},
          {"--bridge", "pvesimbr0"},
          {"--bridge-cidr", "10.99.0.1/16"},
          {"--gateway", "10.99.0.254"},
          {"--ns-prefix", "pvesim-"},
          {"--node-netns", "node1"},
          {"--authorized-keys", "keys"},
          {"--sshd", "/usr/sbin/sshd"},
          {"--ssh-user", "root"},
          {"--ssh-port", "2222"},
          {"--dhcp-client", "dhcp-client.sh"},
          {"--lxc-rootfs", "rootfs"},
          {"--lxc-dir", "/tmp"},
          {"--info-file", "info"},
          {"--log-level", "warn"}};
}

TEST(PvesimCli, TakesEveryOptionItsUsageLists) {
  char path[] = "/tmp/pvesim-cli-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "secret\n";
  auto values = samples(path);
  std::regex row(R"(^\s+(-h, )?(--[a-z-]+|-h)\b)");
  std::istringstream usage(pvesim::usage());
  int options = 0;
  for (std::string line; std::getline(usage, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    std::string flag = m[2];
    std::vector<std::string> args{"--token", "a@b!c=d", flag};
    if (values.count(flag)) args.push_back(values[flag]);
    auto cli = pvesim::parse_command_line(args);
    EXPECT_TRUE(cli) << line << ": " << (cli ? "" : cli.error().message);
    ++options;
  }
  EXPECT_GE(options, 40);  // the table has 45 rows
  std::remove(path);
}

TEST(PvesimCli, OptionsLandWhereTheUsageSays) {
  auto cli = pvesim::parse_command_line({"--token", "a@b!c=d", "--gateway", "10.99.0.254",
                                         "--nextid-number", "--bridge", "br9", "--node-def",
                                         "name=pve2,bridge=br7", "--template", "9001", "--template",
                                         "9002", "--timing", "fast", "--task-ms", "vzclone=7"});
  ASSERT_TRUE(cli) << cli.error().message;
  EXPECT_EQ(cli->options.netns.gateway, "10.99.0.254");
  EXPECT_TRUE(cli->options.nextid_as_number);
  EXPECT_EQ(cli->options.templates, (std::vector<int>{9001, 9002}));
  EXPECT_EQ(cli->options.task_ms.at("vzclone"), 7);  // a later --task-ms overrides the profile
  ASSERT_EQ(cli->options.nodes.size(), 1u);
  EXPECT_EQ(cli->options.nodes[0].netns.bridge, "br7");           // its own key
  EXPECT_EQ(cli->options.nodes[0].netns.gateway, "10.99.0.254");  // the others from the flags
  EXPECT_EQ(cli->options.tokens.at("a@b!c"), "d");
}

TEST(PvesimCli, BadInputNamesTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {{"--token", "a@b!c=d", "--bogus"}, "unknown option --bogus"},
           {{"--token", "a@b!c=d", "--port"}, "--port needs a value"},
           {{"--token", "a@b!c=d", "--port", "eighty"}, "bad value for --port: eighty"},
           {{"--token", "nosecret"}, "bad value for --token: nosecret"},
           {{"--token", "a@b!c=d", "--timing", "slow"}, "bad value for --timing: slow"},
           {{"--token", "a@b!c=d", "--token-file", "x@y!z=/nonexistent"},
            "bad value for --token-file"},
           {{"--token", "a@b!c=d", "--node-def", "name=x,colour=red"}, "bad --node-def"},
           {{"--token", "a@b!c=d", "--node-def", "templates=9001"}, "bad --node-def"},
           {{"--port", "0"}, "give at least one --token"},
       }) {
    auto cli = pvesim::parse_command_line(c.args);
    ASSERT_FALSE(cli) << c.args.back();
    EXPECT_EQ(cli.error().code, pvs::ErrorCode::kInvalidArgument);
    EXPECT_NE(cli.error().message.find(c.message), std::string::npos) << cli.error().message;
  }
  EXPECT_TRUE(pvesim::parse_command_line({"--help"}));  // no token needed to ask
  EXPECT_TRUE(pvesim::parse_command_line({"--lxc-sweep", "--lxc-dir", "/tmp"}));
}

}  // namespace
