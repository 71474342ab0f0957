// port_bench [--rounds N] [--mib M] [--nodes N]: the port proxy (docs/design/ports.md) over
// both its transports against the same requests made straight to the service, in one run, on the
// netns stack (root).
//
// The service: python3's http.server on 0.0.0.0:8000 in a sandbox, serving a 13-byte file and an
// M MiB file (default 100); a second one on 127.0.0.1:8001 (loopback only). Through the proxy:
// GET /v1/sandboxes/{id}/ports/<port>/... on one keep-alive connection to an in-process
// controller, two of them on one Manager: `ssh` (ports.transport ssh: an SSH direct-tcpip channel
// on the sandbox's session) and `route` (ports.transport route: the node's agent opens a route,
// the controller connects to the sandbox's address; for 8001, which refuses that, it goes over SSH
// after the attempt: `route, loopback`). Direct: the same GET on a TCP connection made inside the
// sandbox's network namespace (as the node reaches a service: no SSH, no controller). All open a
// new connection to the service per request (http.server speaks HTTP/1.0), so the difference is
// what the proxy adds. --nodes 2: the cluster layout (the controller in its own namespace,
// reaching the node across a link and the node's forward chain, as from another host).
//
// Prints the small GET's p50/p99 each way and the latency each adds over direct (target: under
// 1 ms p50), and the large download's MiB/s each way and the ratio to direct (target: at least
// 0.8x).
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <Poco/JSON/Parser.h>

#include "bench_args.h"
#include "bench_stats.h"
#include "rest_conn.h"
#include "service/support/in_process_service.h"
#include "support/loopback.h"
#include "support/stack_fixture.h"

