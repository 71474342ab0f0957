// The demo flow for real: the pve-sandbox-controller binary and sandboxctl against the whole
// stack (pvs::test::Stack with pvesim's netns backend: every sandbox is a network namespace with
// its own sshd; the real agent keeps the real nftables sets).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/StreamSocket.h>

#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/json_object.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN and PVS_SANDBOXCTL_BIN must name the binaries"
#endif

namespace pvs::service {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using Proc = test::ProcessResult;

// Runs argv with `input` on stdin; stdout/stderr collected through files in `dir`.
Proc run(const std::vector<std::string>& argv, const std::string& dir,
         const std::string& input = "", const std::vector<std::string>& env = {}) {
  return test::run_captured(argv, dir, input, env);
}

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    dir_ = stack_->dir();
    port_ = test::free_port();
    config_ = dir_ + "/controller.yaml";
    ManagerConfig mc = stack_->manager_config();  // the stack's user, key and agent socket
    std::ofstream(config_) << "listen:\n  address: 127.0.0.1\n  port: " << port_ << "\n"
                           << "auth:\n  tokens:\n    - name: demo\n      sha256: "
                           << sha256_hex("tok-demo") << "\n      max_sandboxes: 64\n"
                           << "audit:\n  file: " << dir_ << "/audit.log\n"
                           << "proxmox:\n  url: https://127.0.0.1:" << stack_->port() << "\n"
                           << "  node: pve\n  token_id: " << test::Stack::kTokenId << "\n"
                           << "  token_secret_env: PVS_E2E_PVE_SECRET\n"
                           << "  fingerprint: \"" << stack_->fingerprint() << "\"\n"
                           << "  template_vmid: 9000\n  vmid_min: 10000\n  vmid_max: 10999\n"
                           << "ssh:\n  user: " << mc.ssh.user << "\n"
                           << "  private_key_file: " << mc.ssh.private_key_file << "\n"
                           << "  host_key_policy: pinned\n  host_key_fingerprint: \""
                           << mc.ssh.host_key_fingerprint << "\"\n  connect_timeout_seconds: 15\n"
                           << "  ready_timeout_seconds: 20\n"
                           << "agent:\n  socket: " << mc.agent.socket_path << "\n"
                           << "limits:\n  reconcile_interval_seconds: 5\n"
                           << "http:\n  max_upload_bytes: " << kMaxUpload << "\n"
                           << "  max_download_bytes: " << kMaxDownload << "\n";
    start_controller();
  }
  void TearDown() override {
    stop_controller();
    stack_.reset();
  }

  // `cacert` not empty: the controller serves HTTPS with that certificate; health is checked
  // with sandboxctl --cacert.
  void start_controller(const std::string& cacert = "") {
    log_ = dir_ + "/controller" + std::to_string(++starts_) + ".log";
    test::SpawnOptions so;
    so.stdout_file = log_;
    so.env = {std::string("PVS_E2E_PVE_SECRET=") + test::Stack::kTokenSecret};
    pid_ = test::spawn_process({PVS_CONTROLLER_BIN, "--config=" + config_}, so);
    ASSERT_GT(pid_, 0) << "cannot start " << PVS_CONTROLLER_BIN;
    for (int i = 0; i < 200; ++i) {
      if (!cacert.empty()) {
        if (run({PVS_SANDBOXCTL_BIN, "--cacert", cacert, "--url", https_url(), "health"}, dir_)
                .exit_code == 0) {
          return;
        }
      } else {
        try {
          auto h = test::http(port_, "GET", "/v1/health");
          if (h.status == 200) return;
        } catch (...) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "controller did not become healthy:\n" << slurp(log_);
  }
  std::string https_url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_);
  }
  int stop_controller() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  Proc ctl(std::vector<std::string> args, const std::string& input = "") {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN, "--url",
                                     "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_, input, {"SANDBOXCTL_TOKEN=tok-demo", "HOME=" + dir_});
  }

  static constexpr std::uint64_t kMaxUpload = 4 << 20;
  static constexpr std::uint64_t kMaxDownload = 6 << 20;

  std::unique_ptr<test::Stack> stack_;
  std::string dir_, config_, log_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  int starts_ = 0;
};

