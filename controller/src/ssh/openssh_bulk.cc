// Bulk bytes through OpenSSH's own client (openssh_bulk.h).
#include "openssh_bulk.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "pvesandbox/common/log.h"

namespace pvs::ssh_detail {
namespace {

constexpr std::size_t kBuffer = 256 << 10;
// What the remote login shell may print before the token (a chatty rc file) is dropped, up to
// this; more and the transfer does not start.
constexpr std::size_t kMaxBeforeToken = 64 << 10;
constexpr std::size_t kErrTail = 2048;

// The key type named at the start of an SSH wire-format key ("ssh-ed25519", ...), or "".
std::string key_type(std::string_view blob) {
  if (blob.size() < 4) return "";
  std::size_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(blob[i]);
  if (n == 0 || n > 64 || blob.size() < 4 + n) return "";
  std::string name(blob.substr(4, n));
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '@' || c == '.'))
      return "";
  }
  return name;
}

// AES-GCM in libcrypto on a CPU with AES instructions is the cheapest cipher per byte for both
// ends; elsewhere OpenSSH's own order (chacha20-poly1305 first) stays.
bool cpu_has_aes() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#else
  return false;
#endif
}

// The child and its three pipes; killed and reaped if still there when this goes.
class Child {
 public:
  Child(BulkClients& clients, std::uint64_t epoch) : clients_(clients), epoch_(epoch) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    for (int* fd : {&in, &out, &err}) close_fd(*fd);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      (void)reap();
    }
  }
  void registered() { clients_.add(pid, epoch_); }
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // The wait status.
  int reap() {
    killed_by_close = clients_.remove(pid);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    return status;
  }
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
  bool killed_by_close = false;

 private:
  BulkClients& clients_;
  const std::uint64_t epoch_;
};

