// The pve-sandbox-agent binary end to end, as above: its clients (peer credentials, malformed
// input, concurrency, limits, socket activation, the relay), its configuration check, and that
// no acknowledged change is lost (kill -9, a full file system).
#include "agent/agent_server_fixture.h"

#include "support/eventually.h"

namespace pvs::test {
namespace {

std::string reply_as(const std::string& socket, uid_t uid, gid_t gid) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "<pipe>";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(3);
    int fd = connect_fd(socket);
    if (fd < 0) ::_exit(4);
    (void)::send(fd, "STATUS\n", 7, MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);  // no more requests: the agent answers, then closes
    char buf[256];
    std::string got;
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<std::size_t>(n));
    (void)::write(pipe_fds[1], got.data(), got.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "<child failed " + std::to_string(WEXITSTATUS(status)) + ">";
  }
  return out;
}

TEST_F(AgentServerTest, PeersAreCheckedWithSoPeercred) {
  group* nogroup = ::getgrnam("nogroup");
  passwd* nobody = ::getpwnam("nobody");
  ASSERT_TRUE(nogroup != nullptr && nobody != nullptr) << "needs the nobody user and nogroup";
  uid_t uid = nobody->pw_uid;
  gid_t gid = nogroup->gr_gid;
  start("allowed_uids: [0]\n");
  // The socket group gives `nobody` the file permission; SO_PEERCRED must still refuse it.
  ASSERT_EQ(::chown(agent_->socket().c_str(), 0, gid), 0);
  EXPECT_EQ(reply_as(agent_->socket(), uid, gid), "ERR 403 not authorized\n");
  EXPECT_NE(agent_->log_text().find("refused peer uid=" + std::to_string(uid)), std::string::npos);
  LineClient root(agent_->socket());
  EXPECT_EQ(root.call("LIST"), "OK 0");  // and root is fine
  agent_->stop();

  // Allowed by group instead.
  agent_.reset();
  std::filesystem::remove(dir_.file("agent.yaml"));
  start("allowed_uids: []\nallowed_gids: [" + std::to_string(gid) + "]\n");
  ASSERT_EQ(::chown(agent_->socket().c_str(), 0, gid), 0);
  std::string reply = reply_as(agent_->socket(), uid, gid);
  EXPECT_TRUE(reply.starts_with("OK table=present")) << reply;
  LineClient root2(agent_->socket());
  EXPECT_EQ(root2.read_line(), "ERR 403 not authorized");  // root is not in the list now
}

