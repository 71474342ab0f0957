// What the lxc tests that drive sandboxes through the Manager share: a command's output, trimmed,
// with its failure spelled out, so that one EXPECT_EQ shows what went wrong.
#pragma once

#include <string>

#include "pvesandbox/manager.h"

namespace pvs::lxctest {

// `s` without trailing newlines and blanks.
inline std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// stdout of `command` in the sandbox, trimmed; "<exit N: stderr>" appended when it fails,
// "<error ...>" when it could not run.
inline std::string run(Sandbox& sb, const std::string& command) {
  auto r = sb.exec(command);
  if (!r) return "<error " + r.error().message + ">";
  std::string out = trim(r->out);
  if (r->exit_code != 0) out += "<exit " + std::to_string(r->exit_code) + ": " + trim(r->err) + ">";
  return out;
}

}  // namespace pvs::lxctest
