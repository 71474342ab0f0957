// mcp_bench [n=300]: `tools/call exec echo` through MCP in revision 2026-07-28 (stateless: _meta
// and the Mcp-* headers on every request) and in the legacy revision 2025-11-25 (one session),
// vs the same exec through REST (POST /v1/sandboxes/{id}/exec), interleaved in one run against
// one in-process controller and one sandbox of the netns stack (a real sshd), each on its own
// keep-alive connection. Prints mean/p50/p99 and what each MCP revision adds. Not a ctest; run
// it as root.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

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
#include "support/stack_fixture.h"

using Clock = std::chrono::steady_clock;

namespace {

using pvs::bench::Stats;
using pvs::bench::stats;

using Conn = pvs::bench::RestConn;

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "mcp_bench [iterations=300]", 1);
  int n = args.count(1, 300);
  pvs::test::Stack stack;
  auto config = pvs::bench::rest_config(stack.dir(), 10, false);
  auto service = pvs::test::InProcessService::start(config, stack.manager_config());
  if (!service) {
    std::cerr << service.error().message << "\n";
    return 1;
  }
  const std::uint16_t port = (*service)->port();
  Conn rest(port), mcp(port), modern(port);
  std::string body, session;
  if (rest.post("/v1/sandboxes", "{}", &body) != 201) {
    std::cerr << body << "\n";
    return 1;
  }
  std::string id =
      Poco::JSON::Parser().parse(body).extract<Poco::JSON::Object::Ptr>()->getValue<std::string>(
          "id");
  std::map<std::string, std::string> h = {{"Accept", "application/json, text/event-stream"}};
  mcp.post(
      "/mcp",
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})",
      &body, h, "Mcp-Session-Id", &session);
  h["Mcp-Session-Id"] = session;
  h["MCP-Protocol-Version"] = "2025-11-25";
  std::string exec_uri = "/v1/sandboxes/" + id + "/exec";
  std::string rest_body = R"({"command":"echo hi"})";
  auto mcp_body = [&](int i) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
           R"(,"method":"tools/call","params":{"name":"exec","arguments":{"sandbox_id":")" + id +
           R"(","command":"echo hi"}}})";
  };
  std::map<std::string, std::string> hm = {{"Accept", "application/json, text/event-stream"},
                                           {"MCP-Protocol-Version", "2026-07-28"},
                                           {"Mcp-Method", "tools/call"},
                                           {"Mcp-Name", "exec"}};
  auto modern_body = [&](int i) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
           R"(,"method":"tools/call","params":{"name":"exec","arguments":{"sandbox_id":")" + id +
           R"(","command":"echo hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":)"
           R"("2026-07-28","io.modelcontextprotocol/clientCapabilities":{},)"
           R"("io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}})";
  };
  std::string modern_reply;
  for (int i = 0; i < 20; ++i) {  // warm-up
    rest.post(exec_uri, rest_body, &body);
    modern.post("/mcp", modern_body(i + 1), &modern_reply, hm);
    mcp.post("/mcp", mcp_body(i + 1), &body, h);
  }
  if (modern_reply.find("\"resultType\":\"complete\"") == std::string::npos ||
      modern_reply.find("\"stdout\":\"hi\\n\"") == std::string::npos) {
    std::cerr << "unexpected 2026-07-28 reply: " << modern_reply << "\n";
    return 1;
  }
  if (body.find("\"stdout\":\"hi\\n\"") == std::string::npos) {
    std::cerr << "unexpected MCP reply: " << body << "\n";
    return 1;
  }
  std::vector<double> r, m, x;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    if (rest.post(exec_uri, rest_body, &body) != 200) return 1;
    r.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    if (modern.post("/mcp", modern_body(100 + i), &body, hm) != 200) return 1;
    x.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    if (mcp.post("/mcp", mcp_body(100 + i), &body, h) != 200) return 1;
    m.push_back(ms(Clock::now() - t0));
  }
  auto a = stats(r), b = stats(m), c = stats(x);
  std::printf("exec 'echo hi' x%d                    mean     p50     p99  (ms)\n", n);
  std::printf("  REST POST .../exec               %7.2f %7.2f %7.2f\n", a.mean, a.p50, a.p99);
  std::printf("  MCP 2026-07-28 tools/call exec   %7.2f %7.2f %7.2f\n", c.mean, c.p50, c.p99);
  std::printf("  MCP 2025-11-25 tools/call exec   %7.2f %7.2f %7.2f\n", b.mean, b.p50, b.p99);
  std::printf("  2026-07-28 / REST                %7.2fx  adds %+.2f ms (p50), %+.2f ms (p99)\n",
              c.p50 / a.p50, c.p50 - a.p50, c.p99 - a.p99);
  std::printf("  2025-11-25 / REST                %7.2fx  adds %+.2f ms (p50), %+.2f ms (p99)\n",
              b.p50 / a.p50, b.p50 - a.p50, b.p99 - a.p99);
  Poco::Net::HTTPClientSession del("127.0.0.1", port);
  Poco::Net::HTTPRequest req("DELETE", "/v1/sandboxes/" + id, Poco::Net::HTTPMessage::HTTP_1_1);
  req.set("Authorization", "Bearer tok-bench");
  del.sendRequest(req);
  Poco::Net::HTTPResponse resp;
  del.receiveResponse(resp);
  service->reset();
  return 0;
}