using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A TCP connection to 127.0.0.1:`port` in the network namespace open at `ns_fd` (this thread
// enters it for the connect and comes back).
pvs::UniqueFd connect_in(int ns_fd, int self_fd, std::uint16_t port) {
  if (setns(ns_fd, CLONE_NEWNET) != 0) return {};
  pvs::UniqueFd fd = pvs::test::loopback_connect(port);
  if (setns(self_fd, CLONE_NEWNET) != 0) {
    std::perror("setns back");
    std::exit(1);
  }
  return fd;
}

// Sends `request` on the connection `fd` and reads the reply to its end (the request says
// `Connection: close`), 256 KiB at a time, keeping nothing; the bytes read (head and body).
std::size_t read_reply(pvs::UniqueFd fd, const std::string& request) {
  if (!fd) {
    std::perror("connect");
    std::exit(1);
  }
  if (write(fd.get(), request.data(), request.size()) != static_cast<ssize_t>(request.size()))
    std::exit(1);
  std::vector<char> buf(256 << 10);
  std::size_t total = 0;
  for (ssize_t n; (n = read(fd.get(), buf.data(), buf.size())) > 0;)
    total += static_cast<std::size_t>(n);
  return total;
}

// GET `path` from the service directly, on a connection made in the sandbox's namespace.
std::size_t direct_get(int ns_fd, int self_fd, const std::string& path) {
  return read_reply(
      connect_in(ns_fd, self_fd, 8000),
      "GET " + path + " HTTP/1.1\r\nHost: localhost:8000\r\nConnection: close\r\n\r\n");
}

// GET `uri` from the controller listening on 127.0.0.1:`port`, read the same way.
std::size_t proxied_get(std::uint16_t port, const std::string& uri) {
  return read_reply(pvs::test::loopback_connect(port),
                    "GET " + uri + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                        pvs::bench::kBenchToken + "\r\nConnection: close\r\n\r\n");
}

std::string must_exec(pvs::bench::RestConn& c, const std::string& id, const std::string& cmd) {
  std::string out;
  Poco::JSON::Object body;
  body.set("command", cmd);
  std::ostringstream text;
  body.stringify(text);
  if (c.call("POST", "/v1/sandboxes/" + id + "/exec", text.str(), &out) != 200) {
    std::cerr << "exec failed: " << out << "\n";
    std::exit(1);
  }
  auto o = Poco::JSON::Parser().parse(out).extract<Poco::JSON::Object::Ptr>();
  return o->getValue<std::string>("stdout");
}

// http.server on `address`:`port` in the sandbox, serving `dir`, once it accepts connections.
void start_http_server(pvs::bench::RestConn& c, const std::string& id, const std::string& dir,
                       const std::string& address, int port) {
  const std::string p = std::to_string(port);
  std::string up = must_exec(
      c, id,
      "cd " + dir + " && (setsid python3 -m http.server " + p + " --bind " + address +
          " --directory " + dir + " > server-" + p + ".log 2>&1 </dev/null &) && for i in " +
          "$(seq 200); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", " +
          p + "), 1)' 2>/dev/null && echo up && exit 0; sleep 0.05; done; cat server-" + p +
          ".log");
  if (up != "up\n") {
    std::cerr << "the service on " << address << ":" << port << " did not start: " << up << "\n";
    std::exit(1);
  }
}

// One way to GET a path: its name and the call (true: the reply was whole).
struct Way {
  std::string name;
  std::function<bool(const std::string& path, std::size_t want)> get;
};

void small_gets(const std::vector<Way>& ways, int rounds) {
  std::vector<std::vector<double>> times(ways.size());
  for (int i = 0; i < 20; ++i)  // warm-up: sessions, page cache, python's imports
    for (const auto& w : ways) w.get("/small.txt", 13);
  for (int i = 0; i < rounds; ++i) {
    for (std::size_t k = 0; k < ways.size(); ++k) {
      auto t0 = Clock::now();
      if (!ways[k].get("/small.txt", 13)) {
        std::cerr << ways[k].name << ": small GET failed\n";
        std::exit(1);
      }
      times[k].push_back(ms(Clock::now() - t0));
    }
  }
  std::printf("small GET x%d                  p50      p99  (ms)   added p50   added p99\n",
              rounds);
  auto direct = pvs::bench::stats(times[0]);
  for (std::size_t k = 0; k < ways.size(); ++k) {
    auto s = pvs::bench::stats(times[k]);
    std::printf("  %-27s %7.3f  %7.3f", ways[k].name.c_str(), s.p50, s.p99);
    if (k > 0) std::printf("       %+7.3f     %+7.3f", s.p50 - direct.p50, s.p99 - direct.p99);
    std::printf("\n");
  }
  std::printf("  (target: under 1 ms added p50)\n");
}

// CPU time this process has used (all its threads: the clients and the controller), in ms.
double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto at = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return at(u.ru_utime) + at(u.ru_stime);
}

