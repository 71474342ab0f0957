// ssh_bench's three parts and what they share: the private sshd, the session under test,
// OpenSSH's command line for the same sshd, and OpenSSH's ControlMaster.
//   ssh_bench.cc       main; 1. the exec round trip; 3. concurrent execs
//   ssh_bench_sftp.cc  2. SFTP throughput
//   ssh_bench_proc.h   clocks, processes and CPU accounting
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "pvesandbox/ssh_session.h"
#include "support/sshd_fixture.h"

namespace ssh_bench {

struct Bench {
  pvs::test::SshdFixture& sshd;
  pvs::SshConfig cfg;                 // SshSession's configuration (exec_connections = --pool)
  pvs::SshSession& session;           // the warm session under test
  int runs;                           // --runs: execs per series
  std::size_t mib;                    // --mib: the SFTP file's size (0: no SFTP)
  int rounds;                         // --rounds: rounds of 32 concurrent execs
  std::string dir, port, target;      // the sshd's directory, its port, user@host
  std::vector<std::string> ssh_opts;  // OpenSSH's options for it (key, known hosts, batch mode)
  std::string cm{};                   // the ControlMaster's socket
  pid_t master_pid = -1;              // the ControlMaster (`ssh -M`), once bench_exec started it
  bool ok = true;                     // false once a target is missed or a step failed

  // `ssh ... CMD` through the ControlMaster.
  std::vector<std::string> ssh_client(const std::string& cmd) const;
};

// 1. `true` round trip: SshSession untimed, with a 60 s timeout and with the previous
// per-command guard; the floor (a local fork+exec); `ssh` through the ControlMaster, which this
// starts for the other parts.
void bench_exec(Bench& b);
// 2. SFTP upload and download of an M MiB file: SshSession (SFTP, one exec's stdin, AES-GCM
// preferred) against `sftp` over the ControlMaster, with the CPU each side spent.
void bench_sftp(Bench& b);
// 3. 32 concurrent execs of `sleep 0.2` and of `true` on the session, and through 32 `ssh`.
void bench_concurrent(Bench& b);

}  // namespace ssh_bench
