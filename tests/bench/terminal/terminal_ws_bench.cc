// Keystroke latency of a terminal end to end through the controller's HTTP server, against
// OpenSSH in the same run, on the netns stack (the sandbox is a namespace with a real sshd;
// Api + HttpServer in this process on loopback, as tests/service/api/terminals/terminal_api_test.cc
// runs them):
//   1. ws:     a Poco::Net::WebSocket client on .../terminals/{tid}/ws sends one key per binary
//              frame, until a binary frame carries its echo back (what a person's UI waits for)
//   2. screen: POST .../input with one key, then POST .../wait with a pattern matching the
//              line with it (what an agent pays between keystrokes), on one keep-alive
//              connection; the input call alone is reported too
//   3. peer:   `ssh -tt` through a running OpenSSH ControlMaster to the same sandbox's sshd
//              (its own host key pinned), one key written to its stdin until its echo returns
// Each types into `cat` on a pty (the tty echoes each key at once). The three alternate key by
// key (one of each per round), so a noisy machine weighs on all three alike. Needs root; not a
// ctest.
//
//   terminal_ws_bench [keystrokes=300]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/StreamCopier.h>

#include "app/api.h"
#include "bench_args.h"
#include "http/auth.h"
#include "rest_conn.h"
#include "service/support/in_process_service.h"
#include "ssh_tt_peer.h"
#include "support/stack_fixture.h"

