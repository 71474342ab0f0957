// ssh_bench's clocks, processes and CPU accounting: wall time, percentiles, spawning and
// reaping, and the CPU of this process, its children and a process tree (from /proc).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace ssh_bench {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0);
double percentile(std::vector<double> v, double p);
double median(std::vector<double> v);

// argv with stdin and stdout on /dev/null and stderr into `stderr_file`; -1 if it cannot start.
pid_t spawn(const std::vector<std::string>& argv, const std::string& stderr_file = "/dev/null");
int wait_exit(pid_t pid);  // the exit status, -1 if killed
int run(const std::vector<std::string>& argv, const std::string& stderr_file = "/dev/null");

std::string read_file(const std::string& path);
// The rest of the line after the first `needle` in `text` ("?" if none).
std::string grep_line(const std::string& text, const std::string& needle);
std::string load_average();  // the three figures of /proc/loadavg

double process_cpu_ms();   // this process so far, all threads
double children_cpu_ms();  // this process's reaped children so far
// Reaps every finished child (the bench is a subreaper, so orphaned remote processes such as
// the timed exec's watchdogs end up here and their CPU time in children_cpu_ms()).
void reap_orphans();

struct TreeCpu {
  double own = 0;       // the sshd processes themselves
  double children = 0;  // processes they reaped: the login shells and what those exec'd
};
// utime+stime and cutime+cstime, in ms, of every process below `root` (exclusive).
TreeCpu tree_cpu(pid_t root);
// Everything the sshd under `root` has spent so far: its live descendants (themselves and what
// they reaped) and, through the listener's cutime, the connections that have ended.
double server_cpu_ms(pid_t root);
// The processes below `root` (exclusive), by walking parent links in /proc.
std::set<pid_t> descendants(pid_t root);
// Waits (3 s at most) until the processes below `root` are `before` again: a transfer's
// server-side process must have been reaped, so that its CPU is in its parent's cutime.
void await_tree(pid_t root, const std::set<pid_t>& before);
double own_cpu_ms(pid_t pid);  // utime + stime (ms) of one live process
// utime + stime (ms) of the live `ssh` processes this one adopted (a subreaper adopts the
// OpenSSH masters SshSession's bulk clients leave in the background), except `except`.
double adopted_ssh_cpu_ms(pid_t except);

}  // namespace ssh_bench
