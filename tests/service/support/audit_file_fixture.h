// A gtest fixture with an audit log's path (`path_`, audit.log) in a directory of its own under
// /tmp; TearDown removes the log, its rotated .1 and the directory.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace pvs::test {

class AuditFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(mkdtemp(dir_), nullptr);
    path_ = std::string(dir_) + "/audit.log";
  }
  void TearDown() override {
    unlink(path_.c_str());
    unlink((path_ + ".1").c_str());
    rmdir(dir_);
  }

  char dir_[64] = "/tmp/pvs-audit-XXXXXX";
  std::string path_;
};

}  // namespace pvs::test