TEST_F(ServiceE2eTest, DemoFlowWithSandboxctl) {
  auto created = ctl({"--json", "create", "--label", "demo=1", "--ttl", "600"});
  ASSERT_EQ(created.exit_code, 0) << created.err << slurp(log_);
  auto sb = json(created.out);
  std::string id = sb->getValue<std::string>("id");
  std::string address = sb->getValue<std::string>("address");

  auto table = ctl({"list"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("ID"), std::string::npos);
  EXPECT_NE(table.out.find(id), std::string::npos);
  EXPECT_NE(ctl({"show", id}).out.find("demo=1"), std::string::npos);
  auto usage = ctl({"usage", id});  // a new sandbox: the live sample at least
  EXPECT_EQ(usage.exit_code, 0) << usage.err;
  EXPECT_NE(usage.out.find("(now)"), std::string::npos) << usage.out;
  EXPECT_NE(ctl({"usage", id, "--since", "later"}).exit_code, 0);
  auto pools = ctl({"pool"});  // the demo token is no admin
  EXPECT_NE(pools.exit_code, 0);
  EXPECT_NE(pools.err.find("admin token"), std::string::npos) << pools.err;

  // exec: output streams through; the exit code becomes sandboxctl's.
  auto hello = ctl({"exec", id, "--", "echo hello; echo oops >&2; exit 3"});
  EXPECT_EQ(hello.exit_code, 3) << hello.err;
  EXPECT_EQ(hello.out, "hello\n");
  EXPECT_EQ(hello.err, "oops\n");
  auto env = ctl({"exec", id, "--env", "GREETING=hi there", "--cwd", "/tmp", "--", "echo",
                  "\"$GREETING from $(pwd)\""});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out, "hi there from /tmp\n");
  auto in = ctl({"exec", id, "--stdin", "--", "wc -c"}, "12345");
  EXPECT_EQ(in.out, "5\n");
  auto slow = ctl({"exec", id, "--timeout", "1", "--", "sleep 30"});
  EXPECT_EQ(slow.exit_code, 124);
  auto js = ctl({"--json", "exec", id, "--", "echo x; exit 7"});
  EXPECT_EQ(js.exit_code, 7);
  EXPECT_EQ(json(js.out)->getValue<std::string>("stdout"), "x\n");

  // Files both ways, with a mode, and a listing (in the login user's home).
  std::string home = ctl({"exec", id, "--", "pwd"}).out;
  ASSERT_FALSE(home.empty());
  home.pop_back();
  std::string local = dir_ + "/payload.bin";
  std::string payload;
  for (int i = 0; i < 100000; ++i) payload += static_cast<char>(i * 7);
  std::ofstream(local, std::ios::binary) << payload;
  ASSERT_EQ(ctl({"cp", "--mode", "0600", local, id + ":" + home + "/sub/payload.bin"}).exit_code,
            0);
  EXPECT_EQ(ctl({"exec", id, "--", "stat -c %a:%s sub/payload.bin"}).out, "600:100000\n");
  ASSERT_EQ(ctl({"cp", id + ":" + home + "/sub/payload.bin", dir_ + "/back.bin"}).exit_code, 0);
  EXPECT_EQ(slurp(dir_ + "/back.bin"), payload);
  auto cat = ctl({"cp", id + ":/etc/hostname", "-"});
  EXPECT_EQ(cat.exit_code, 0);
  EXPECT_FALSE(cat.out.empty());
  EXPECT_NE(ctl({"ls", id, home + "/sub"}).out.find("payload.bin"), std::string::npos);
  EXPECT_NE(ctl({"cp", id + ":/nonexistent", "-"}).exit_code, 0);

  // Internet: the agent's set follows.
  EXPECT_TRUE(stack_->internet_set().empty());
  ASSERT_EQ(ctl({"internet", id, "on"}).exit_code, 0);
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{address});
  ASSERT_EQ(ctl({"internet", id, "off"}).exit_code, 0);
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(ctl({"ttl", id, "1200"}).exit_code, 0);

  // Snapshot and rollback.
  ASSERT_EQ(ctl({"snapshot", id, "clean"}).exit_code, 0);
  EXPECT_NE(ctl({"snapshots", id}).out.find("clean"), std::string::npos);
  auto rb = ctl({"rollback", id, "clean"});
  EXPECT_EQ(rb.exit_code, 0) << rb.err;

  // Errors: usage 2, API errors 1 with the server's message.
  EXPECT_EQ(ctl({"frobnicate"}).exit_code, 2);
  auto missing = ctl({"show", "sb-000000000000"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not_found"), std::string::npos);
  auto badtoken = run({PVS_SANDBOXCTL_BIN, "--url", "http://127.0.0.1:" + std::to_string(port_),
                       "--token", "wrong", "list"},
                      dir_);
  EXPECT_EQ(badtoken.exit_code, 1);
  EXPECT_NE(badtoken.err.find("401"), std::string::npos);

  ASSERT_EQ(ctl({"destroy", id}).exit_code, 0);
  EXPECT_EQ(json(ctl({"--json", "list"}).out)->getArray("sandboxes")->size(), 0u);
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());

  // Every mutating call is in the audit log.
  std::string audit = slurp(dir_ + "/audit.log");
  for (const char* action :
       {"sandbox.create", "sandbox.exec", "sandbox.put_file", "sandbox.internet", "sandbox.ttl",
        "sandbox.snapshot", "sandbox.rollback", "sandbox.destroy"}) {
    EXPECT_NE(audit.find(std::string("\"action\":\"") + action + "\""), std::string::npos)
        << action;
  }
  EXPECT_EQ(audit.find("hi there"), std::string::npos);  // env values are not logged
  EXPECT_EQ(audit.find("tok-demo"), std::string::npos);
}

