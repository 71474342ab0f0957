// Unit tests of the SSH client's pure helpers (no server needed).
#include <gtest/gtest.h>

#include "../../controller/src/ssh/session_impl.h"
#include "pvesandbox/ssh_session.h"

namespace pvs {
namespace {

using ssh_detail::build_remote_command;
using ssh_detail::cipher_preference;
using ssh_detail::format_sha256_fingerprint;
using ssh_detail::private_key_type;
using ssh_detail::shell_quote;

TEST(SshUtil, FingerprintIsUnpaddedBase64) {
  // 32 zero bytes -> 43 'A' characters (no '=' padding), as ssh-keygen prints.
  EXPECT_EQ(format_sha256_fingerprint(std::string(32, '\0')), "SHA256:" + std::string(43, 'A'));
  EXPECT_EQ(format_sha256_fingerprint("abc"), "SHA256:YWJj");
  EXPECT_EQ(format_sha256_fingerprint("ab"), "SHA256:YWI");
}

// libssh2 1.11.1's list as Debian 13 builds it (its default order: chacha20-poly1305 first) and
// 1.10's (neither chacha20-poly1305 nor AES-GCM).
TEST(SshUtil, CipherPreferencePutsChachaThenAesGcmFirstWhereTheLibraryHasThem) {
  const std::vector<std::string> v1_11 = {"aes256-ctr",
                                          "aes256-gcm@openssh.com",
                                          "chacha20-poly1305@openssh.com",
                                          "aes128-gcm@openssh.com",
                                          "aes128-ctr",
                                          "aes256-cbc"};
  EXPECT_EQ(cipher_preference(v1_11),
            "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,"
            "aes256-ctr,aes128-ctr,aes256-cbc");
  EXPECT_EQ(cipher_preference({"aes128-gcm@openssh.com", "aes256-ctr"}),
            "aes128-gcm@openssh.com,aes256-ctr");
  // None of them in the library: its own order, unchanged.
  EXPECT_EQ(cipher_preference({"aes128-ctr", "aes192-ctr", "aes256-ctr", "aes256-cbc"}),
            "aes128-ctr,aes192-ctr,aes256-ctr,aes256-cbc");
  EXPECT_EQ(cipher_preference({}), "");
  // SshConfig::prefer_ciphers: those the library has, in the order given, each once; then the rest.
  EXPECT_EQ(cipher_preference(v1_11,
                              "aes128-gcm@openssh.com,none-such,aes256-ctr,aes128-gcm@openssh.com"),
            "aes128-gcm@openssh.com,aes256-ctr,aes256-gcm@openssh.com,"
            "chacha20-poly1305@openssh.com,aes128-ctr,aes256-cbc");
  // Nothing the library has: its own order.
  EXPECT_EQ(cipher_preference(v1_11, ",,"),
            "aes256-ctr,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,"
            "aes128-gcm@openssh.com,aes128-ctr,aes256-cbc");
}

TEST(SshUtil, ShellQuote) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(SshUtil, KeyTypeOfOpenSshKeys) {
  // Public halves of real keys (ssh-keygen), with private parts that do not matter here: the
  // type is read from the unencrypted public key inside the container.
  const char* ed25519 =
      "-----BEGIN OPENSSH PRIVATE KEY-----\n"
      "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
      "QyNTUxOQAAACDzWJ4dmP5J0Xo8sS5dC3Yx6Y1vJ0Wm3Y2S8cF6Zt4yOQAAAJhf0Q8MX9EP\n"
      "-----END OPENSSH PRIVATE KEY-----\n";
  auto t = private_key_type(ed25519);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(*t, "ssh-ed25519");
  EXPECT_EQ(*private_key_type("-----BEGIN RSA PRIVATE KEY-----\nxx\n-----END RSA PRIVATE KEY-----"),
            "ssh-rsa");
  EXPECT_EQ(*private_key_type("-----BEGIN EC PRIVATE KEY-----\nxx\n-----END EC PRIVATE KEY-----"),
            "ecdsa");
  auto bad = private_key_type("hello");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().ssh, SshErrc::kKeyInvalid);
  auto garbage = private_key_type(
      "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n");
  ASSERT_FALSE(garbage);
}

TEST(SshUtil, RemoteCommandPlain) {
  auto c = build_remote_command("echo hi", {});
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, "echo hi");
}

TEST(SshUtil, RemoteCommandWithEnvCwdTimeout) {
  ExecOptions o;
  o.env = {{"A", "x y"}, {"B_2", "it's"}};
  o.cwd = "/tmp/a b";
  o.timeout = std::chrono::seconds(5);
  auto c = build_remote_command("run", o);
  ASSERT_TRUE(c);
  EXPECT_NE(c->find("printf '\\036pvs:%s\\036' \"$$\" >&2\n"), std::string::npos);
  EXPECT_NE(c->find("cd -- '/tmp/a b' || exit 126\n"), std::string::npos);
  EXPECT_NE(c->find("export A='x y'\n"), std::string::npos);
  EXPECT_NE(c->find("export B_2='it'\\''s'\n"), std::string::npos);
  // Nothing runs beside the command (the session's watchdog guards it, docs/ssh.md): the
  // marker, cd, env, and the command inline and last, so that the shell can exec it (exit codes
  // and signals as without a timeout).
  EXPECT_EQ(*c,
            "printf '\\036pvs:%s\\036' \"$$\" >&2\ncd -- '/tmp/a b' || exit 126\n"
            "export A='x y'\nexport B_2='it'\\''s'\nrun");
}

TEST(SshUtil, RemoteCommandRejectsBadInput) {
  ExecOptions o;
  o.env = {{"1BAD", "x"}};
  auto c = build_remote_command("true", o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().ssh, SshErrc::kInvalidArgument);
  o.env = {{"A;rm", "x"}};
  EXPECT_FALSE(build_remote_command("true", o));
  EXPECT_FALSE(build_remote_command(std::string("a\0b", 3), {}));
}

TEST(SshUtil, CappedBufferKeepsHeadAndTail) {
  ssh_detail::CappedBuffer small(10);
  small.append("abc");
  EXPECT_FALSE(small.truncated());
  EXPECT_EQ(small.take(), "abc");

  ssh_detail::CappedBuffer b(10);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    std::string chunk(static_cast<std::size_t>(i % 7 + 1), static_cast<char>('a' + i % 26));
    b.append(chunk);
    all += chunk;
  }
  EXPECT_TRUE(b.truncated());
  EXPECT_EQ(b.total(), all.size());
  EXPECT_EQ(b.take(), all.substr(0, 5) + all.substr(all.size() - 5));

  ssh_detail::CappedBuffer exact(6);
  exact.append("abcdef");
  EXPECT_FALSE(exact.truncated());
  EXPECT_EQ(exact.take(), "abcdef");

  ssh_detail::CappedBuffer big_chunk(4);
  big_chunk.append("0123456789");
  EXPECT_EQ(big_chunk.take(), "0189");
}

TEST(SshUtil, ErrorsConvertToPvsResult) {
  Result<int> r = ssh_fail(SshErrc::kHostKeyMismatch, "bad key");
  Result<int> generic = r;
  ASSERT_FALSE(generic);
  EXPECT_EQ(generic.error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(generic.error().message, "bad key");
  EXPECT_EQ(to_string(SshErrc::kHostKeyMismatch), "host_key_mismatch");
}

}  // namespace
}  // namespace pvs
