// port_bench [--rounds N] [--mib M]: the port proxy (docs/design/ports.md) against the same
// requests made straight to the service, in one run, on the netns stack (root).
//
// The service: python3's http.server on 127.0.0.1:8000 in a sandbox, serving a 13-byte file and
// an M MiB file (default 100). Through the proxy: GET /v1/sandboxes/{id}/ports/8000/... on one
// keep-alive connection to an in-process controller (the bearer route; the controller reaches
// the port through an SSH direct-tcpip channel on the sandbox's session). Direct: the same GET
// on a TCP connection made inside the sandbox's network namespace (as the node reaches a
// service: no SSH, no controller). Both open a new connection to the service per request
// (http.server speaks HTTP/1.0), so the difference is what the proxy adds.
//
// Prints the small GET's p50/p99 both ways and the latency the proxy adds (target: under 1 ms
// p50), and the large download's MiB/s both ways and their ratio (target: at least 0.8x).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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
#include "support/stack_fixture.h"

using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A TCP connection to 127.0.0.1:`port` made in the network namespace open at `ns_fd` (this
// thread enters it for the connect and comes back); -1 on failure.
int connect_in(int ns_fd, int self_fd, std::uint16_t port) {
  if (setns(ns_fd, CLONE_NEWNET) != 0) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    fd = -1;
  }
  if (setns(self_fd, CLONE_NEWNET) != 0) {
    std::perror("setns back");
    std::exit(1);
  }
  return fd;
}

// GET `path` from the service directly; the bytes of the reply (head and body).
std::size_t direct_get(int ns_fd, int self_fd, const std::string& path) {
  int fd = connect_in(ns_fd, self_fd, 8000);
  if (fd < 0) {
    std::perror("direct connect");
    std::exit(1);
  }
  std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: localhost:8000\r\nConnection: close\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) std::exit(1);
  std::vector<char> buf(256 << 10);
  std::size_t total = 0;
  for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;) total += static_cast<std::size_t>(n);
  close(fd);
  return total;
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

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "port_bench [--rounds N] [--mib M]", 0, {"--rounds", "--mib"});
  const int rounds = args.count("--rounds", 300);
  const int mib = args.count("--mib", 100, 1, 4096);

  pvs::test::Stack stack;
  auto config = pvs::bench::rest_config(stack.dir(), 10, true);
  auto service = pvs::test::InProcessService::start(config, stack.manager_config());
  if (!service) {
    std::cerr << service.error().message << "\n";
    return 1;
  }
  pvs::bench::RestConn conn((*service)->port());
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
  std::string up = must_exec(
      conn, id,
      "cd " + dir + " && printf 'hello, bench\\n' > small.txt && head -c " + std::to_string(mib) +
          "M /dev/urandom > big.bin && (setsid python3 -m http.server 8000 --bind 127.0.0.1 " +
          "--directory " + dir + " > server.log 2>&1 </dev/null &) && for i in $(seq 200); do " +
          "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000), 1)' " +
          "2>/dev/null && echo up && exit 0; sleep 0.05; done; cat server.log; ls -la");
  if (up != "up\n") {
    std::cerr << "the service did not start: " << up << "\n";
    return 1;
  }
  const std::string ns = "/run/netns/" + stack.id() + "-" + std::to_string(vmid);
  int ns_fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  int self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0 || self_fd < 0) {
    std::perror(ns.c_str());
    return 1;
  }
  const std::string proxied = "/v1/sandboxes/" + id + "/ports/8000";
  std::string body;
  for (int i = 0; i < 20; ++i) {  // warm-up: sessions, page cache, python's imports
    conn.call("GET", proxied + "/small.txt", "", &body);
    direct_get(ns_fd, self_fd, "/small.txt");
  }
  std::vector<double> via, straight;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    if (conn.call("GET", proxied + "/small.txt", "", &body) != 200 || body != "hello, bench\n")
      return 1;
    via.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    direct_get(ns_fd, self_fd, "/small.txt");
    straight.push_back(ms(Clock::now() - t0));
  }
  auto v = pvs::bench::stats(via), d = pvs::bench::stats(straight);
  std::printf("small GET x%d            p50      p99  (ms)\n", rounds);
  std::printf("  direct (sandbox netns) %7.3f  %7.3f\n", d.p50, d.p99);
  std::printf("  through the proxy      %7.3f  %7.3f\n", v.p50, v.p99);
  std::printf("  added by the proxy     %+7.3f  %+7.3f   (target: under 1 ms p50)\n", v.p50 - d.p50,
              v.p99 - d.p99);

  const double bytes = static_cast<double>(mib) * (1 << 20);
  std::vector<double> via_mibs, straight_mibs;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    if (conn.call("GET", proxied + "/big.bin", "", &body) != 200 ||
        body.size() != static_cast<std::size_t>(bytes))
      return 1;
    via_mibs.push_back(bytes / (1 << 20) / (ms(Clock::now() - t0) / 1000));
    body.clear();
    t0 = Clock::now();
    if (direct_get(ns_fd, self_fd, "/big.bin") < static_cast<std::size_t>(bytes)) return 1;
    straight_mibs.push_back(bytes / (1 << 20) / (ms(Clock::now() - t0) / 1000));
  }
  auto vm = pvs::bench::stats(via_mibs), dm = pvs::bench::stats(straight_mibs);
  std::printf("%d MiB download x3        MiB/s (median)\n", mib);
  std::printf("  direct (sandbox netns) %8.1f\n", dm.p50);
  std::printf("  through the proxy      %8.1f\n", vm.p50);
  std::printf("  proxy / direct         %8.2fx   (target: at least 0.8x)\n", vm.p50 / dm.p50);
  must_exec(conn, id,
            "pkill -f 'http.server 8000 --bind 127.0.0.1 --directory " + dir + "'; rm -rf " + dir);
  conn.call("DELETE", "/v1/sandboxes/" + id, "", nullptr);
  close(ns_fd);
  close(self_fd);
  service->reset();
  return 0;
}
