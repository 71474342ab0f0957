// bench_service exec   REST exec ("true") vs a direct SshSession exec to the same sandbox
// bench_service list   GET /v1/sandboxes req/s (vs GET /v1/health) with 100 live sandboxes,
//                      and the controller's RSS idle and with 100 sandboxes
// bench_service upload [MiB]  PUT .../files of MiB (default 256) through the controller binary
//                      vs a direct SshSession upload to the same sandbox, and the controller's
//                      peak RSS during the upload (the body is streamed, not held)
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include "app/api.h"
#include "bench_args.h"
#include "bench_stats.h"
#include "http/auth.h"
#include "rest_conn.h"
#include "service/support/in_process_service.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

using pvs::bench::Stats;
using pvs::bench::stats;

using Conn = pvs::bench::RestConn;

// A field of /proc/<pid>/status in kB ("VmRSS:", "VmHWM:"), or -1.
long status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
  }
  return -1;
}
// Whether the controller on `port` answers GET /v1/health with 200 within 20 s.
bool wait_healthy(std::uint16_t port) {
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      std::string b;
      if (Conn(port).call("GET", "/v1/health", "", &b) == 200) return true;
    } catch (...) {
    }
  }
  return false;
}

long rss_kb(pid_t pid) {
  return status_kb(pid, "VmRSS:");
}

int bench_exec(int n) {
  pvs::test::Stack stack;  // netns backend: real sshd per sandbox
  auto config = pvs::bench::rest_config(stack.dir(), 10, true);
  auto mc = stack.manager_config();
  auto service = pvs::test::InProcessService::start(config, mc);
  if (!service) {
    std::cerr << service.error().message << "\n";
    return 1;
  }
  const std::uint16_t port = (*service)->port();
  Conn conn(port);
  std::string body;
  if (conn.call("POST", "/v1/sandboxes", "{}", &body) != 201) {
    std::cerr << body << "\n";
    return 1;
  }
  auto sb = Poco::JSON::Parser().parse(body).extract<Poco::JSON::Object::Ptr>();
  std::string id = sb->getValue<std::string>("id");
  pvs::SshConfig ssh = mc.ssh;
  ssh.host = sb->getValue<std::string>("address");
  ssh.host_key_fingerprint = sb->getValue<std::string>("host_key");  // the sandbox's own
  pvs::SshSession direct(ssh);
  if (auto c = direct.connect(); !c) {
    std::cerr << "direct: " << c.error().message << "\n";
    return 1;
  }

  // The same options the API uses by default (timeout = max_exec_timeout_seconds installs the
  // remote timeout guard), so the difference is the REST layer alone.
  pvs::ExecOptions same;
  same.timeout = std::chrono::seconds(config.max_exec_timeout_seconds);
  same.max_output = config.max_exec_output_bytes;
  std::vector<double> rest, raw, bare;
  for (int i = 0; i < 10; ++i) {  // warm-up
    conn.call("POST", "/v1/sandboxes/" + id + "/exec", R"({"command":"true"})", nullptr);
    (void)direct.exec("true");
  }
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    (void)direct.exec("true");
    bare.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    (void)direct.exec("true", same);
    raw.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    if (conn.call("POST", "/v1/sandboxes/" + id + "/exec", R"({"command":"true"})", nullptr) !=
        200) {
      return 1;
    }
    rest.push_back(ms(Clock::now() - t0));
  }
  auto r = stats(rest), d = stats(raw), b = stats(bare);
  std::printf("exec 'true' x%d          mean     p50     p99  (ms)\n", n);
  std::printf("  direct, no timeout  %7.2f %7.2f %7.2f\n", b.mean, b.p50, b.p99);
  std::printf("  direct, API options %7.2f %7.2f %7.2f\n", d.mean, d.p50, d.p99);
  std::printf("  REST /exec          %7.2f %7.2f %7.2f\n", r.mean, r.p50, r.p99);
  std::printf("  REST / direct       %7.2fx  overhead %+.2f ms (p50)\n", r.p50 / d.p50,
              r.p50 - d.p50);
  conn.call("DELETE", "/v1/sandboxes/" + id, "", nullptr);
  service->reset();
  return 0;
}

double throughput(std::uint16_t port, const std::string& uri, int threads, double seconds) {
  std::atomic<long> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      Conn c(port);
      while (!stop) {
        if (c.call("GET", uri, "", nullptr) != 200) break;
        ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : ts) t.join();
  return done / seconds;
}

