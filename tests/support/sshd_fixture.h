// A private OpenSSH sshd for tests: runs as root on 127.0.0.1 on a free port, with its own
// temporary host key, config, authorized_keys and an ed25519 client key. It never touches the
// system sshd service. By default it also creates a throw-away login user whose shell is /bin/sh
// (a lean shell: a heavy .bashrc costs ~100 ms per exec) and removes it afterwards.
//
//   pvs::test::SshdFixture sshd;           // throws std::runtime_error if sshd cannot start
//   cfg.port = sshd.port(); cfg.user = sshd.user(); cfg.private_key_file = sshd.client_key_path();
//   cfg.host_key_fingerprint = sshd.host_key_fingerprint();
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/loopback.h"  // free_port()

namespace pvs::test {

struct SshdOptions {
  bool create_user = true;                       // false: log in as root (whose shell may be heavy)
  int max_sessions = 64;                         // sshd MaxSessions (channels per connection)
  std::string extra_config;                      // appended to sshd_config verbatim
  std::string sftp_subsystem = "internal-sftp";  // sshd's `Subsystem sftp` command
  std::string login_shell = "/bin/sh";           // the test user's shell (sshd runs commands in it)
};

class SshdFixture {
 public:
  explicit SshdFixture(SshdOptions options = {});
  ~SshdFixture();  // kills sshd and every process of the test user, removes user and files
  SshdFixture(const SshdFixture&) = delete;
  SshdFixture& operator=(const SshdFixture&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }  // "127.0.0.1"
  const std::string& user() const { return user_; }
  const std::string& dir() const { return dir_; }    // temp dir with keys, config, log
  const std::string& home() const { return home_; }  // the user's home (writable by it)
  const std::string& client_key_path() const { return client_key_; }
  std::string client_key_text() const;
  // "SHA256:..." of the current ed25519 host key, as `ssh-keygen -lf` prints it.
  std::string host_key_fingerprint() const;
  const std::string& known_hosts_path() const { return known_hosts_; }  // a matching file

  // Stops sshd and drops every open connection (kills the per-connection processes).
  void stop();
  // Starts it again on the same port.
  void start();
  void restart() {
    stop();
    start();
  }
  // New host key (takes effect at the next start()).
  void regenerate_host_key();
  std::string log() const;
  pid_t pid() const { return pid_; }

 private:
  void cleanup();
  void write_config();
  void write_known_hosts();

  SshdOptions options_;
  std::string host_ = "127.0.0.1";
  std::string dir_;
  std::string home_;
  std::string user_;
  bool user_created_ = false;
  std::string client_key_;
  std::string known_hosts_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// Runs argv (no shell), returns the exit status (or -1); stdout is captured into *out if given.
int run_command(const std::vector<std::string>& argv, std::string* out = nullptr);

// Adds the throw-away login user `name` (its own group, `shell`, no password, `home` not
// created); the exit status of useradd. Test users are named after their process's pid, so a
// user of that name is a leftover of a dead test process that had it: it is removed first.
int add_test_user(const std::string& name, const std::string& home,
                  const std::string& shell = "/bin/sh");

struct SpawnOptions {
  std::string stdin_file;        // "" = /dev/null
  std::string stdout_file;       // "" = /dev/null
  std::string stderr_file;       // "" = where stdout goes
  bool append = false;           // append to the output files instead of truncating them
  std::vector<std::string> env;  // "NAME=value": added to this process's environment
};

// Starts argv[0] (looked up in PATH) in the background and returns its pid, or -1. Uses
// posix_spawn: a test process has threads (pvesim, SSH sessions), and a forked child that
// allocates before exec (std::string, setenv) can deadlock on a lock another thread held.
pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// A finished process: its exit code (128 + signal if killed, 127 if it could not start) and
// what it wrote.
struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};
// Runs argv to its end with `input` on stdin and `env` added; stdout and stderr go through
// files in `dir` (so a chatty child never blocks on a pipe).
ProcessResult run_captured(const std::vector<std::string>& argv, const std::string& dir,
                           const std::string& input = "", const std::vector<std::string>& env = {});

}  // namespace pvs::test
