#include "pvesandbox/common/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace pvs {
namespace {

bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

TEST(UniqueFd, ClosesOnDestruction) {
  int raw;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.get();
    ASSERT_TRUE(fd);
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, MovesOwnership) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(is_open(raw));
}

TEST(UniqueFd, ReleaseAndReset) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int raw = a.release();
  EXPECT_FALSE(a);
  EXPECT_TRUE(is_open(raw));
  a.reset(raw);
  a.reset();
  EXPECT_FALSE(is_open(raw));
}

}  // namespace
}  // namespace pvs