TEST_F(AgentServerTest, MalformedInputIsAnsweredWhileAnotherClientKeepsWorking) {
  start();
  std::atomic<bool> done{false};
  std::atomic<int> good{0}, bad{0};
  std::thread other([&] {
    LineClient c(agent_->socket());
    while (!done) {
      (c.call("ALLOW 10.99.7.7") == "OK" ? good : bad)++;
      (c.call("LIST").starts_with("OK ") ? good : bad)++;
    }
  });

  // The other client's progress is awaited, not assumed: it has answers before the
  // malformed input starts and more after the pipelined batch ends.
  ASSERT_TRUE(test::eventually([&] { return good >= 2; }, 10s)) << good.load();

  LineClient c(agent_->socket());
  // Overlong line: 413, and the connection carries on with the next line.
  c.send_raw(std::string(70 * 1024, 'A') + "\nHELLO 1\n");
  EXPECT_EQ(c.read_line(), "ERR 413 line longer than 65536 bytes");
  EXPECT_EQ(c.read_line(), "OK pve-sandbox-agent " PVS_VERSION " proto=1");
  // NUL bytes and binary garbage.
  c.send_raw(std::string("ALLOW 10.99.0.5\0\n", 17));
  EXPECT_EQ(c.read_line(), "ERR 400 NUL byte at offset 15");
  std::string garbage;
  for (int i = 0; i < 4096; ++i)
    garbage += static_cast<char>((i * 7919 + 13) % 256 == '\n' ? 0 : (i * 7919 + 13) % 256);
  c.send_raw(garbage + "\n");
  auto reply = c.read_line();
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->starts_with("ERR 400")) << *reply;
  EXPECT_TRUE(c.call("ALLOW  10.99.0.5").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("allow 10.99.0.5").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("ALLOW 10.99.0.5\r").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("ALLOW 010.99.0.5").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("ALLOW 10.99.0.5 ttl=0").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("").starts_with("ERR 400"));

  // A partial line, then disconnect.
  {
    LineClient partial(agent_->socket());
    partial.send_raw("ALLOW 10.99.");
  }
  // 1,000 requests pipelined in one write: 1,000 replies, in order.
  std::string batch;
  for (int i = 0; i < 1000; ++i) {
    batch +=
        (i % 2 == 0 ? "ALLOW 10.99.8." : "REVOKE 10.99.8.") + std::to_string(i % 250 + 2) + "\n";
  }
  c.send_raw(batch);
  int oks = 0;
  for (int i = 0; i < 1000; ++i) {
    auto line = c.read_line();
    ASSERT_TRUE(line) << "reply " << i << " missing";
    if (*line == "OK") ++oks;
  }
  EXPECT_EQ(oks, 1000);
  EXPECT_EQ(c.call("HELLO 1"), "OK pve-sandbox-agent " PVS_VERSION " proto=1");
  const int before = good.load();
  EXPECT_TRUE(test::eventually([&] { return good >= before + 2; }, 10s)) << good.load();

  done = true;
  other.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(AgentServerTest, SyncIsAtomicForAConcurrentList) {
  start();
  // Two disjoint sets of 3,000 addresses each (one SYNC line is about 36 KiB).
  std::string sync_a = "SYNC", sync_b = "SYNC";
  for (std::uint32_t i = 0; i < 3000; ++i) {
    sync_a += " " + Ipv4Address(0x0a630100u + i).to_string();
    sync_b += " " + Ipv4Address(0x0a632100u + i).to_string();
  }
  LineClient writer(agent_->socket());
  ASSERT_EQ(writer.call(sync_a), "OK 3000");
  std::atomic<bool> done{false};
  std::atomic<int> lists{0}, torn{0};
  std::thread reader([&] {
    LineClient c(agent_->socket());
    while (!done) {
      std::string list = c.call("LIST", 10000);
      if (!list.starts_with("OK 3000 10.99.1.0 ") && !list.starts_with("OK 3000 10.99.33.0 ")) {
        ++torn;
      }
      ++lists;
    }
  });
  // nft's own listing is no outside witness here: a set of 3,000 elements comes back over
  // several netlink messages, and that dump is not a snapshot of one generation (a full run saw
  // one listing of five that was neither set while nft reported success), although each commit
  // is atomic for the packet path. What nft can check is where the syncs end.
  // Each sync waits for a listing that ended after the sync before, so the reader's LISTs
  // interleave with the writer's SYNCs by construction, not by the scheduler's luck.
  int seen = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(test::eventually([&] { return lists > seen; }, 10s)) << lists.load();
    seen = lists.load();
    ASSERT_EQ(writer.call(i % 2 == 0 ? sync_b : sync_a, 10000), "OK 3000");
  }
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0) << "LIST replies that were neither set, of " << lists.load();
  // The last sync was sync_a: the kernel's set is exactly it.
  const std::string listing = "nft list set inet sandbox internet_allowed | grep -o ";
  EXPECT_EQ(std::stoi(ns_.output(listing + "\"10\\.99\\.[0-9]*\\.[0-9]*\" | sort -u | wc -l")),
            3000);
  EXPECT_EQ(std::stoi(ns_.output(listing + "\"10\\.99\\.33\\.[0-9]*\" | wc -l")), 0);
}

TEST_F(AgentServerTest, HundredConcurrentClients) {
  start("max_clients: 128\n");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&, i] {
      try {
        LineClient c(agent_->socket());
        std::string address = "10.99.5." + std::to_string(i + 2);
        if (c.call("HELLO 1").rfind("OK", 0) != 0) ++failures;
        if (c.call("ALLOW " + address + " ttl=600") != "OK") ++failures;
        if (c.call("LIST").find(address) == std::string::npos) ++failures;
        if (c.call("REVOKE " + address) != "OK") ++failures;
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("LIST"), "OK 0");
}

