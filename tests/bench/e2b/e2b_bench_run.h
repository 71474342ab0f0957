// What every E2B benchmark does around its node script: installs the pinned `e2b` SDK
// (tests/e2b/client/package-lock.json; or another node package, `client`) into the build tree
// once, copies `script` beside it, starts the stack (the netns stand-in, or as `where` says) and
// the pve-sandbox-controller binary with `extra_yaml` after the stack's configuration, runs
// `where.prepare` if any (a template's build), then `node script args...` with the SDK pointed
// at the controller (E2B_API_URL, E2B_SANDBOX_URL, PVS_URL, PVS_CONTROLLER_PID, plus `env`),
// prints what it printed and stops the controller. Returns the script's exit code (1 if the
// set-up failed).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

namespace pvs::bench {

// A node package: its source dir (package.json, package-lock.json), where it is installed, and
// a module of it whose presence says it was.
struct NodeClient {
  std::string src = PVS_E2B_CLIENT_DIR;
  std::string dir = PVS_E2B_NODE_DIR;
  std::string marker = "e2b";
};

// Where the script runs: the stack (default: the netns stand-in; StackOptions::backend "lxc":
// real containers) and what is done on it and the running controller (on `port`) first: "" or
// what failed.
struct BenchStack {
  test::StackOptions options;
  std::function<std::string(test::Stack&, std::uint16_t port)> prepare;
};

inline int run_e2b_bench(const std::string& script, const std::vector<std::string>& args,
                         const std::string& extra_yaml, std::vector<std::string> env,
                         const NodeClient& client = {}, const BenchStack& where = {}) {
  std::string error = test::npm_install_once(client.src, client.dir, "package.json", client.marker);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const std::string name = std::filesystem::path(script).filename();
  std::filesystem::copy_file(script, client.dir + "/" + name,
                             std::filesystem::copy_options::overwrite_existing);
  test::Stack stack(where.options);
  std::uint16_t port = test::free_port();
  std::string config = stack.dir() + "/controller.yaml";
  std::ofstream(config) << test::stack_controller_yaml(stack, port, stack.dir()) << extra_yaml;
  std::string why;
  // PVS_CONTROLLER_BIN in the environment runs another build's controller (before/after runs).
  const char* bin = std::getenv("PVS_CONTROLLER_BIN");
  pid_t pid = test::start_controller(bin && *bin ? bin : PVS_CONTROLLER_BIN, config, stack.dir(),
                                     port, &why);
  if (pid <= 0) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  if (std::string failed = where.prepare ? where.prepare(stack, port) : ""; !failed.empty()) {
    std::fprintf(stderr, "%s\n", failed.c_str());
    test::stop_controller(pid);
    return 1;
  }
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> argv = {"node", client.dir + "/" + name};
  argv.insert(argv.end(), args.begin(), args.end());
  env.insert(env.end(), {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
                         "PVS_URL=" + base, "PVS_CONTROLLER_PID=" + std::to_string(pid)});
  auto r = test::run_captured(argv, stack.dir(), "", env);
  std::fputs(r.out.c_str(), stdout);
  std::fputs(r.err.c_str(), stderr);
  test::stop_controller(pid);
  return r.exit_code;
}

}  // namespace pvs::bench
