// ProxmoxClient against pvesim over real HTTPS: the transport (authentication, TLS modes,
// retries, timeouts, concurrent use) and the helpers that need no server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/log.h"
#include "sim_fixture.h"
#include "support/loopback.h"

namespace pvs::pve::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(ClientTest, FewConnectionsManyThreads) {
  auto o = client_options();
  o.max_connections = 2;
  auto client = make_client(o);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i)
        if (!client->status(kNode, kTemplate)) ++failures;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(sim_->count("GET", "/nodes/{node}/lxc/{vmid}/status/current"), 160u);
}

// ---- errors of the transport and of authentication --------------------------------------

TEST_F(ClientTest, BadTokenIsAuthenticationAndNotRetried) {
  auto o = client_options();
  o.token_secret = "wrong";
  auto client = make_client(o);
  auto r = client->next_id();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kAuthentication);
  EXPECT_EQ(r.error().proxmox->http_status, 401);
  EXPECT_EQ(r.error().message, "Authentication failed!");
  EXPECT_EQ(r.error().proxmox->attempts, 1);
  EXPECT_EQ(sim_->count("GET", "/cluster/nextid"), 1u);
}

TEST_F(ClientTest, UnknownPathIsNotImplemented) {
  auto r = client_->call("GET", "/nodes/pve/frobnicate");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kNotImplemented);
  EXPECT_EQ(r.error().proxmox->http_status, 501);
  EXPECT_EQ(r.error().message, "Method 'GET /api2/json/nodes/pve/frobnicate' not implemented");
}

TEST_F(ClientTest, FingerprintMismatchIsRefusedBeforeAnyRequest) {
  auto o = client_options();
  std::string fp = o.fingerprint;
  fp[0] = fp[0] == 'A' ? 'B' : 'A';
  o.fingerprint = fp;
  auto client = make_client(o);
  auto r = client->next_id();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kTls);
  EXPECT_EQ(r.error().proxmox->attempts, 1);  // never retried
  EXPECT_EQ(sim_->total_requests(), 0u);
  // Colons and case do not matter.
  auto plain = client_options();
  std::string hex;
  for (char c : plain.fingerprint)
    if (c != ':') hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  plain.fingerprint = hex;
  EXPECT_TRUE(make_client(plain)->next_id());
  auto bad = client_options();
  bad.fingerprint = "12:34";
  EXPECT_FALSE(Client::create(bad));
}

TEST_F(ClientTest, CaFileVerificationAndSystemStore) {
  auto o = client_options();
  o.fingerprint.clear();
  o.ca_file = sim_->cert_file();
  auto with_ca = make_client(o);
  auto ok = with_ca->next_id();
  EXPECT_TRUE(ok) << ok.error().to_string();
  o.ca_file.clear();  // the system store does not know the simulator's certificate
  auto system = make_client(o);
  auto refused = system->next_id();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().proxmox->kind, ErrorKind::kTls);
  o.insecure_skip_verify = true;
  EXPECT_TRUE(make_client(o)->next_id());
}

TEST_F(ClientTest, GetsAreRetriedOn596AndTransportErrors) {
  sim_->set_faults(
      {pvesim::FaultRule{"GET", "/cluster/nextid", 596, "Connection timed out", 1.0, 2}});
  auto r = client_->next_id();
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(sim_->count("GET", "/cluster/nextid"), 3u);
}

TEST_F(ClientTest, GetsGiveUpAfterMaxAttempts) {
  sim_->set_faults(
      {pvesim::FaultRule{"GET", "*", 595, "Errors during connection establishment", 1.0, -1}});
  auto r = client_->next_id();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kTransport);
  EXPECT_EQ(r.error().proxmox->http_status, 595);
  EXPECT_EQ(r.error().proxmox->attempts, 4);
  EXPECT_EQ(sim_->count("GET", "/cluster/nextid"), 4u);
}

