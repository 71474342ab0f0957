// What the netns backend used to ask of `ip netns exec`, `ip netns pids`, `sh` and `mount`, done
// in this process: each CT start and stop ran about twenty short programs, and in the test suite
// (thousands of CTs per run) their exec and dynamic linking were a tenth of its CPU.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pvesim::detail {

// The processes whose network namespace is /run/netns/<ns> (what `ip netns pids` prints).
std::vector<pid_t> pids_in_netns(const std::string& ns);

// Starts argv[0] (a path; no PATH search) as `ip netns exec <ns>` would: in the namespace, in a
// mount namespace of its own whose "/" is a slave, with a /sys of the namespace and each entry
// of /etc/netns/<ns> bound over its /etc twin. With `private_tmp`, /tmp is a 64 MiB tmpfs of
// its own into which the directory `keep` (an absolute path under /tmp) is bound back. stdin is
// /dev/null, stdout and stderr `out_fd` (-1: /dev/null). Returns the pid (it keeps it across
// exec) or -1; a step that fails in the child exits it with 127 after a line on stderr.
pid_t spawn_in_netns(const std::string& ns, const std::vector<std::string>& argv, bool private_tmp,
                     const std::string& keep, int out_fd);

// `ip -n <ns> -batch -` with `commands` on its stdin, one per line; its exit status, and its
// output in *out.
int ip_batch(const std::string& ns, const std::vector<std::string>& commands, std::string* out);

}  // namespace pvesim::detail