TEST_F(ServiceE2eTest, StreamingExecEvents) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  auto r = test::http(port_, "POST", "/v1/sandboxes/" + id + "/exec",
                      R"({"command":"echo one; sleep 0.3; echo two >&2; exit 4"})", "tok-demo",
                      {{"Accept", "application/x-ndjson"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["Content-Type"], "application/x-ndjson");
  EXPECT_EQ(r.headers["Transfer-Encoding"], "chunked");
  std::vector<Poco::JSON::Object::Ptr> events;
  std::istringstream lines(r.body);
  for (std::string l; std::getline(lines, l);) events.push_back(json(l));
  ASSERT_EQ(events.size(), 4u) << r.body;
  EXPECT_EQ(events[0]->getValue<std::string>("type"), "start");
  EXPECT_EQ(events[1]->getValue<std::string>("type"), "stdout");
  EXPECT_EQ(events[1]->getValue<std::string>("data"), "one\n");
  EXPECT_EQ(events[2]->getValue<std::string>("type"), "stderr");
  EXPECT_EQ(events[2]->getValue<std::string>("data"), "two\n");
  EXPECT_EQ(events[3]->getValue<std::string>("type"), "exit");
  EXPECT_EQ(events[3]->getValue<int>("exit_code"), 4);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// A request refused before its body is read (413 over the limit, 401) is answered, not reset:
// real clients that send a 64 MiB body without waiting for 100-continue read the JSON error.
TEST_F(ServiceE2eTest, RefusedLargeBodiesGetTheirStatusNotAReset) {
  std::string big = dir_ + "/big.bin";
  {
    std::ofstream out(big, std::ios::binary);
    std::string mib(1 << 20, 'x');
    for (int i = 0; i < 64; ++i) out << mib;
  }
  std::string port = std::to_string(port_);
  const char* py =
      "import http.client, json, os, sys\n"
      "port, method, path, token, body = sys.argv[1:6]\n"
      "c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=60)\n"
      "h = {'Content-Type': 'application/octet-stream',\n"
      "     'Content-Length': str(os.path.getsize(body))}\n"
      "if token: h['Authorization'] = 'Bearer ' + token\n"
      "c.request(method, path, body=open(body, 'rb'), headers=h)\n"
      "r = c.getresponse()\n"
      "print(r.status, json.loads(r.read())['error']['code'])\n";
  std::string upload = "/v1/sandboxes/sb-0123456789ab/files?path=/tmp/x";
  auto over = run({"python3", "-c", py, port, "PUT", upload, "tok-demo", big}, dir_);
  EXPECT_EQ(over.out, "413 too_large\n") << over.err;
  auto anonymous = run({"python3", "-c", py, port, "POST", "/v1/sandboxes", "", big}, dir_);
  EXPECT_EQ(anonymous.out, "401 unauthenticated\n") << anonymous.err;
  auto curl =
      run({"curl", "-sS", "-H", "Expect:", "-H", "Authorization: Bearer tok-demo", "-X", "PUT",
           "--data-binary", "@" + big, "-w", " %{http_code}", "http://127.0.0.1:" + port + upload},
          dir_);
  EXPECT_EQ(curl.exit_code, 0) << curl.err;
  EXPECT_NE(curl.out.find("\"too_large\""), std::string::npos) << curl.out;
  EXPECT_NE(curl.out.find(" 413"), std::string::npos) << curl.out;
}

// Errors of the sandbox's making map to their 4xx with the cause: a rename the filesystem
// refuses (a sticky directory, somebody else's file) is 403, a directory in the way 409.
// Every exec is on record when it starts and again when it ends.
TEST_F(ServiceE2eTest, UploadErrorsMapToTheirCauseAndExecIsAuditedAtStart) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  std::string sticky = dir_ + "/sticky";
  ASSERT_EQ(::mkdir(sticky.c_str(), 01777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  std::ofstream(sticky + "/roots") << "root's file\n";  // this test runs as root
  auto put = [&](const std::string& path) {
    return test::http(port_, "PUT", "/v1/sandboxes/" + id + "/files?path=" + path, "data",
                      "tok-demo", {{"Content-Type", "application/octet-stream"}});
  };
  auto refused = put(sticky + "/roots");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("permission_denied"), std::string::npos) << refused.body;
  EXPECT_EQ(slurp(sticky + "/roots"), "root's file\n");
  ASSERT_EQ(::mkdir((stack_->home() + "/adir").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((stack_->home() + "/adir").c_str(), 0777), 0);
  auto onto_dir = put(stack_->home() + "/adir");
  EXPECT_EQ(onto_dir.status, 409) << onto_dir.body;

  auto exec = test::http(port_, "POST", "/v1/sandboxes/" + id + "/exec", R"({"command":"true"})",
                         "tok-demo");
  EXPECT_EQ(exec.status, 200) << exec.body;
  std::string audit = slurp(dir_ + "/audit.log");
  auto start = audit.find("\"sandbox.exec.start\"");
  auto end = audit.find("\"sandbox.exec\"");
  EXPECT_NE(start, std::string::npos) << audit;
  EXPECT_NE(end, std::string::npos) << audit;
  EXPECT_LT(start, end);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// auth.max_streams_per_token: one streaming exec at a time for this token; the second is
// 429 with Retry-After while the first runs; buffered calls are not streams.
TEST_F(ServiceE2eTest, StreamingExecsPerTokenAreLimited) {
  stop_controller();
  std::string yaml = slurp(config_);
  yaml.replace(yaml.find("audit:\n"), 7, "  max_streams_per_token: 1\naudit:\n");
  std::ofstream(config_) << yaml;
  start_controller();
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string exec = "/v1/sandboxes/" + json(created.body)->getValue<std::string>("id") + "/exec";
  std::thread first([&] {
    auto r = test::http(port_, "POST", exec, R"({"command":"sleep 2"})", "tok-demo",
                        {{"Accept", "application/x-ndjson"}});
    EXPECT_EQ(r.status, 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto second = test::http(port_, "POST", exec, R"({"command":"true"})", "tok-demo",
                           {{"Accept", "application/x-ndjson"}});
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_EQ(second.headers["Retry-After"], "1");
  EXPECT_EQ(test::http(port_, "POST", exec, R"({"command":"true"})", "tok-demo").status, 200);
  first.join();
  EXPECT_EQ(test::http(port_, "POST", exec, R"({"command":"true"})", "tok-demo",
                       {{"Accept", "application/x-ndjson"}})
                .status,
            200);
}

// PUT .../files streams the body to SFTP: any size up to the limit, chunked or with a length;
// a body that breaks off or exceeds the limit leaves the target as it was (atomic upload).
TEST_F(ServiceE2eTest, StreamedUploads) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  std::string files = "/v1/sandboxes/" + id + "/files?path=" + stack_->home() + "/up/";
  auto pattern = [](std::size_t n, int seed) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) >> 3);
    return s;
  };
  auto get = [&](const std::string& name) {
    return test::http(port_, "GET", files + name, "", "tok-demo");
  };
  // With a Content-Length: 3 MiB in, the same 3 MiB back.
  std::string three = pattern(3 << 20, 1);
  auto put = test::http(port_, "PUT", files + "a.bin&mode=0600", three, "tok-demo",
                        {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json(put.body)->getValue<std::uint64_t>("size"), three.size());
  EXPECT_EQ(get("a.bin").body, three);

  // Chunked, in uneven pieces.
  auto chunked = [&](const std::string& name, const std::string& data) {
    try {
      Poco::Net::HTTPClientSession session("127.0.0.1", port_);
      session.setTimeout(Poco::Timespan(60, 0));
      Poco::Net::HTTPRequest req("PUT", files + name, Poco::Net::HTTPMessage::HTTP_1_1);
      req.set("Authorization", "Bearer tok-demo");
      req.setContentType("application/octet-stream");
      req.setChunkedTransferEncoding(true);
      std::ostream& out = session.sendRequest(req);
      for (std::size_t at = 0; at < data.size() && out;) {
        std::size_t n = std::min<std::size_t>(data.size() - at, 10007 + at % 50000);
        out.write(data.data() + at, static_cast<std::streamsize>(n));
        at += n;
      }
      Poco::Net::HTTPResponse resp;
      std::string body;
      Poco::StreamCopier::copyToString(session.receiveResponse(resp), body);
      return std::make_pair(static_cast<int>(resp.getStatus()), body);
    } catch (const Poco::Exception& e) {
      return std::make_pair(-1, std::string(e.displayText()));
    }
  };
  std::string two = pattern(2 << 20, 2);
  auto c = chunked("b.bin", two);
  ASSERT_EQ(c.first, 200) << c.second;
  EXPECT_EQ(get("b.bin").body, two);

  // Over the limit, chunked: 413 and b.bin is unchanged. (The server may close the connection
  // before the client finished sending; then the client sees no status at all.)
  c = chunked("b.bin", pattern(kMaxUpload + (1 << 20), 3));
  EXPECT_TRUE(c.first == 413 || c.first == -1) << c.first << " " << c.second;
  EXPECT_EQ(get("b.bin").body, two);
  // Over the limit by Content-Length: refused on the headers alone, before a byte is read.
  auto raw_put = [&](const std::string& name, std::uint64_t length, const std::string& body) {
    Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", port_));
    sock.setReceiveTimeout(Poco::Timespan(60, 0));
    std::string head =
        "PUT " + files + name + " HTTP/1.1\r\nHost: x\r\n" +
        "Authorization: Bearer tok-demo\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n" +
        body;
    for (std::size_t at = 0; at < head.size();) {
      at += static_cast<std::size_t>(
          sock.sendBytes(head.data() + at, static_cast<int>(head.size() - at)));
    }
    sock.shutdownSend();
    std::string reply;
    char buf[4096];
    for (int n; (n = sock.receiveBytes(buf, sizeof buf)) > 0;) reply.append(buf, n);
    return reply;
  };
  auto big = raw_put("b.bin", kMaxUpload + 1, "");
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  EXPECT_EQ(get("b.bin").body, two);

  // A body that breaks off: 400, and a.bin is unchanged.
  auto cut = raw_put("a.bin", 1 << 20, pattern(512 << 10, 5));
  EXPECT_EQ(cut.rfind("HTTP/1.1 400", 0), 0u) << cut;
  EXPECT_NE(cut.find("shorter than its Content-Length"), std::string::npos) << cut;
  EXPECT_EQ(get("a.bin").body, three);
  // No temporary files of the failed uploads are left.
  auto ls = test::http(port_, "GET", files + "&list=1", "", "tok-demo");
  EXPECT_EQ(json(ls.body)->getArray("entries")->size(), 2u) << ls.body;

  // Every upload is audited with the bytes it received.
  std::string audit = slurp(dir_ + "/audit.log");
  EXPECT_NE(audit.find("\"size\":" + std::to_string(three.size())), std::string::npos);
  EXPECT_NE(audit.find("\"status\":413"), std::string::npos);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// GET .../files streams from SFTP (chunked): whole files come back byte for byte; a missing
// file, a directory and a file over the limit are refused before the reply begins; a read that
// breaks off after it began (here: /dev/zero, size 0 to stat, endless to read) resets the
// connection before the final chunk, so no client can take a partial file for a whole one.
TEST_F(ServiceE2eTest, StreamedDownloads) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  std::string dir = stack_->home() + "/down";
  auto exec = test::http(
      port_, "POST", "/v1/sandboxes/" + id + "/exec",
      "{\"command\":\"mkdir -p " + dir + " && : > " + dir + "/empty && head -c " +
          std::to_string(kMaxDownload) + " /dev/urandom > " + dir + "/max.bin && head -c " +
          std::to_string(kMaxDownload + 1) + " /dev/zero > " + dir + "/over.bin\"}",
      "tok-demo");
  ASSERT_EQ(exec.status, 200) << exec.body;
  std::string files = "/v1/sandboxes/" + id + "/files?path=";
  auto get = [&](const std::string& path) {
    return test::http(port_, "GET", files + path, "", "tok-demo");
  };
  auto max = get(dir + "/max.bin");
  ASSERT_EQ(max.status, 200);
  EXPECT_EQ(max.headers["Transfer-Encoding"], "chunked");
  EXPECT_EQ(max.body, slurp(dir + "/max.bin"));  // the netns CT shares the host's files
  auto empty = get(dir + "/empty");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(get(dir + "/nosuch").status, 404);
  EXPECT_EQ(get(dir).status, 400);
  EXPECT_EQ(get(dir + "/over.bin").status, 413);
  // Listings say whether a limit cut them short; a bad limit is refused.
  auto listed = get(dir + "&list=true");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(json(listed.body)->getArray("entries")->size(), 3u);
  EXPECT_FALSE(json(listed.body)->getValue<bool>("truncated"));
  auto cut = get(dir + "&list=true&limit=2");
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(json(cut.body)->getArray("entries")->size(), 2u);
  EXPECT_TRUE(json(cut.body)->getValue<bool>("truncated"));
  EXPECT_EQ(get(dir + "&list=true&limit=0").status, 400);

  // Broken off after the reply began: 200 and chunks, then a reset without the final chunk.
  Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", port_));
  sock.setReceiveTimeout(Poco::Timespan(60, 0));
  std::string head = "GET " + files + "/dev/zero HTTP/1.1\r\nHost: x\r\n" +
                     "Authorization: Bearer tok-demo\r\n\r\n";
  sock.sendBytes(head.data(), static_cast<int>(head.size()));
  std::string reply;
  char buf[65536];
  try {
    for (int n; (n = sock.receiveBytes(buf, sizeof buf)) > 0;) reply.append(buf, n);
  } catch (const Poco::Exception&) {  // reset by peer: the expected end
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_GT(reply.size(), 1u << 20);
  EXPECT_NE(reply.substr(reply.size() - 5), "0\r\n\r\n") << "a partial file must not end cleanly";

  // The service is fine afterwards.
  EXPECT_EQ(get(dir + "/empty").status, 200);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// The HTTPS listener (Poco NetSSL) with a self-signed certificate made by the openssl CLI, and
// sandboxctl trusting exactly that certificate through --cacert / SANDBOXCTL_CACERT.
TEST_F(ServiceE2eTest, HttpsListener) {
  std::string cert = dir_ + "/api-cert.pem", key = dir_ + "/api-key.pem";
  auto made =
      run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=pve-sandbox test",
           "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert},
          dir_);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // A second, unrelated self-signed certificate: trusting it must not be enough.
  std::string other = dir_ + "/other-cert.pem";
  ASSERT_EQ(
      run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=other", "-addext",
           "subjectAltName=IP:127.0.0.1", "-keyout", dir_ + "/other-key.pem", "-out", other},
          dir_)
          .exit_code,
      0);
  EXPECT_EQ(stop_controller(), 0);
  std::string text = slurp(config_);
  auto at = text.find("  port: ");
  ASSERT_NE(at, std::string::npos);
  text.insert(text.find('\n', at) + 1,
              "  tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n");
  std::ofstream(config_) << text;
  start_controller(cert);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_NE(slurp(log_).find("listening on https://127.0.0.1:"), std::string::npos);

  std::vector<std::string> env = {"SANDBOXCTL_TOKEN=tok-demo", "HOME=" + dir_};
  auto ctl_tls = [&](std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto e = env;
    e.insert(e.end(), extra_env.begin(), extra_env.end());
    return run(argv, dir_, "", e);
  };
  auto created = ctl_tls({"--cacert", cert, "--url", https_url(), "--json", "create"});
  ASSERT_EQ(created.exit_code, 0) << created.err << slurp(log_);
  std::string id = json(created.out)->getValue<std::string>("id");
  auto hello = ctl_tls({"--url", https_url(), "exec", id, "--", "echo over tls; exit 5"},
                       {"SANDBOXCTL_CACERT=" + cert});
  EXPECT_EQ(hello.exit_code, 5) << hello.err;
  EXPECT_EQ(hello.out, "over tls\n");

  // Not trusted: the system store, another self-signed certificate, a name the certificate
  // does not carry, plain HTTP to the TLS port.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--url", https_url(), "list"},
           {"--cacert", other, "--url", https_url(), "list"},
           {"--cacert", cert, "--url", https_url("localhost"), "list"},
           {"--url", "http://127.0.0.1:" + std::to_string(port_), "list"}}) {
    auto r = ctl_tls(args);
    EXPECT_EQ(r.exit_code, 1) << args[args.size() - 2] << ": " << r.out;
    EXPECT_EQ(r.out.find(id), std::string::npos);
  }
  EXPECT_EQ(ctl_tls({"--cacert", dir_ + "/missing.pem", "list"}).exit_code, 1);
  // The listener speaks TLS 1.2+ only.
  auto old = run({"/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:" + std::to_string(port_),
                  "-tls1_1", "-CAfile", cert},
                 dir_);
  EXPECT_NE(old.exit_code, 0) << old.out;

  auto gone = ctl_tls({"--cacert", cert, "--url", https_url(), "destroy", id});
  EXPECT_EQ(gone.exit_code, 0) << gone.err;
  EXPECT_TRUE(stack_->containers().empty());
}

TEST_F(ServiceE2eTest, RestartWhileSandboxesLiveAndCheckConfig) {
  auto created = ctl({"--json", "create", "--internet"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id = json(created.out)->getValue<std::string>("id");
  ASSERT_EQ(ctl({"exec", id, "--", "echo before > state"}).exit_code, 0);
  EXPECT_EQ(stop_controller(), 0) << slurp(log_);  // SIGTERM: clean exit
  start_controller();
  EXPECT_NE(ctl({"list"}).out.find(id), std::string::npos);
  EXPECT_EQ(ctl({"exec", id, "--", "cat state"}).out, "before\n");
  EXPECT_EQ(stack_->internet_set().size(), 1u);
  EXPECT_EQ(ctl({"destroy", id}).exit_code, 0);

  auto ok = run({PVS_CONTROLLER_BIN, "--check-config", "--config", config_}, dir_, "",
                {std::string("PVS_E2E_PVE_SECRET=") + test::Stack::kTokenSecret});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("configuration OK"), std::string::npos);
  EXPECT_EQ(ok.out.find(test::Stack::kTokenSecret), std::string::npos);
  std::ofstream(dir_ + "/bad.yaml") << slurp(config_) << "surprise: 1\n";
  auto bad = run({PVS_CONTROLLER_BIN, "--check-config", "--config", dir_ + "/bad.yaml"}, dir_, "",
                 {std::string("PVS_E2E_PVE_SECRET=") + test::Stack::kTokenSecret});
  EXPECT_EQ(bad.exit_code, 78);
  EXPECT_NE(bad.err.find(": surprise: unknown key"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find(dir_ + "/bad.yaml:"), std::string::npos) << bad.err;
  auto hash = run({PVS_CONTROLLER_BIN, "--hash-token"}, dir_, "tok-demo\n");
  EXPECT_EQ(hash.out, sha256_hex("tok-demo") + "\n");
}

TEST_F(ServiceE2eTest, ThirtyTwoClientsCreateExecDestroy) {
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      auto c = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
      if (c.status != 201) {
        ADD_FAILURE() << c.status << " " << c.body;
        return;
      }
      std::string id = json(c.body)->getValue<std::string>("id");
      auto e = test::http(port_, "POST", "/v1/sandboxes/" + id + "/exec",
                          "{\"command\":\"echo " + std::to_string(i) + "\"}", "tok-demo");
      bool exec_ok = e.status == 200 &&
                     json(e.body)->getValue<std::string>("stdout") == std::to_string(i) + "\n";
      auto d = test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo");
      if (exec_ok && d.status == 204) {
        ++ok;
      } else {
        ADD_FAILURE() << e.status << " " << e.body << " / " << d.status;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 32);
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->ct_namespaces().empty());
}

}  // namespace
}  // namespace pvs::service
