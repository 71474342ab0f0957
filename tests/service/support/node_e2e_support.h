// What the end-to-end tests that drive the controller binary with a Node.js client share (the
// MCP SDK client, the console's puppeteer driver): installing the client's pinned packages once
// per lock file, and starting and stopping the controller.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "service/support/http_client.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

namespace pvs::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// npm ci of `src`'s package.json/package-lock.json into `dir` (in the build tree), with
// `script` and the other .mjs modules of `src` copied beside it (ES modules resolve packages
// from the script's directory). Done
// once per lock file: a copy of the lock marks a complete install of `marker` (a package
// directory); a file lock keeps concurrent tests apart. What went wrong, or "".
inline std::string npm_install_once(const std::string& src, const std::string& dir,
                                    const std::string& script, const std::string& marker,
                                    const std::vector<std::string>& env = {}) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  int lock_fd = ::open((dir + "/.install-lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return "cannot lock " + dir + "/.install-lock";
  }
  std::string error;
  // Another test may be running these scripts while this one installs them: each is replaced
  // whole (a copy beside it, renamed over it) and only when it changed, so that no node
  // process ever imports a half-written module (run63: a SyntaxError for an export of
  // checks.mjs that the copy had not written yet).
  auto install = [&](const fs::path& from) {
    std::string to = dir + "/" + from.filename().string();
    if (fs::exists(to) && slurp(to) == slurp(from.string())) return;
    std::string part = to + ".part" + std::to_string(::getpid());
    fs::copy_file(from, part, fs::copy_options::overwrite_existing);
    fs::rename(part, to);
  };
  install(src + "/" + script);
  for (const auto& e : fs::directory_iterator(src))  // the modules it imports (./checks.mjs)
    if (e.path().extension() == ".mjs" && e.path().filename() != script) install(e.path());
  const std::string lock = src + "/package-lock.json";
  if (slurp(dir + "/installed.lock") != slurp(lock) ||
      !fs::exists(dir + "/node_modules/" + marker + "/package.json")) {
    fs::copy_file(src + "/package.json", dir + "/package.json",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(lock, dir + "/package-lock.json", fs::copy_options::overwrite_existing);
    auto npm =
        run_captured({"npm", "ci", "--no-audit", "--no-fund", "--prefix", dir}, dir, "", env);
    if (npm.exit_code != 0) {
      error = "npm ci failed (scripts/install-deps installs nodejs and npm):\n" + npm.out + npm.err;
    } else {
      fs::copy_file(lock, dir + "/installed.lock", fs::copy_options::overwrite_existing);
    }
  }
  ::close(lock_fd);  // releases the lock
  return error;
}

// The part of a controller.yaml that points the controller at `stack`: listen on `port`, the
// audit log in `dir`, Proxmox (secret in PVS_E2E_PVE_SECRET, see start_controller), SSH with the
// pinned host key, the agent socket; a cluster's `nodes:` (each node's agent, network and
// template). A test adds `auth:` and what else it needs.
inline std::string stack_controller_yaml(Stack& stack, std::uint16_t port, const std::string& dir) {
  auto mc = stack.manager_config();
  std::ostringstream y;
  y << "listen:\n  address: 127.0.0.1\n  port: " << port << "\n"
    << "audit:\n  file: " << dir << "/audit.log\n"
    << "proxmox:\n  url: https://127.0.0.1:" << stack.port() << "\n"
    << (mc.nodes.empty() ? "  node: pve\n" : "") << "  token_id: " << Stack::kTokenId << "\n"
    << "  token_secret_env: PVS_E2E_PVE_SECRET\n"
    << "  fingerprint: \"" << stack.fingerprint() << "\"\n"
    << "  template_vmid: 9000\n  vmid_min: 10000\n  vmid_max: 10999\n"
    << "ssh:\n  user: " << mc.ssh.user << "\n"
    << "  private_key_file: " << mc.ssh.private_key_file << "\n"
    << "  host_key_policy: pinned\n  host_key_fingerprint: \"" << mc.ssh.host_key_fingerprint
    << "\"\n"
    << (mc.nodes.empty() ? "agent:\n  socket: " + mc.agent.socket_path + "\n" : "nodes:\n");
  for (const auto& n : mc.nodes) {
    y << "  - name: " << n.name << "\n    agent: {socket: " << n.agent.socket_path
      << "}\n    network: {cidr: " << n.sandbox_cidr.to_string()
      << ", gateway: " << n.gateway.to_string() << "}\n    template_vmid: " << n.template_vmid
      << "\n";
  }
  return y.str();
}

// SIGTERM, and wait for it.
inline void stop_controller(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
}

// Starts the controller binary on `config` (its output in dir/controller.log, the stack's
// Proxmox secret in PVS_E2E_PVE_SECRET) and waits up to 20 s for /v1/health on `port`. The pid,
// or -1 with the log in *why.
inline pid_t start_controller(const std::string& bin, const std::string& config,
                              const std::string& dir, std::uint16_t port, std::string* why) {
  SpawnOptions so;
  so.stdout_file = dir + "/controller.log";
  so.env = {std::string("PVS_E2E_PVE_SECRET=") + Stack::kTokenSecret};
  pid_t pid = spawn_process({bin, "--config=" + config}, so);
  for (int i = 0; pid > 0 && i < 200; ++i) {
    try {
      if (http(port, "GET", "/v1/health").status == 200) return pid;
    } catch (...) {
    }
    usleep(100000);
  }
  *why = "controller did not become healthy:\n" + slurp(dir + "/controller.log");
  if (pid > 0) stop_controller(pid);
  return -1;
}

}  // namespace pvs::test