// Each way's MiB/s (median of 3) and the CPU this process spent per MiB: the reader's alone for
// direct, the reader's and the controller's through the proxy (the sandbox's side is not in it).
// CPU time depends little on what else the machine runs; wall time does.
void downloads(const std::vector<Way>& ways, int mib) {
  const auto bytes = static_cast<std::size_t>(mib) << 20;
  std::vector<std::vector<double>> rates(ways.size());
  std::vector<double> cpu(ways.size());
  for (int i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < ways.size(); ++k) {
      auto t0 = Clock::now();
      double c0 = cpu_ms();
      if (!ways[k].get("/big.bin", bytes)) {
        std::cerr << ways[k].name << ": download failed\n";
        std::exit(1);
      }
      cpu[k] += cpu_ms() - c0;
      rates[k].push_back(static_cast<double>(mib) / (ms(Clock::now() - t0) / 1000));
    }
  }
  std::printf("%d MiB download x3              MiB/s (median)   / direct   CPU ms/MiB here\n", mib);
  double direct = pvs::bench::stats(rates[0]).p50;
  for (std::size_t k = 0; k < ways.size(); ++k) {
    double r = pvs::bench::stats(rates[k]).p50;
    std::printf("  %-27s %8.1f          %6.2fx     %6.3f\n", ways[k].name.c_str(), r, r / direct,
                cpu[k] / (3.0 * mib));
  }
  std::printf("  (target: at least 0.8x)\n");
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "port_bench [--rounds N] [--mib M] [--nodes N]", 0,
                        {"--rounds", "--mib", "--nodes"});
  const int rounds = args.count("--rounds", 300);
  const int mib = args.count("--mib", 100, 1, 4096);
  pvs::test::StackOptions options;
  options.nodes = args.count("--nodes", 1, 1, 4);

  pvs::test::Stack stack(options);
  auto manager = pvs::Manager::open(stack.manager_config());
  if (!manager) {
    std::cerr << manager.error().message << "\n";
    return 1;
  }
  std::shared_ptr<pvs::Manager> shared(std::move(*manager));
  auto config = pvs::bench::rest_config(stack.dir(), 10, true);
  auto ssh = pvs::test::InProcessService::start(config, shared);
  config.ports_route = true;
  config.audit_file = stack.dir() + "/audit-route.log";
  auto route = pvs::test::InProcessService::start(config, shared);
  if (!ssh || !route) {
    std::cerr << (ssh ? route.error().message : ssh.error().message) << "\n";
    return 1;
  }
  pvs::bench::RestConn conn((*ssh)->port()), conn_route((*route)->port());
  std::string created;
  if (conn.call("POST", "/v1/sandboxes", "{}", &created) != 201) {
    std::cerr << created << "\n";
    return 1;
  }
  auto sb = Poco::JSON::Parser().parse(created).extract<Poco::JSON::Object::Ptr>();
  const std::string id = sb->getValue<std::string>("id");
  const int vmid = sb->getValue<int>("vmid");
  std::string dir = must_exec(conn, id, "mktemp -d \"$HOME/pvs-portbench-XXXXXX\"");
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  must_exec(conn, id,
            "cd " + dir + " && printf 'hello, bench\\n' > small.txt && head -c " +
                std::to_string(mib) + "M /dev/urandom > big.bin");
  start_http_server(conn, id, dir, "0.0.0.0", 8000);
  start_http_server(conn, id, dir, "127.0.0.1", 8001);
  const std::string ns = "/run/netns/" + stack.id() + "-" + std::to_string(vmid);
  int ns_fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  int self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0 || self_fd < 0) {
    std::perror(ns.c_str());
    return 1;
  }
  std::string body;
  // Downloads: the proxied client reads as the direct one does (raw, nothing kept), so that
  // the ratio is the proxy's.
  auto raw = [&](std::uint16_t controller, int port) {
    return [controller, port, id](const std::string& path, std::size_t want) {
      return proxied_get(controller,
                         "/v1/sandboxes/" + id + "/ports/" + std::to_string(port) + path) >= want;
    };
  };
  auto via = [&](pvs::bench::RestConn& c, int port) {
    return [&c, &body, port, id](const std::string& path, std::size_t want) {
      bool ok = c.call("GET", "/v1/sandboxes/" + id + "/ports/" + std::to_string(port) + path, "",
                       &body) == 200 &&
                body.size() == want;
      body.clear();
      return ok;
    };
  };
  std::vector<Way> ways = {{"direct (sandbox netns)",
                            [&](const std::string& path, std::size_t want) {
                              return direct_get(ns_fd, self_fd, path) >= want;
                            }},
                           {"ssh", via(conn, 8000)},
                           {"route", via(conn_route, 8000)}};
  std::printf("%d node(s)%s\n", options.nodes,
              options.nodes > 1 ? ": the controller on another host (cluster layout)" : "");
  small_gets({ways[0], ways[1], ways[2], {"route, loopback (SSH after)", via(conn_route, 8001)}},
             rounds);
  downloads({ways[0], {"ssh", raw((*ssh)->port(), 8000)}, {"route", raw((*route)->port(), 8000)}},
            mib);
  must_exec(conn, id, "pkill -f 'http.server 800[01] --bind'; rm -rf " + dir);
  conn.call("DELETE", "/v1/sandboxes/" + id, "", nullptr);
  close(ns_fd);
  close(self_fd);
  route->reset();
  ssh->reset();
  return 0;
}
