// StackOptions::egress (stack_fixture.h): the node's egress resolver and a small internet with
// an authoritative DNS server and HTTP servers, as tests/egress/egress-e2e.sh builds them on
// its rig and pve-sandbox-setup configures a node (resolver.yaml, agent.yaml resolver_uids).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/sshd_fixture.h"
#include "support/stack_detail.h"
#include "support/stack_fixture.h"

#ifndef PVS_STACK_RESOLVER_BIN
#error "PVS_STACK_RESOLVER_BIN must name the pve-sandbox-resolver binary"
#endif
#ifndef PVS_STACK_EGRESS_TOOL
#error "PVS_STACK_EGRESS_TOOL must name tests/egress/egress_tool.py"
#endif

namespace pvs::test {

using stack_detail::end_process;
using stack_detail::must;
using stack_detail::run;
using stack_detail::slurp;

namespace {

// One server for every address of the internet namespace: the body names the address asked;
// for the host deb.test it serves the files of its directory (a package mirror) or 404.
constexpr const char* kHttpServer = R"(
import http.server, os, sys
www = os.path.realpath(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)
    def do_GET(self):
        if (self.headers.get("Host") or "").split(":")[0] == "deb.test":
            path = os.path.realpath(os.path.join(www, self.path.split("?")[0].lstrip("/")))
            if path.startswith(www + "/") and os.path.isfile(path):
                with open(path, "rb") as f:
                    return self.reply(200, f.read())
            return self.reply(404, b"not found\n")
        self.reply(200, ("hello from " + self.connection.getsockname()[0] + "\n").encode())
    do_HEAD = do_GET
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 80), H).serve_forever()
)";
// Waits until `probe` exits 0 (up to 5 s) while `pid` lives; throws with `log` otherwise.
void wait_ready(pid_t* pid, const std::vector<std::string>& probe, const std::string& what,
                const std::string& log) {
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (::waitpid(*pid, &status, WNOHANG) == *pid) {
      *pid = -1;
      must(false, what + " exited: " + slurp(log));
    }
    std::string out;
    if (run_command(probe, &out) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  must(false, what + " did not become ready: " + slurp(log));
}

}  // namespace

void Stack::setup_egress() {
  const std::string inet = internet_namespace();
  run({"ip", "netns", "add", inet});
  run({"ip", "link", "add", "uplink0", "type", "veth", "peer", "name", "eth0", "netns", inet});
  run({"ip", "addr", "add", "203.0.113.2/24", "dev", "uplink0"});
  run({"ip", "link", "set", "uplink0", "up"});
  run({"ip", "route", "add", "default", "via", "203.0.113.1"});
  run({"ip", "-n", inet, "link", "set", "lo", "up"});
  run({"ip", "-n", inet, "addr", "add", "203.0.113.1/24", "dev", "eth0"});
  run({"ip", "-n", inet, "link", "set", "eth0", "up"});
  run({"ip", "-n", inet, "addr", "add", std::string(kInternetDns) + "/32", "dev", "lo"});
  for (const auto& [name, address] : kEgressZone)
    run({"ip", "-n", inet, "addr", "add", address + "/32", "dev", "lo"});

  // The authoritative server for the zone "test".
  std::vector<std::string> dns = {"ip",
                                  "netns",
                                  "exec",
                                  inet,
                                  "dnsmasq",
                                  "--keep-in-foreground",
                                  "--conf-file=/dev/null",
                                  "--pid-file=",
                                  "--no-resolv",
                                  "--no-hosts",
                                  "--user=root",
                                  std::string("--listen-address=") + kInternetDns,
                                  "--bind-interfaces",
                                  "--local=/test/",
                                  "--log-facility=" + dir_ + "/internet-dns.log"};
  for (const auto& [name, address] : kEgressZone)
    dns.push_back("--host-record=" + name + "," + address + ",300");
  internet_dns_pid_ = spawn_process(dns);
  must(internet_dns_pid_ > 0, "start the internet's dnsmasq (is dnsmasq-base installed?)");
  std::ofstream(dir_ + "/internet-http.py") << kHttpServer;
  run({"mkdir", "-p", www_dir()});
  SpawnOptions http;
  http.stdout_file = dir_ + "/internet-http.log";
  internet_http_pid_ = spawn_process(
      {"ip", "netns", "exec", inet, "python3", dir_ + "/internet-http.py", www_dir()}, http);
  must(internet_http_pid_ > 0, "start the internet's HTTP server");

  // The probe, where the sandboxes' user reads it.
  run({"install", "-m", "0644", PVS_STACK_EGRESS_TOOL, egress_tool()});
  wait_ready(&internet_dns_pid_,
             {"python3", egress_tool(), "dns", kInternetDns, kEgressZone.begin()->first},
             "the internet's dnsmasq", dir_ + "/internet-dns.log");
  wait_ready(&internet_http_pid_,
             {"curl", "-sf", "-m", "1", "http://" + kEgressZone.begin()->second + "/"},
             "the internet's HTTP server", dir_ + "/internet-http.log");

  // The resolver, as pve-sandbox-setup resolver writes its configuration.
  std::ofstream(dir_ + "/resolver.yaml")
      << "listen: 10.99.0.1\nport: 5353\nsandbox_cidr: 10.99.0.0/16\n"
      << "upstreams: [\"" << kInternetDns << "\"]\n"
      << "agent_socket: " << agent_socket() << "\nupstream_timeout_ms: 1000\nlog_level: debug\n";
  start_resolver();
}

void Stack::start_resolver() {
  SpawnOptions so;
  so.stdout_file = dir_ + "/resolver.log";
  so.append = true;
  resolver_pid_ = spawn_process({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 PVS_STACK_RESOLVER_BIN, "--config", dir_ + "/resolver.yaml"},
                                so);
  must(resolver_pid_ > 0, "start pve-sandbox-resolver");
  wait_ready(&resolver_pid_,
             {"bash", "-c",
              "ss -Hlun 'sport = :5353' | grep -q 10.99.0.1 && "
              "ss -Hltn 'sport = :5353' | grep -q 10.99.0.1"},
             "pve-sandbox-resolver", dir_ + "/resolver.log");
}

void Stack::flush_resolver_log() {
  must(resolver_pid_ > 0 && ::kill(resolver_pid_, SIGUSR1) == 0, "signal the resolver");
}

void Stack::stop_resolver() {
  end_process(&resolver_pid_, SIGTERM);
}

std::string Stack::resolver_log() const {
  return slurp(dir_ + "/resolver.log");
}

void Stack::stop_egress() {
  stop_resolver();
  end_process(&internet_http_pid_, SIGTERM);
  end_process(&internet_dns_pid_, SIGTERM);
  if (options_.egress) run_command({"ip", "netns", "del", internet_namespace()});
}

}  // namespace pvs::test
