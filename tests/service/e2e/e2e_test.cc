// The demo flow for real: the pve-sandbox-controller binary and sandboxctl against the whole
// stack (pvs::test::Stack with pvesim's netns backend: every sandbox is a network namespace with
// its own sshd; the real agent keeps the real nftables sets).
#include "e2e_fixture.h"
#include "support/eventually.h"

namespace pvs::service {
namespace {

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
  // The first stream holds its slot from before its command starts until it ends: once the
  // command has left its mark, the slot is taken (awaited, not assumed after a sleep).
  const std::string mark = stack_->home() + "/stream-started";
  std::thread first([&] {
    auto r = test::http(port_, "POST", exec, R"({"command":"touch )" + mark + R"(; sleep 3"})",
                        "tok-demo", {{"Accept", "application/x-ndjson"}});
    EXPECT_EQ(r.status, 200);
  });
  EXPECT_TRUE(test::eventually([&] { return ::access(mark.c_str(), F_OK) == 0; }))
      << "the first stream's command never ran";
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
