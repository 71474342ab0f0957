// What the Stack's files share (stack_fixture.cc, stack_cluster.cc): commands that must work.
#pragma once

#include <string>
#include <vector>

namespace pvs::test::stack_detail {

// Throws std::runtime_error("stack: " + what) unless ok.
void must(bool ok, const std::string& what);
// Runs argv; throws with the command line, its status and output unless it exits 0.
void run(const std::vector<std::string>& argv);

}  // namespace pvs::test::stack_detail
