// What the Stack's files share (stack_fixture.cc, stack_cluster.cc): commands that must work.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pvs::test::stack_detail {

// Throws std::runtime_error("stack: " + what) unless ok.
void must(bool ok, const std::string& what);
// Runs argv; throws with the command line, its status and output unless it exits 0.
void run(const std::vector<std::string>& argv);
// Sends `sig` to *pid (if running), reaps it and sets *pid to -1.
void end_process(pid_t* pid, int sig);
// The file's contents ("" if it cannot be read).
std::string slurp(const std::string& path);

}  // namespace pvs::test::stack_detail