// Starts argv[0] (searched in PATH when it has no '/') with pipes for stdin (when `input`),
// stdout and stderr; errno's text when it cannot.
std::string spawn(const std::vector<std::string>& argv, const std::string& home, bool input,
                  Child& child) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if ((input && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return strerror(e);
  }
  // Larger pipes for the bytes: fewer wake-ups of either side (the default is 64 KiB). Pipes
  // count against the user's pipe-user-pages-soft (64 MiB): 256 KiB each leaves room for
  // over a hundred transfers at once.
  for (int fd : {in[1], out[0]}) {
    if (fd >= 0) (void)::fcntl(fd, F_SETPIPE_SZ, 256 << 10);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (input) {
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string env_home = "HOME=" + home;
  char path_var[] = "PATH=/usr/bin:/bin";
  char lang[] = "LC_ALL=C";
  char* env[] = {path_var, env_home.data(), lang, nullptr};
  const bool search = argv[0].find('/') == std::string::npos;
  int rc = search ? posix_spawnp(&child.pid, args[0], &fa, &attr, args.data(), env)
                  : posix_spawn(&child.pid, args[0], &fa, &attr, args.data(), env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  for (int fd : {in[0], out[1], err[1]}) {
    if (fd >= 0) ::close(fd);
  }
  child.in = in[1];
  child.out = out[0];
  child.err = err[0];
  if (rc != 0) {
    child.pid = -1;
    return strerror(rc);
  }
  child.registered();
  for (int fd : {child.in, child.out, child.err}) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return "";
}

// How long a session goes over SFTP after a client that did not start.
constexpr auto kPauseAfterFailure = std::chrono::seconds(60);

// Why bulk transfers are not going through the client: said once per process, then quietly;
// the session that saw it goes over SFTP for a while.
void not_started(BulkClients& clients, const std::string& why) {
  clients.pause(Clock::now() + kPauseAfterFailure);
  static std::atomic<bool> said{false};
  const std::string text = "ssh: bulk transfers go over SFTP: " + why;
  if (!said.exchange(true)) {
    log::warn(text);
  } else {
    log::debug(text);
  }
}

// The argument vector for `remote` (a POSIX shell command) on the peer; nullopt, with `why`, on
// a setting the client could not be given safely (the caller goes over SFTP).
std::optional<std::vector<std::string>> client_argv(const BulkPeer& peer, const std::string& dir,
                                                    const std::string& remote, std::string& why) {
  const SshConfig& c = peer.config;
  const std::string type = key_type(peer.host_key);
  if (type.empty()) return why = "no host key to pin", std::nullopt;
  // The master and the key it pins are of one connection: each their own name.
  const std::string control = peer.clients.control(peer.key_from);
  const std::string known =
      write_private_file(dir, BulkClients::of_connection("known_hosts", peer.key_from),
                         "pvs-bulk " + type + " " + base64(peer.host_key) + "\n");
  std::string key = c.private_key_file;
  if (key.empty()) {
    // OpenSSH wants the END line's newline, which libssh2 does without.
    std::string text = c.private_key;
    if (!text.empty() && text.back() != '\n') text += '\n';
    key = write_private_file(dir, "id", text);
  }
  if (known.empty() || key.empty()) return why = "cannot write its files", std::nullopt;
  // The client expands % and ~ in these paths; ours never have them, an operator's might.
  for (const std::string* p : {&known, static_cast<const std::string*>(&key), &control}) {
    if (p->find_first_of("%\"\\\n") != std::string::npos || p->front() != '/')
      return why = "a key path it would expand (" + *p + ")", std::nullopt;
  }
  const std::string algorithms = type == "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256" : type;
  const auto secs = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(c.connect_timeout).count());
  std::vector<std::string> argv = {c.bulk_client, "-F", "/dev/null", "-T", "-x",
                                   "-a",          "-e", "none",      "-i", key};
  const std::vector<std::string> options = {
      "BatchMode=yes",
      "IdentitiesOnly=yes",
      "IdentityAgent=none",
      "UserKnownHostsFile=\"" + known + "\"",
      "GlobalKnownHostsFile=/dev/null",
      "HostKeyAlias=pvs-bulk",
      "StrictHostKeyChecking=yes",
      "UpdateHostKeys=no",
      "CheckHostIP=no",
      "HostKeyAlgorithms=" + algorithms,
      "ConnectTimeout=" + std::to_string(secs),
      "ServerAliveInterval=15",
      "ServerAliveCountMax=4",
      "ClearAllForwardings=yes",
      "ControlMaster=auto",
      "ControlPath=\"" + control + "\"",
      "ControlPersist=" + std::to_string(kMasterPersistSeconds),
      "ProxyCommand=none",
      "ProxyJump=none",
      "PermitLocalCommand=no",
      "Compression=no",
      "LogLevel=ERROR"};
  for (const auto& o : options) argv.insert(argv.end(), {"-o", o});
  if (std::string ciphers = bulk_cipher_preference(); !ciphers.empty()) {
    argv.insert(argv.end(), {"-o", "Ciphers=" + ciphers});
  }
  argv.insert(argv.end(), {"-p", std::to_string(c.port), "-l", c.user, "--", c.host, remote});
  return argv;
}

// SIGPIPE held back on this thread while it writes to the child (a child that died makes the
// write fail with EPIPE instead); one raised meanwhile is taken before it is let through.
class SigpipeHeld {
 public:
  SigpipeHeld() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeHeld() {
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeHeld(const SigpipeHeld&) = delete;
  SigpipeHeld& operator=(const SigpipeHeld&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// One run of the client: `feed` gives the bytes for the remote command's stdin (none when
// empty), `sink` takes its stdout after the token.
struct Run {
  const BulkPeer& peer;
  std::string what;  // "upload /path", for messages
  Source feed;
  Sink sink;
  std::uint64_t max_size = UINT64_MAX;
  Clock::time_point deadline = Clock::time_point::max();
  std::string path;  // the remote file
};

int millis_until(Clock::time_point t) {
  if (t == Clock::time_point::max()) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms + 1, 0, 60000));
}

// Drives the child to its end. nullopt: it ended (or was stopped) before the token.
class Driver {
 public:
  Driver(Run& run, Child& child, std::string token)
      : run_(run), child_(child), token_(std::move(token)) {}

  Result<std::optional<std::uint64_t>> drive() {
    // Until the token: twice connect_timeout (and never past the transfer's own deadline).
    const auto started_by =
        std::min(run_.deadline, Clock::now() + 2 * run_.peer.config.connect_timeout);
    std::vector<char> buf(kBuffer);
    std::string_view pending;
    bool fed = !run_.feed;
    while (child_.out >= 0 || child_.err >= 0) {
      if (started_ && !fed && pending.empty() && child_.in >= 0) {
        auto n = run_.feed(buf.data(), buf.size());
        if (!n) return tl::unexpected<Error>(n.error());
        fed_bytes_ += *n;
        if (*n == 0) {
          fed = true;
          Child::close_fd(child_.in);
        }
        pending = std::string_view(buf.data(), *n);
      }
      pollfd fds[3] = {
          {child_.in, static_cast<short>(started_ && !pending.empty() ? POLLOUT : 0), 0},
          {child_.out, POLLIN, 0},
          {child_.err, POLLIN, 0}};
      // Checked on every pass: a peer that keeps sending something (a byte of stderr now and
      // then, a trickle of the file) must not hold the transfer past its deadline.
      const auto deadline = started_ ? run_.deadline : started_by;
      if (Clock::now() >= deadline) {
        if (!started_) return stopped("no token within twice connect_timeout");
        return ssh_fail(SshErrc::kTimeout, run_.what + ": not done within its timeout");
      }
      int rc = ::poll(fds, 3, millis_until(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return ssh_fail(SshErrc::kLocalIo, run_.what + ": poll: " + strerror(errno));
      if (fds[0].revents != 0 && !write_some(pending)) Child::close_fd(child_.in);
      if (fds[2].revents != 0) read_err();
      if (fds[1].revents != 0) {
        if (auto st = read_out(); !st) return tl::unexpected<Error>(st.error());
      }
      if (!started_ && child_.out < 0) return stopped("it ended before the transfer began");
    }
    if (!fed && started_) Child::close_fd(child_.in);
    return finish(fed);
  }

 private:
  // False when the child's stdin is gone (its exit status says why).
  bool write_some(std::string_view& pending) {
    ssize_t n = ::write(child_.in, pending.data(), pending.size());
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    pending.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }

  void read_err() {
    char b[4096];
    ssize_t n = ::read(child_.err, b, sizeof b);
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) Child::close_fd(child_.err);
      return;
    }
    err_.append(b, static_cast<std::size_t>(n));
    if (err_.size() > 2 * kErrTail) err_.erase(0, err_.size() - kErrTail);
  }

  Status read_out() {
    char b[kBuffer / 4];
    ssize_t n = ::read(child_.out, b, sizeof b);
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) Child::close_fd(child_.out);
      return {};
    }
    std::string_view got(b, static_cast<std::size_t>(n));
    if (!started_) {
      before_.append(got);
      const std::size_t at = before_.find(token_);
      if (at == std::string::npos) {
        if (before_.size() > kMaxBeforeToken) Child::close_fd(child_.out);
        return {};
      }
      started_ = true;
      std::string rest = before_.substr(at + token_.size());
      before_.clear();
      return deliver(rest);
    }
    return deliver(got);
  }

  Status deliver(std::string_view data) {
    if (data.empty()) return {};
    if (!run_.sink) return ssh_fail(SshErrc::kProtocol, run_.what + ": unexpected output");
    total_ += data.size();
    if (total_ > run_.max_size) {
      return ssh_fail(SshErrc::kTooLarge,
                      run_.what + ": larger than " + std::to_string(run_.max_size) + " bytes");
    }
    return run_.sink(data);
  }

  Result<std::optional<std::uint64_t>> stopped(const std::string& why) {
    Child::close_fd(child_.in);
    ::kill(child_.pid, SIGKILL);
    (void)child_.reap();
    if (child_.killed_by_close) return closed();
    not_started(run_.peer.clients, why + (err_.empty() ? "" : ": " + tail()));
    return std::optional<std::uint64_t>();
  }

  Result<std::optional<std::uint64_t>> finish(bool fed) {
    const int status = child_.reap();
    if (child_.killed_by_close) return closed();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && fed) {
      return std::optional<std::uint64_t>(run_.sink ? total_ : fed_bytes_);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 255) {
      // The client's own failure (its connection, the master, a remote command killed by a
      // signal): the session's connection may be fine, so not kDisconnected (the caller still
      // removes what the upload left).
      return ssh_fail(SshErrc::kNetwork, run_.what + ": the bulk client failed: " + tail());
    }
    return ssh_fail(rename_error_kind(err_), run_.what + ": " + tail());
  }

  tl::unexpected<Error> closed() const {
    return ssh_fail(SshErrc::kClosed, run_.what + ": ssh session closed");
  }

  std::string tail() const {
    std::string t = err_.size() > kErrTail ? err_.substr(err_.size() - kErrTail) : err_;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    return t.empty() ? "no message" : t;
  }

  Run& run_;
  Child& child_;
  const std::string token_;
  bool started_ = false;
  std::string before_, err_;
  std::uint64_t total_ = 0, fed_bytes_ = 0;
};