TEST_F(ClientTest, MutationsAreRetriedOnlyOn595) {
  // 595: pveproxy never reached pvedaemon, so even a clone is safe to send again.
  sim_->set_faults(
      {pvesim::FaultRule{"POST", "/nodes/{node}/lxc/{vmid}/clone", 595,
                         "Errors during connection establishment, proxy handshake", 1.0, 1}});
  auto upid = client_->clone(kNode, CloneRequest{kTemplate, 270, "", "", "", "", "", {}, ""});
  ASSERT_TRUE(upid) << upid.error().to_string();
  EXPECT_EQ(sim_->count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 2u);
  ASSERT_TRUE(client_->wait_task(*upid));
  // 596: the daemon may be executing it; a clone or a delete is never sent twice.
  sim_->set_faults({pvesim::FaultRule{"POST", "*", 596, "Connection timed out", 1.0, 1},
                    pvesim::FaultRule{"DELETE", "*", 596, "Connection timed out", 1.0, 1}});
  auto second = client_->clone(kNode, CloneRequest{kTemplate, 271, "", "", "", "", "", {}, ""});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().proxmox->kind, ErrorKind::kTransport);
  EXPECT_EQ(second.error().proxmox->attempts, 1);
  EXPECT_EQ(sim_->count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 3u);
  auto destroy = client_->destroy(kNode, 270);
  ASSERT_FALSE(destroy);
  EXPECT_EQ(destroy.error().proxmox->attempts, 1);
  EXPECT_EQ(sim_->count("DELETE", "/nodes/{node}/lxc/{vmid}"), 1u);
  // Plain 500s are never retried, not even for GETs.
  sim_->set_faults({pvesim::FaultRule{"GET", "*", 500, "internal error", 1.0, 1}});
  EXPECT_FALSE(client_->status(kNode, 270));
  EXPECT_EQ(sim_->count("GET", "/nodes/{node}/lxc/{vmid}/status/current"), 1u);
}

TEST_F(ClientTest, ConnectFailuresAreRetriedAndAreTransport) {
  auto o = client_options();  // nothing listens on a free port
  o.base_url = "https://127.0.0.1:" + std::to_string(pvs::test::free_port());
  auto client = make_client(o);
  auto r = client->clone(kNode, CloneRequest{kTemplate, 280, "", "", "", "", "", {}, ""});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kTransport);
  EXPECT_EQ(r.error().proxmox->http_status, 0);
  EXPECT_EQ(r.error().proxmox->attempts, 4);  // nothing was sent, so retrying was safe
  EXPECT_EQ(client->requests_sent(), 4u);
}

TEST_F(ClientTest, LatencyAndRequestTimeout) {
  sim_->set_latency_ms(300);
  auto o = client_options();
  o.request_timeout = milliseconds(100);
  o.max_attempts = 2;
  auto client = make_client(o);
  auto r = client->start(kNode, kTemplate);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kTransport);
  EXPECT_EQ(r.error().proxmox->attempts, 1);  // a timed-out POST may have been accepted
  auto g = client->next_id();
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().proxmox->attempts, 2);
  sim_->set_latency_ms(0);
}

TEST_F(ClientTest, SixtyFourThreadsShareOneClient) {
  clone_ok(300);
  constexpr int kThreads = 64, kCalls = 15;
  uint64_t before = client_->requests_sent();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        bool ok = false;
        switch ((t + i) % 3) {
          case 0: ok = client_->next_id().has_value(); break;
          case 1: ok = client_->status(kNode, 300).has_value(); break;
          case 2: ok = client_->config(kNode, kTemplate).has_value(); break;
        }
        if (!ok) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client_->requests_sent() - before, static_cast<uint64_t>(kThreads * kCalls));
}

TEST_F(ClientTest, ConcurrentClonesOfOneTemplate) {
  sim_->set_task_ms("vzclone", 5000);  // the first clone holds the lock for the whole test
  constexpr int kThreads = 8;
  std::atomic<int> accepted{0}, locked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto r = client_->clone(kNode, CloneRequest{kTemplate, 400 + t, "", "", "", "", "", {}, ""});
      if (r)
        ++accepted;
      else if (r.error().proxmox->kind == ErrorKind::kLocked)
        ++locked;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 1);
  EXPECT_EQ(locked.load(), kThreads - 1);
}

// ---- helpers that need no server --------------------------------------------------------