namespace {

using Poco::Net::WebSocket;
using pvs::bench::Clock;
using pvs::bench::ms_since;
using pvs::bench::percentile;

const char* const kToken = "tok-bench";

Poco::JSON::Object::Ptr json(const std::string& text) {
  return Poco::JSON::Parser().parse(text).extract<Poco::JSON::Object::Ptr>();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using Conn = pvs::bench::RestConn;

// The stack (this thread enters its node namespace: construct it before any thread), the REST
// service in this process, one sandbox.
struct Controller {
  pvs::test::Stack stack;
  pvs::service::ServiceConfig config;
  std::unique_ptr<pvs::test::InProcessService> service;
  std::string sandbox;  // its id
  Poco::JSON::Object::Ptr info;

  Controller() {
    config = pvs::bench::rest_config(stack.dir(), 4, false);
    auto s = pvs::test::InProcessService::start(config, stack.manager_config());
    if (!s) throw std::runtime_error("service: " + s.error().message);
    service = std::move(*s);
    Conn c(port());
    info = json(c.must("POST", "/v1/sandboxes", "{}", 201));
    sandbox = info->getValue<std::string>("id");
  }
  ~Controller() {
    if (auto m = service->manager()) {
      for (const auto& s : m->list()) (void)m->destroy_by_id(s.id);
    }
  }
  std::uint16_t port() const { return service->port(); }
  // POST .../terminals running `cat`: its path.
  std::string open_cat() {
    Conn c(port());
    const std::string base = "/v1/sandboxes/" + sandbox + "/terminals";
    auto t = json(c.must("POST", base, R"({"command":"cat"})", 201));
    return base + "/" + t->getValue<std::string>("id");
  }
};

// 1. One key per binary frame over the WebSocket, until a binary frame brings it back.
class WsTypist {
 public:
  WsTypist(std::uint16_t port, const std::string& term) : cs_("127.0.0.1", port) {
    Poco::Net::HTTPRequest req("GET", term + "/ws", "HTTP/1.1");
    req.set("Authorization", std::string("Bearer ") + kToken);
    Poco::Net::HTTPResponse resp;
    ws_ = std::make_unique<WebSocket>(cs_, req, resp);
    ws_->setReceiveTimeout(Poco::Timespan(5, 0));
  }
  ~WsTypist() {
    try {
      ws_->shutdown();
    } catch (const Poco::Exception&) {
    }
  }
  double type(char key) {
    auto t0 = Clock::now();
    ws_->sendFrame(&key, 1, WebSocket::FRAME_BINARY);
    char buf[4096];
    while (ms_since(t0) < 5000) {
      int flags = 0;
      int n = ws_->receiveFrame(buf, sizeof buf, flags);
      int op = flags & WebSocket::FRAME_OP_BITMASK;
      if ((n == 0 && flags == 0) || op == WebSocket::FRAME_OP_CLOSE) return -1;
      if (op == WebSocket::FRAME_OP_BINARY && std::find(buf, buf + n, key) != buf + n)
        return ms_since(t0);
    }
    return -1;
  }
  void clear_line() {  // C-u; its echo (backspaces) holds no letter
    const char cu = 0x15;
    ws_->sendFrame(&cu, 1, WebSocket::FRAME_BINARY);
  }

 private:
  Poco::Net::HTTPClientSession cs_;
  std::unique_ptr<WebSocket> ws_;
};

// 2. input + wait. A letter per line of 60: the finished lines above (typed, then printed back
// by cat) are other letters, so only the line being typed matches (the same letter is 52 rows
// up, off the screen); ^ and $ are per line in a wait's pattern.
class ScreenTypist {
 public:
  ScreenTypist(std::uint16_t port, std::string term) : c_(port), term_(std::move(term)) {}
  double type(double* input_ms) {
    if (col_ == 60) {
      c_.must("POST", term_ + "/input", R"({"input":[{"key":"Enter"}]})", 200);
      c_.must("POST", term_ + "/wait", R"({"quiet_ms":100,"timeout_ms":2000})", 200);
      col_ = 0;
      ++line_;
    }
    ++col_;
    const std::string letter(1, static_cast<char>('a' + line_ % 26));
    const std::string wait = "{\"pattern\":\"^" + letter + "{" + std::to_string(col_) +
                             "}$\",\"timeout_ms\":5000,\"scrollback\":0}";
    auto t0 = Clock::now();
    c_.must("POST", term_ + "/input", "{\"input\":[{\"text\":\"" + letter + "\"}]}", 200);
    *input_ms = ms_since(t0);
    auto r = json(c_.must("POST", term_ + "/wait", wait, 200));
    const double ms = ms_since(t0);
    if (r->getValue<std::string>("outcome") != "matched") {
      std::string screen;
      c_.call("GET", term_ + "/screen", "", &screen);
      throw std::runtime_error("screen: " + letter + " x" + std::to_string(col_) +
                               " not seen: " + screen);
    }
    return ms;
  }

 private:
  Conn c_;
  std::string term_;
  int col_ = 60, line_ = 0;
};

struct Samples {
  std::vector<double> ws, screen, input, peer;
};

// 3. The peer: ssh -tt to the sandbox's sshd, its own host key (the netns backend keeps it in
// /etc/netns/<namespace>/ssh) pinned.
pvs::bench::SshTarget sandbox_target(Controller& ctl) {
  const std::string address = ctl.info->getValue<std::string>("address");
  const std::string ns = ctl.stack.id() + "-" + std::to_string(ctl.info->getValue<int>("vmid"));
  const std::string pub = slurp("/etc/netns/" + ns + "/ssh/ssh_host_ed25519_key.pub");
  if (pub.empty()) throw std::runtime_error("no host key for " + ns);
  const std::string known_hosts = ctl.stack.dir() + "/bench_known_hosts";
  std::ofstream(known_hosts) << address << " " << pub;
  return {address, 22, ctl.stack.user(), ctl.stack.ssh_key(), known_hosts, ctl.stack.dir()};
}

Samples run(Controller& ctl, int n) {
  WsTypist ws(ctl.port(), ctl.open_cat());
  ScreenTypist screen(ctl.port(), ctl.open_cat());
  pvs::bench::SshTtPeer peer(sandbox_target(ctl));
  if (!peer.ok()) throw std::runtime_error("ssh -tt through a ControlMaster did not start");
  Samples s;
  const int warmup = 20;
  for (int i = 0; i < n + warmup; ++i) {
    const char key = static_cast<char>('a' + i % 26);
    const double w = ws.type(key);
    if (w < 0) throw std::runtime_error("websocket: no echo");
    double input = 0;
    const double sc = screen.type(&input);
    const double p = peer.type(key);
    if (p < 0) throw std::runtime_error("ssh -tt: no echo");
    if (i >= warmup) {
      s.ws.push_back(w);
      s.screen.push_back(sc);
      s.input.push_back(input);
      s.peer.push_back(p);
    }
    if (i % 60 == 59) {
      ws.clear_line();
      peer.clear_line();
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "terminal_ws_bench [keystrokes=300]   (root: netns stack)", 1);
  const int n = args.count(1, 300);
  signal(SIGPIPE, SIG_IGN);
  try {
    Controller ctl;
    Samples s = run(ctl, n);
    std::printf("sandbox %s (%s), controller on 127.0.0.1:%u; peer: ssh -tt to its sshd\n",
                ctl.sandbox.c_str(), ctl.info->getValue<std::string>("address").c_str(),
                static_cast<unsigned>(ctl.port()));
    pvs::bench::report("keystroke -> echo (WebSocket, binary frames)", s.ws);
    pvs::bench::report("keystroke -> rendered screen (POST input + wait)", s.screen);
    pvs::bench::report("  of which POST input", s.input);
    pvs::bench::report("keystroke -> echo (ssh -tt, ControlMaster)", s.peer);
    const double ws50 = percentile(s.ws, 0.5), peer50 = percentile(s.peer, 0.5);
    std::printf("ratio p50: ws %.2fx, screen %.2fx of ssh -tt (lower is faster)\n", ws50 / peer50,
                percentile(s.screen, 0.5) / peer50);
    std::printf("target: WebSocket round trip p50 <= 5 ms: %.3f ms, %s\n", ws50,
                ws50 <= 5.0 ? "met" : "MISSED");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "terminal_ws_bench: %s\n", e.what());
    return 1;
  }
}