TEST_F(AgentServerTest, MaxClientsIsBounded) {
  start("max_clients: 2\n");
  LineClient a(agent_->socket());
  // Waits (however long the machine takes) until the agent has dropped the readiness probe's
  // connection: `a` is then its only client.
  auto clients = [&] {
    std::string status = a.call("STATUS");
    auto fields = proto::parse_status_payload(status.starts_with("OK ") ? status.substr(3) : "");
    return fields ? std::string(proto::find_field(*fields, "clients").value_or("?")) : "?";
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (clients() != "1" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(clients(), "1");
  LineClient b(agent_->socket());
  EXPECT_EQ(a.call("LIST"), "OK 0");
  EXPECT_EQ(b.call("LIST"), "OK 0");
  LineClient third(agent_->socket());
  EXPECT_EQ(third.read_line(), "ERR 500 too many clients");
  EXPECT_EQ(a.call("LIST"), "OK 0");
}

TEST_F(AgentServerTest, IdleClientsAreClosed) {
  start("idle_timeout_seconds: 1\n");
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("LIST"), "OK 0");
  // The agent closes the client (EOF, not merely silence) after the idle timeout; the bound
  // only keeps a failure from hanging.
  EXPECT_TRUE(c.wait_closed(30'000)) << "the agent did not close the idle client";
  EXPECT_FALSE(c.read_line(0).has_value());  // and it said nothing before closing
}

TEST_F(AgentServerTest, SocketActivation) {
  // Bind the socket ourselves, as systemd would, and pass it as fd 3.
  std::string path = dir_.file("activated.sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  // The config names another path: it must never be created while the passed socket answers.
  pid_t child = ::fork();
  if (child == 0) {
    int ns = ::open(ns_.path().c_str(), O_RDONLY);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(120);
    std::ofstream(dir_.file("activated.yaml"))
        << "socket: " << dir_.file("unused.sock") << "\nsocket_group: \"\"\n"
        << "sandbox_cidr: 10.99.0.0/16\nstate_file: " << dir_.file("state2") << "\n";
    ::dup2(fd, 3);
    ::setenv("LISTEN_FDS", "1", 1);
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    int log = ::open(dir_.file("activated.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, 2);
    std::string config = dir_.file("activated.yaml");
    ::execl(PVS_AGENT_BINARY, PVS_AGENT_BINARY, "--config", config.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fd);
  std::string reply;
  for (int i = 0; i < 300 && reply.empty(); ++i) {
    int c = connect_fd(path);
    if (c >= 0) {
      ::close(c);
      LineClient lc(path);
      reply = lc.call("HELLO 1");
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(reply, "OK pve-sandbox-agent " PVS_VERSION " proto=1");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("unused.sock")));
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The activated socket belongs to systemd: the agent must not unlink it.
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST_F(AgentServerTest, RelayCopiesStdinAndStdout) {
  start();
  std::string out =
      shell_output("printf 'HELLO 1\\nALLOW 10.99.0.5\\nLIST\\n' | " +
                   std::string(PVS_AGENT_BINARY) + " relay --socket " + agent_->socket());
  EXPECT_EQ(out, "OK pve-sandbox-agent " PVS_VERSION " proto=1\nOK\nOK 1 10.99.0.5\n");
}

TEST_F(AgentServerTest, CheckConfigGivesPreciseMessages) {
  std::string bad = dir_.file("bad.yaml");
  std::ofstream(bad) << "sandbox_cidr: 10.99.0.0/16\ngateway: 10.98.0.1\n";
  int status = 0;
  std::string out =
      shell_output(std::string(PVS_AGENT_BINARY) + " check-config --config " + bad, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find(bad + ":2: gateway: 10.98.0.1 is not a host address"), std::string::npos)
      << out;
  std::ofstream(bad) << "sandbox_cidr: 10.99.0.0/16\nmax_elemnts: 5\n";
  out = shell_output(std::string(PVS_AGENT_BINARY) + " check-config --config " + bad, &status);
  EXPECT_NE(out.find(":2: max_elemnts: unknown key"), std::string::npos) << out;
  std::ofstream(bad) << "sandbox_cidr: 10.99.0.0/16\n";
  out = shell_output(std::string(PVS_AGENT_BINARY) + " check-config --config " + bad, &status);
  EXPECT_EQ(status, 0) << out;
}

// The addresses of a LIST reply ("OK <n> <ipv4>[@<s>] ...").
std::set<std::string> listed_addresses(const std::string& list) {
  std::set<std::string> out;
  std::size_t pos = list.find(' ', 3);
  while (pos != std::string::npos) {
    std::size_t next = list.find(' ', pos + 1);
    std::string item = list.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
    out.insert(item.substr(0, item.find('@')));
    pos = next;
  }
  return out;
}

// Crash safety with the default durability (state_fsync: true): the agent is SIGKILLed while
// two clients have pipelined changes in flight, so some of them are applied in the kernel but
// not yet answered. After a restart (and a "reboot" of the kernel's set) every change that was
// answered OK is there, exactly: no acknowledged ALLOW lost, no acknowledged REVOKE resurrected.
//
// The kill lands mid-stream by construction, however fast the machine: each client keeps at most
// kWindow requests unanswered, and the kill comes once the adder has a chosen number of answers
// (different each round), so the agent never sees the end of either stream before it dies.
TEST_F(AgentServerTest, KillDashNineNeverLosesAnAcknowledgedChange) {
  start("state_fsync: true\n");
  constexpr int kPerRound = 250;
  constexpr std::size_t kWindow = 24;
  std::string sync = "SYNC";
  std::set<std::string> initial;
  for (int i = 0; i < 3 * kPerRound; ++i) {
    std::string a =
        "10.99." + std::to_string(100 + i / kPerRound) + "." + std::to_string(1 + i % kPerRound);
    initial.insert(a);
    sync += " " + a;
  }
  {
    LineClient c(agent_->socket());
    ASSERT_EQ(c.call(sync), "OK " + std::to_string(3 * kPerRound));
  }
  // One client's stream: requests sent ahead of the answers, at most kWindow of them.
  struct Stream {
    LineClient& client;
    std::vector<std::string> addresses;
    std::string verb;
    std::set<std::string>* acked;
    std::size_t sent = 0, answered = 0;
    void top_up() {
      std::string batch;
      for (; sent < addresses.size() && sent < answered + kWindow; ++sent) {
        batch += verb + " " + addresses[sent] + "\n";
      }
      if (!batch.empty()) client.send_raw(batch);
    }
    // Takes the next answer (waiting up to `timeout_ms`) and those already buffered behind it.
    // False on EOF or timeout.
    bool take(int timeout_ms) {
      auto line = client.read_line(timeout_ms);
      if (!line) return false;
      for (; line; line = client.read_line(0)) {
        EXPECT_EQ(*line, "OK");
        if (*line != "OK" || answered >= sent) return false;
        acked->insert(addresses[answered++]);
      }
      return true;
    }
  };
  std::set<std::string> acked_allow, acked_revoke, sent_allow;
  for (int round = 0; round < 3; ++round) {
    const std::size_t kill_after = 30 + 70 * static_cast<std::size_t>(round);  // 30, 100, 170
    LineClient adder(agent_->socket()), revoker(agent_->socket());
    Stream add{adder, {}, "ALLOW", &acked_allow}, rev{revoker, {}, "REVOKE", &acked_revoke};
    for (int i = 0; i < kPerRound; ++i) {
      add.addresses.push_back("10.99." + std::to_string(10 + round) + "." + std::to_string(1 + i));
      rev.addresses.push_back("10.99." + std::to_string(100 + round) + "." + std::to_string(1 + i));
    }
    while (add.answered < kill_after) {
      add.top_up();
      rev.top_up();
      pollfd fds[2] = {{adder.fd(), POLLIN, 0}, {revoker.fd(), POLLIN, 0}};
      ASSERT_GT(::poll(fds, 2, 5000), 0) << "no answer in 5 s";
      if (fds[0].revents != 0) {
        ASSERT_TRUE(add.take(2000)) << "adder's stream broke";
      }
      if (fds[1].revents != 0) {
        ASSERT_TRUE(rev.take(2000)) << "revoker's stream broke";
      }
    }
    add.top_up();  // both pipelines full as the kill lands
    rev.top_up();
    const std::size_t add_sent = add.sent, rev_sent = rev.sent;
    sent_allow.insert(add.addresses.begin(),
                      add.addresses.begin() + static_cast<std::ptrdiff_t>(add_sent));
    agent_->kill_now();
    while (add.take(2000)) {
    }
    while (rev.take(2000)) {
    }
    std::printf("round %d: killed after %zu of %zu sent ALLOWs and %zu of %zu REVOKEs answered\n",
                round, add.answered, add_sent, rev.answered, rev_sent);
    // Mid-stream, whatever the machine's speed: the adder never sent the end of its stream.
    EXPECT_LT(add_sent, static_cast<std::size_t>(kPerRound));
    EXPECT_LE(add.answered, add_sent);
    // "Reboot": the kernel's set is emptied; only the state file can bring the grants back.
    ns_.run("nft flush set inet sandbox internet_allowed");
    agent_->start();
    LineClient c(agent_->socket());
    std::set<std::string> now = listed_addresses(c.call("LIST"));
    for (const auto& a : acked_allow) EXPECT_TRUE(now.contains(a)) << "lost acknowledged " << a;
    for (const auto& a : acked_revoke) {
      EXPECT_FALSE(now.contains(a)) << "resurrected acknowledged revoke " << a;
    }
    // Nothing that was never asked for.
    for (const auto& a : now) EXPECT_TRUE(sent_allow.contains(a) || initial.contains(a)) << a;
  }
}

// A tmpfs of the test's own, unmounted (lazily) on destruction.
class SmallFs {
 public:
  SmallFs(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path_);
    must_run("mount -t tmpfs -o size=" + size + ",mode=0755 pvs-agent-test " + path_);
  }
  ~SmallFs() { (void)shell_output("umount -l " + path_); }
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;

 private:
  std::string path_;
};

// When the state file cannot be written (here: its filesystem is full), a change is applied but
// answered ERR 500, never OK; read-only verbs keep working; once the disk has room again the
// next change writes the whole state and a crash afterwards loses nothing.
TEST_F(AgentServerTest, NoOkForAChangeTheStateFileCannotKeep) {
  std::string mnt = dir_.file("statefs");
  SmallFs fs(mnt, "256k");
  start("state_fsync: true\nstate_file: " + mnt + "/agent-state\n");
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("ALLOW 10.99.0.5"), "OK");
  (void)shell_output("dd if=/dev/zero of=" + mnt + "/filler bs=4k count=1000");  // ENOSPC
  // A SYNC of 300 addresses: its journal record needs new pages of the full filesystem.
  std::string sync = "SYNC";
  for (int i = 0; i < 300; ++i) {
    sync += " 10.99." + std::to_string(3 + i / 200) + "." + std::to_string(1 + i % 200);
  }
  std::string reply = c.call(sync);
  EXPECT_TRUE(reply.starts_with("ERR 500 change applied but not saved")) << reply;
  reply = c.call("ALLOW 10.99.0.9");
  EXPECT_TRUE(reply.starts_with("ERR 500")) << reply;
  auto listed = listed_addresses(c.call("LIST"));  // read-only verbs keep working
  EXPECT_EQ(listed.size(), 301u);
  EXPECT_TRUE(listed.contains("10.99.0.9") && listed.contains("10.99.4.100"));
  EXPECT_NE(c.call("STATUS").find(" state=error"), std::string::npos);
  std::filesystem::remove(mnt + "/filler");
  EXPECT_EQ(c.call("ALLOW 10.99.0.10"), "OK");
  EXPECT_NE(c.call("STATUS").find(" state=ok"), std::string::npos);
  agent_->kill_now();
  ns_.run("nft flush set inet sandbox internet_allowed");
  agent_->start();
  LineClient after(agent_->socket());
  listed = listed_addresses(after.call("LIST"));
  EXPECT_EQ(listed.size(), 302u);
  EXPECT_TRUE(listed.contains("10.99.0.9") && listed.contains("10.99.0.10") &&
              listed.contains("10.99.3.1") && !listed.contains("10.99.0.5"));
  agent_.reset();  // stopped before the tmpfs goes away
}

}  // namespace
}  // namespace pvs::test