TEST(ProxmoxClassify, Messages) {
  EXPECT_EQ(classify(500, "CT is locked (disk)"), ErrorKind::kLocked);
  EXPECT_EQ(classify(500, "can't lock file '/run/lock/lxc/pve-config-105.lock' - got timeout"),
            ErrorKind::kLocked);
  EXPECT_EQ(classify(500, "CT 105 already exists on node 'pve'"), ErrorKind::kAlreadyExists);
  EXPECT_EQ(classify(500, "CT 105 already running"), ErrorKind::kAlreadyRunning);
  EXPECT_EQ(classify(500, "VM 105 not running"), ErrorKind::kNotRunning);
  EXPECT_EQ(classify(500, "pool 'x' does not exist"), ErrorKind::kNotFound);
  EXPECT_EQ(classify(403, "Permission check failed (pool 'x' does not exist)"),
            ErrorKind::kPermissionDenied);
  EXPECT_EQ(classify(401, "No ticket"), ErrorKind::kAuthentication);
  EXPECT_EQ(classify(400, "Parameter verification failed."), ErrorKind::kInvalidParameters);
  EXPECT_EQ(classify(595, "Errors during connection establishment"), ErrorKind::kTransport);
  EXPECT_EQ(classify(596, "Connection timed out"), ErrorKind::kTransport);
  EXPECT_EQ(classify(501, "Unexpected content for method 'DELETE'"), ErrorKind::kNotImplemented);
  EXPECT_EQ(classify(500, "unable to destroy CT 1 - container is running"), ErrorKind::kServer);
  EXPECT_EQ(to_string(ErrorKind::kAlreadyRunning), "already_running");
}

TEST(ProxmoxUpid, Parse) {
  auto u = Upid::parse("UPID:proxmox2:000D7AA2:08D5A17C:63DF62A5:vzclone:200:root@pam!api_token:");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->node, "proxmox2");
  EXPECT_EQ(u->pid, 0x000D7AA2u);
  EXPECT_EQ(u->pstart, 0x08D5A17Cu);
  EXPECT_EQ(u->starttime, 0x63DF62A5u);
  EXPECT_EQ(u->type, "vzclone");
  EXPECT_EQ(u->id, "200");
  EXPECT_EQ(u->user, "root@pam!api_token");
  EXPECT_TRUE(Upid::parse("UPID:n:00000001:123456789:00000001:vzstart::root@pam:"));
  EXPECT_FALSE(Upid::parse("UPID:n:0001:00000001:00000001:vzstart:1:root@pam:"));
  EXPECT_FALSE(Upid::parse("UPID:-n:00000001:00000001:00000001:vzstart:1:root@pam:"));
  EXPECT_FALSE(Upid::parse("UPID:n:00000001:00000001:00000001:vzstart:1:root@pam"));
  EXPECT_FALSE(Upid::parse("UPID:n:00000001:00000001:00000001:vz/start:1:root@pam:"));
  EXPECT_FALSE(Upid::parse(""));
}

TEST(ProxmoxSecrets, FileAndEnvironment) {
  char path[] = "/tmp/pvs-secret-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "  0d3c5e2a-6b1f \n second line\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  auto secret = read_secret_file(path);
  ASSERT_TRUE(secret);
  EXPECT_EQ(*secret, "0d3c5e2a-6b1f");
  ::unlink(path);
  EXPECT_FALSE(read_secret_file(path));
  std::string var = "PVS_TEST_SECRET_" + std::to_string(::getpid());
  ::setenv(var.c_str(), "abc-123", 1);
  EXPECT_EQ(*read_secret_env(var), "abc-123");
  ::setenv(var.c_str(), "", 1);
  EXPECT_FALSE(read_secret_env(var));
  ::unsetenv(var.c_str());
  EXPECT_FALSE(read_secret_env(var));
}

TEST(ProxmoxCreate, RejectsBadOptions) {
  ClientOptions o;
  o.base_url = "https://x:8006";
  o.token_id = "root@pam";  // no token name
  o.token_secret = "s";
  EXPECT_FALSE(Client::create(o));
  o.token_id = "root@pam!t";
  o.token_secret = "";
  EXPECT_FALSE(Client::create(o));
}

}  // namespace
}  // namespace pvs::pve::testing