int bench_list(int sandboxes) {
  pvs::test::StackOptions o;
  o.backend = "model";
  pvs::test::Stack stack(o);
  auto mc = stack.manager_config();
  std::uint16_t port = pvs::test::free_port();
  std::string config = stack.dir() + "/controller.yaml";
  std::ofstream(config)
      << "listen:\n  port: " << port << "\nhttp:\n  threads: 16\n"
      << "auth:\n  tokens:\n    - {name: bench, max_sandboxes: 1000, sha256: "
      << pvs::service::sha256_hex("tok-bench") << "}\n"
      << "audit:\n  file: " << stack.dir() << "/audit.log\n"
      << "log_level: warn\n"
      << "proxmox:\n  url: https://127.0.0.1:" << stack.port()
      << "\n  node: pve\n  token_id: " << pvs::test::Stack::kTokenId
      << "\n  token_secret_env: PVS_BENCH_SECRET\n  fingerprint: \"" << stack.fingerprint()
      << "\"\n  template_vmid: 9000\n"
      << "  vmid_min: 10000\n  vmid_max: 10999\n"
      << "ssh:\n  user: " << mc.ssh.user << "\n  private_key_file: " << mc.ssh.private_key_file
      << "\n  host_key_policy: insecure\n  wait_for_ready: false\n  per_sandbox_host_keys: false\n"
      << "agent:\n  socket: " << mc.agent.socket_path << "\n"
      << "limits:\n  max_sandboxes: 1000\n";
  pid_t pid = fork();
  if (pid == 0) {
    setenv("PVS_BENCH_SECRET", pvs::test::Stack::kTokenSecret, 1);
    execl(PVS_CONTROLLER_BIN, PVS_CONTROLLER_BIN, ("--config=" + config).c_str(), nullptr);
    _exit(127);
  }
  bool up = wait_healthy(port);
  if (!up) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  long idle = rss_kb(pid);
  double health0 = throughput(port, "/v1/health", 4, 2);
  double list0 = throughput(port, "/v1/sandboxes", 4, 2);
  Conn conn(port);
  auto t0 = Clock::now();
  for (int i = 0; i < sandboxes; ++i) {
    std::string b;
    if (conn.call("POST", "/v1/sandboxes", "{\"labels\":{\"bench\":\"1\"}}", &b) != 201) {
      std::cerr << b << "\n";
      break;
    }
  }
  double create_s = ms(Clock::now() - t0) / 1000;
  long loaded = rss_kb(pid);
  double health = throughput(port, "/v1/health", 4, 3);
  double list = throughput(port, "/v1/sandboxes", 4, 3);
  long after = rss_kb(pid);
  std::printf("controller (model backend, %d sandboxes created in %.1f s)\n", sandboxes, create_s);
  std::printf("  RSS idle            %6ld KiB\n", idle);
  std::printf("  RSS %3d sandboxes   %6ld KiB (after load %ld KiB)\n", sandboxes, loaded, after);
  std::printf("  GET /v1/health      %8.0f req/s (0 sandboxes: %.0f)\n", health, health0);
  std::printf("  GET /v1/sandboxes   %8.0f req/s (0 sandboxes: %.0f)  list/health %.2fx\n", list,
              list0, list / health);
  std::string b;
  conn.call("GET", "/v1/sandboxes", "", &b);
  auto arr =
      Poco::JSON::Parser().parse(b).extract<Poco::JSON::Object::Ptr>()->getArray("sandboxes");
  std::printf("  list reply          %zu bytes for %zu sandboxes\n", b.size(), arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    conn.call(
        "DELETE",
        "/v1/sandboxes/" + arr->getObject(static_cast<unsigned>(i))->getValue<std::string>("id"),
        "", nullptr);
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  return 0;
}

long peak_rss_kb(pid_t pid) {
  return status_kb(pid, "VmHWM:");
}

void reset_peak_rss(pid_t pid) {
  std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
}

// The controller's configuration for the upload bench: the stack's Proxmox, SSH and agent, and
// bodies up to `mib` MiB each way. Returns its path.
std::string write_upload_config(pvs::test::Stack& stack, const pvs::ManagerConfig& mc,
                                std::uint16_t port, int mib) {
  std::string config = stack.dir() + "/controller.yaml";
  std::ofstream(config) << "listen:\n  port: " << port << "\nhttp:\n  threads: 8\n"
                        << "  max_upload_bytes: " << (std::uint64_t(mib) << 20) << "\n"
                        << "  max_download_bytes: " << (std::uint64_t(mib) << 20) << "\n"
                        << "  request_timeout_seconds: 300\n"
                        << "auth:\n  tokens:\n    - {name: bench, max_sandboxes: 10, sha256: "
                        << pvs::service::sha256_hex("tok-bench") << "}\n"
                        << "audit:\n  file: " << stack.dir() << "/audit.log\n"
                        << "log_level: warn\n"
                        << "proxmox:\n  url: https://127.0.0.1:" << stack.port()
                        << "\n  node: pve\n  token_id: " << pvs::test::Stack::kTokenId
                        << "\n  token_secret_env: PVS_BENCH_SECRET\n  fingerprint: \""
                        << stack.fingerprint() << "\"\n  template_vmid: 9000\n"
                        << "  vmid_min: 10000\n  vmid_max: 10999\n"
                        << "ssh:\n  user: " << mc.ssh.user
                        << "\n  private_key_file: " << mc.ssh.private_key_file
                        << "\n  host_key_policy: pinned\n  host_key_fingerprint: \""
                        << mc.ssh.host_key_fingerprint << "\"\n"
                        << "agent:\n  socket: " << mc.agent.socket_path << "\n";
  return config;
}

int bench_upload(int mib) {
  pvs::test::Stack stack;  // netns backend: real sshd per sandbox
  auto mc = stack.manager_config();
  std::uint16_t port = pvs::test::free_port();
  std::string config = write_upload_config(stack, mc, port, mib);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("PVS_BENCH_SECRET", pvs::test::Stack::kTokenSecret, 1);
    execl(PVS_CONTROLLER_BIN, PVS_CONTROLLER_BIN, ("--config=" + config).c_str(), nullptr);
    _exit(127);
  }
  auto stop = [pid] {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  };
  bool up = wait_healthy(port);
  Conn conn(port);
  std::string body;
  if (!up || conn.call("POST", "/v1/sandboxes", "{}", &body) != 201) {
    std::cerr << "controller not ready: " << body << "\n";
    stop();
    return 1;
  }
  auto sb = Poco::JSON::Parser().parse(body).extract<Poco::JSON::Object::Ptr>();
  std::string id = sb->getValue<std::string>("id");
  pvs::SshConfig ssh = mc.ssh;
  ssh.host = sb->getValue<std::string>("address");
  ssh.host_key_policy = pvs::HostKeyPolicy::kPinned;
  ssh.host_key_fingerprint = sb->getValue<std::string>("host_key");  // the sandbox's own
  pvs::SshSession direct(ssh);
  if (auto c = direct.connect(); !c) {
    std::cerr << "direct: " << c.error().message << "\n";
    stop();
    return 1;
  }
  std::string data(std::size_t(mib) << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  std::string files = "/v1/sandboxes/" + id + "/files?path=" + stack.home() + "/";
  long idle = rss_kb(pid);
  double rest_s = 0, direct_s = 0, get_s = 0, direct_get_s = 0;
  long rest_peak = 0, get_peak = 0;
  const int rounds = 3;
  for (int r = 0; r < rounds; ++r) {
    reset_peak_rss(pid);
    auto t0 = Clock::now();
    std::string reply;
    if (conn.call("PUT", files + "rest.bin", data, &reply, "application/octet-stream") != 200) {
      std::cerr << "PUT failed: " << reply << "\n";
      stop();
      return 1;
    }
    rest_s += ms(Clock::now() - t0) / 1000;
    rest_peak = std::max(rest_peak, peak_rss_kb(pid));
    t0 = Clock::now();
    if (!direct.upload(stack.home() + "/direct.bin", std::string_view(data))) {
      stop();
      return 1;
    }
    direct_s += ms(Clock::now() - t0) / 1000;
    reset_peak_rss(pid);
    t0 = Clock::now();
    std::string back;
    if (conn.call("GET", files + "rest.bin", "", &back) != 200 || back != data) {
      std::cerr << "GET failed\n";
      stop();
      return 1;
    }
    get_s += ms(Clock::now() - t0) / 1000;
    get_peak = std::max(get_peak, peak_rss_kb(pid));
    t0 = Clock::now();
    // Streamed, as the REST GET is (a file of a chunk or more goes through the bulk client).
    std::ostringstream direct_out;
    auto direct_back = direct.download(stack.home() + "/rest.bin", direct_out);
    if (!direct_back || direct_out.str() != data) {
      stop();
      return 1;
    }
    direct_get_s += ms(Clock::now() - t0) / 1000;
  }
  double n = mib * rounds;
  std::printf("upload %d MiB x%d (controller binary, netns sandbox, loopback)\n", mib, rounds);
  std::printf("  direct SshSession upload   %7.1f MiB/s\n", n / direct_s);
  std::printf("  REST PUT .../files         %7.1f MiB/s  (%.2fx of direct)\n", n / rest_s,
              direct_s / rest_s);
  std::printf("  direct SshSession download %7.1f MiB/s\n", n / direct_get_s);
  std::printf("  REST GET .../files         %7.1f MiB/s  (%.2fx of direct)\n", n / get_s,
              direct_get_s / get_s);
  std::printf(
      "  controller RSS idle %ld KiB; peak during PUT %ld KiB (+%ld), during GET %ld KiB "
      "(+%ld)\n",
      idle, rest_peak, rest_peak - idle, get_peak, get_peak - idle);
  conn.call("DELETE", "/v1/sandboxes/" + id, "", nullptr);
  stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "bench_service exec [N=200] | list [SANDBOXES=100] | upload [MiB=256]", 2);
  std::string mode = args.word(1);
  if (mode == "exec") return bench_exec(args.count(2, 200));
  if (mode == "list") return bench_list(args.count(2, 100));
  if (mode == "upload") return bench_upload(args.count(2, 256));
  args.fail(mode.empty() ? "which benchmark?" : "unknown benchmark \"" + mode + "\"");
}
