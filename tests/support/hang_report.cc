// A test that hangs is killed by ctest at its TIMEOUT, and its log then ends wherever it stood:
// nothing says which thread waited on what. Linked into every GoogleTest program
// (tests/CMakeLists.txt, pvs_add_gtest): when PVS_HANG_REPORT_AFTER (seconds; pvs_add_gtest
// sets it to three quarters of the TIMEOUT) passes and the program still runs, it writes to
// stderr, once, what tests/support/hang-report prints about it: the process tree below it with
// each process's state and kernel stack, and every thread's backtrace (gdb). Without the
// variable nothing starts.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

extern char** environ;

namespace {

void report(int after_seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(after_seconds));
  std::string pid = std::to_string(::getpid());
  std::string after = std::to_string(after_seconds);
  char sh[] = "/bin/sh";
  std::string script = PVS_HANG_REPORT_SCRIPT;
  char* argv[] = {sh, script.data(), pid.data(), after.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  pid_t child = -1;
  if (posix_spawn(&child, sh, &fa, nullptr, argv, environ) == 0) ::waitpid(child, nullptr, 0);
  posix_spawn_file_actions_destroy(&fa);
}

[[maybe_unused]] const bool started = [] {
  const char* v = std::getenv("PVS_HANG_REPORT_AFTER");
  int after = v ? std::atoi(v) : 0;
  // Detached: it only sleeps, and dies with the process when the test ends first.
  if (after > 0) std::thread(report, after).detach();
  return after > 0;
}();

}  // namespace
