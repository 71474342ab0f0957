// SshSession's connection against a real OpenSSH sshd: host key policies, authentication and
// connect errors, reconnects, leaks, keepalives, and the ciphers it negotiates.
#include "ssh_session_fixture.h"
#include "support/loopback.h"

namespace pvs {
namespace {

TEST_F(SshSessionTest, HostKeyPolicies) {
  {
    auto c = config();
    c.host_key_fingerprint = "SHA256:" + std::string(43, 'A');
    SshSession s(c);
    auto r = s.exec("true");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kHostKeyMismatch);
    EXPECT_FALSE(s.is_connected());
  }
  {
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kKnownHosts;
    c.known_hosts_file = sshd_->known_hosts_path();
    SshSession s(c);
    EXPECT_TRUE(s.connect());
    EXPECT_EQ(s.host_key_fingerprint(), sshd_->host_key_fingerprint());
  }
  {
    // known_hosts listing a different key for this host:port.
    const std::string other = sshd_->dir() + "/other_known_hosts";
    std::ofstream(other)
        << "[127.0.0.1]:" << sshd_->port()
        << " ssh-ed25519 "
           "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n";
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kKnownHosts;
    c.known_hosts_file = other;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kHostKeyMismatch);
    // And a file that does not know the host at all.
    std::ofstream(other, std::ios::trunc) << "[127.0.0.1]:1 ssh-ed25519 "
                                             "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabg"
                                             "H5C9okWi0dh2l9GKJl\n";
    SshSession s2(c);
    auto r2 = s2.connect();
    ASSERT_FALSE(r2);
    EXPECT_EQ(r2.error().ssh, SshErrc::kHostKeyUnknown);
  }
  {
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kInsecure;
    c.host_key_fingerprint.clear();
    SshSession s(c);
    EXPECT_TRUE(s.connect());
  }
}

TEST_F(SshSessionTest, TrustOnFirstUseRefusesAChangedKey) {
  const std::string file = sshd_->dir() + "/tofu_known_hosts";
  auto c = config();
  c.host_key_policy = HostKeyPolicy::kTrustOnFirstUse;
  c.host_key_fingerprint.clear();
  SshSession memory(c);  // remembered in the session
  c.known_hosts_file = file;
  SshSession persisted(c);  // remembered in a file
  ASSERT_TRUE(memory.connect());
  ASSERT_TRUE(persisted.connect());
  EXPECT_EQ(memory.host_key_fingerprint(), sshd_->host_key_fingerprint());
  {
    SshSession again(c);  // a new session trusts what the file remembers
    EXPECT_TRUE(again.connect());
  }
  sshd_->stop();
  sshd_->regenerate_host_key();
  sshd_->start();
  auto r1 = memory.exec("true");
  ASSERT_FALSE(r1);
  EXPECT_EQ(r1.error().ssh, SshErrc::kHostKeyMismatch);
  auto r2 = persisted.exec("true");
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().ssh, SshErrc::kHostKeyMismatch);
  SshSession fresh(c);
  auto r3 = fresh.connect();
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().ssh, SshErrc::kHostKeyMismatch);
}

TEST_F(SshSessionTest, AuthenticationErrors) {
  const std::string other = sshd_->dir() + "/other_ed25519";
  ASSERT_EQ(test::run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other}), 0);
  {
    auto c = config();
    c.private_key_file = other;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kAuthFailed);
  }
  {
    const std::string rsa = sshd_->dir() + "/rsa_key";
    ASSERT_EQ(
        test::run_command({"ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", rsa}), 0);
    auto c = config();
    c.private_key_file = rsa;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kKeyUnsupported);
    EXPECT_NE(r.error().message.find("ed25519"), std::string::npos);
  }
  {
    auto c = config();
    c.private_key_file.clear();
    c.private_key = sshd_->client_key_text();  // from memory works too
    SshSession s(c);
    EXPECT_TRUE(s.connect());
  }
  {
    auto c = config();
    c.private_key_file = sshd_->dir() + "/does-not-exist";
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kKeyInvalid);
  }
}

TEST_F(SshSessionTest, ConnectErrors) {
  // Refused: a port nobody listens on (bound to reserve it, not listening).
  std::uint16_t port = 0;
  UniqueFd fd = test::loopback_listen(&port, 0);
  ASSERT_TRUE(fd);
  {
    auto c = config();
    c.port = port;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kConnectRefused);
  }
  // Timeout: the port accepts TCP but never speaks SSH.
  ASSERT_EQ(::listen(fd.get(), 4), 0);
  {
    auto c = config();
    c.port = port;
    c.connect_timeout = 500ms;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    // The peer never speaks: only the timeout can end the connect.
    EXPECT_EQ(r.error().ssh, SshErrc::kConnectTimeout);
  }
}

TEST_F(SshSessionTest, ReconnectsAfterSshdRestart) {
  SshSession s(config());
  EXPECT_EQ(run(s, "echo one").out, "one\n");
  EXPECT_EQ(s.stats().connects, 1u);
  sshd_->restart();
  // The next call notices the dead connection and reconnects transparently.
  EXPECT_EQ(run(s, "echo two").out, "two\n");
  EXPECT_EQ(s.stats().connects, 2u);
  EXPECT_TRUE(s.is_connected());
  // While sshd is down: a clean error, then recovery once it is back.
  sshd_->stop();
  auto down = s.exec("true");
  ASSERT_FALSE(down);
  EXPECT_TRUE(down.error().ssh == SshErrc::kConnectRefused ||
              down.error().ssh == SshErrc::kDisconnected)
      << down.error().to_string();
  sshd_->start();
  EXPECT_EQ(run(s, "echo three").out, "three\n");
  s.close();
  EXPECT_FALSE(s.is_connected());
  EXPECT_EQ(run(s, "echo four").out, "four\n");  // usable after close()
}