// Runs `prepare`, then prints the token, then `command` (POSIX shell, on the peer).
Result<std::optional<std::uint64_t>> run_client(Run& run, const std::string& prepare,
                                                const std::string& command) {
  const std::uint64_t epoch = run.peer.clients.epoch();
  // A relative path is SFTP's (its start is sftp-server's directory, which a login shell's rc
  // file may not share).
  if (run.path.empty() || run.path.front() != '/' || run.peer.clients.paused())
    return std::optional<std::uint64_t>();
  const std::string dir = run.peer.clients.dir(run.peer.config.bulk_client);
  if (dir.empty()) {
    not_started(run.peer.clients, std::string("no private directory: ") + strerror(errno));
    return std::optional<std::uint64_t>();
  }
  const std::string token = "pvs-bulk-" + random_hex(24) + "\n";
  const std::string remote =
      prepare + " && printf '%s\\n' " + token.substr(0, token.size() - 1) + " && " + command;
  std::string why;
  auto argv = client_argv(run.peer, dir, remote, why);
  if (!argv) {
    not_started(run.peer.clients, why);
    return std::optional<std::uint64_t>();
  }
  Child child(run.peer.clients, epoch);
  if (std::string e = spawn(*argv, dir, static_cast<bool>(run.feed), child); !e.empty()) {
    not_started(run.peer.clients, "cannot run " + run.peer.config.bulk_client + ": " + e);
    return std::optional<std::uint64_t>();
  }
  SigpipeHeld held;
  return Driver(run, child, token).drive();
}

}  // namespace

BulkPeer bulk_peer(SshSession::Impl& session) {
  auto [key, from] = session.host_key();
  return {session.config(), std::move(key), from, session.bulk_clients()};
}

std::string bulk_cipher_preference() {
  return cpu_has_aes() ? "^aes128-gcm@openssh.com,aes256-gcm@openssh.com" : "";
}

bool bulk_enabled(const SshConfig& config) {
  return !config.bulk_client.empty() && config.transfer_chunk > 0 && config.passphrase.empty();
}

Result<std::optional<std::uint64_t>> bulk_upload(const BulkPeer& peer, const std::string& path,
                                                 std::string_view head, const Source& rest) {
  auto first = std::make_shared<std::size_t>(0);
  Run run{peer, "upload " + path, nullptr, nullptr, UINT64_MAX, Clock::time_point::max(), path};
  run.feed = [head, first, &rest](char* buf, std::size_t n) -> Result<std::size_t> {
    if (*first < head.size()) {
      const std::size_t k = std::min(n, head.size() - *first);
      std::memcpy(buf, head.data() + *first, k);
      *first += k;
      return k;
    }
    return rest(buf, n);
  };
  // The file (which SFTP made empty) is open before the token, without truncating it and
  // only if it is there: a shell that reaches the open late (after its client was given up,
  // while SFTP writes the file instead) neither empties what SFTP wrote nor, but for the
  // instant between the test and the open, makes the name again after its removal.
  const std::string file = shell_quote(path);
  return run_client(run, "[ -f " + file + " ] && exec 3<> " + file, "exec cat >&3 3>&-");
}

Result<std::optional<std::uint64_t>> bulk_download(const BulkPeer& peer, const std::string& path,
                                                   const Sink& sink,
                                                   const DownloadOptions& options) {
  Run run{peer, "download " + path, nullptr, sink, options.max_size, Clock::time_point::max(),
          path};
  if (options.timeout < std::chrono::hours(24 * 366)) run.deadline = Clock::now() + options.timeout;
  return run_client(run, "true", "exec cat -- " + shell_quote(path));
}

}  // namespace pvs::ssh_detail