TEST_F(SshSessionTest, NoLeakedFdsOrThreads) {
  const int fds0 = count_dir("/proc/self/fd");
  const int threads0 = count_dir("/proc/self/task");
  for (int round = 0; round < 3; ++round) {
    SshSession s(config());
    EXPECT_EQ(run(s, "echo x").out, "x\n");
    ASSERT_TRUE(s.upload(sshd_->home() + "/leak.txt", "data"));
    ASSERT_TRUE(s.download(sshd_->home() + "/leak.txt"));
    ExecOptions o;
    o.timeout = 200ms;
    EXPECT_TRUE(run(s, "sleep 999", o).timed_out);      // only the timeout can end it
    EXPECT_GT(count_dir("/proc/self/task"), threads0);  // the I/O thread runs
  }
  EXPECT_EQ(count_dir("/proc/self/fd"), fds0);
  EXPECT_EQ(count_dir("/proc/self/task"), threads0);
}

TEST_F(SshSessionTest, KeepaliveDoesNotLeak) {
  auto c = config();
  c.keepalive_interval = 2s;
  SshSession s(c);
  ASSERT_TRUE(s.connect());
  EXPECT_EQ(run(s, "true").exit_code, 0);
  // Counted in keepalives sent, not in seconds slept: one to settle, then two more.
  ASSERT_TRUE(eventually([&] { return s.stats().keepalives_sent >= 1; }));
  auto before = s.stats();
  ASSERT_TRUE(eventually([&] { return s.stats().keepalives_sent >= before.keepalives_sent + 2; }));
  auto after = s.stats();
  EXPECT_LE(after.libssh2_live_allocations, before.libssh2_live_allocations)
      << "libssh2 keeps allocating per keepalive (want_reply=1 leak?)";
  EXPECT_EQ(run(s, "echo alive").out, "alive\n");
}

std::vector<std::string> library_ciphers() {
  LIBSSH2_SESSION* s = libssh2_session_init();
  const char** algs = nullptr;
  int n = libssh2_session_supported_algs(s, LIBSSH2_METHOD_CRYPT_CS, &algs);
  std::vector<std::string> out;
  if (n > 0) out.assign(algs, algs + n);
  if (algs != nullptr) libssh2_free(s, static_cast<void*>(algs));
  libssh2_session_free(s);
  return out;
}

std::string negotiated_cipher(const SshSession& s) {
  const std::string m = s.stats().methods;
  auto at = m.find("cipher=");
  if (at == std::string::npos) return "";
  at += 7;
  return m.substr(at, m.find(' ', at) - at);
}

SshConfig fixture_config(const SshdFixture& sshd) {
  SshConfig c = test::client_config(sshd);
  return c;
}

// OpenSSH's sshd offers chacha20-poly1305 and AES-GCM by default: the client's order decides,
// so a libssh2 that has chacha20-poly1305 (1.11) negotiates it, one without (1.10) its own
// first cipher, as before; SshConfig::prefer_ciphers picks AES-GCM where the library has it.
TEST_F(SshSessionTest, NegotiatesChachaWhereTheLibraryHasItOrWhatIsPreferred) {
  const auto lib = library_ciphers();
  ASSERT_FALSE(lib.empty());
  auto has = [&](const char* m) { return std::find(lib.begin(), lib.end(), m) != lib.end(); };
  SshSession s(config());
  ASSERT_EQ(run(s, "echo ok").out, "ok\n");
  EXPECT_EQ(negotiated_cipher(s),
            has("chacha20-poly1305@openssh.com") ? "chacha20-poly1305@openssh.com" : lib.front())
      << libssh2_version(0) << ": " << s.stats().methods;
  SshConfig c = config();
  c.prefer_ciphers = "aes256-gcm@openssh.com";
  SshSession gcm(c);
  ASSERT_EQ(run(gcm, "echo ok").out, "ok\n");
  EXPECT_EQ(negotiated_cipher(gcm),
            has("aes256-gcm@openssh.com") ? "aes256-gcm@openssh.com" : lib.front())
      << libssh2_version(0) << ": " << gcm.stats().methods;
}

// A server that offers neither chacha20-poly1305 nor AES-GCM: the first of the rest in the
// library's order that it offers,
// and exec and SFTP work as before.
TEST(SshSessionCiphers, ServerWithOnlyAesCtrGetsTheLibraryOrder) {
  test::SshdOptions opts;
  opts.extra_config = "Ciphers aes256-ctr,aes128-ctr\n";
  SshdFixture sshd(opts);
  SshSession s(fixture_config(sshd));
  auto r = s.exec("echo ok");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->out, "ok\n");
  std::string expected;
  for (const auto& c : library_ciphers()) {
    if (c == "aes256-ctr" || c == "aes128-ctr") {
      expected = c;
      break;
    }
  }
  EXPECT_EQ(negotiated_cipher(s), expected) << s.stats().methods;
  ASSERT_TRUE(s.upload(sshd.home() + "/f", "x"));
  EXPECT_EQ(*s.download(sshd.home() + "/f"), "x");
}

}  // namespace
}  // namespace pvs
