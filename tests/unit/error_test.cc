#include "pvesandbox/common/error.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace pvs {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return fail(ErrorCode::kInvalidArgument, "odd");
  return x / 2;
}

Status check(bool ok) {
  if (!ok) return fail(ErrorCode::kConflict, "locked");
  return {};
}

TEST(Error, ResultCarriesValueOrError) {
  EXPECT_EQ(*half(8), 4);
  auto r = half(3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().to_string(), "invalid_argument: odd");
}

TEST(Error, StatusIsVoidResult) {
  EXPECT_TRUE(check(true));
  EXPECT_EQ(check(false).error().code, ErrorCode::kConflict);
}

TEST(Error, CodesHaveStableNames) {
  EXPECT_EQ(to_string(ErrorCode::kNotFound), "not_found");
  EXPECT_EQ(to_string(ErrorCode::kTooLarge), "too_large");
  EXPECT_EQ(to_string(ErrorCode::kTimeout), "timeout");
}

TEST(Error, ErrnoError) {
  Error e = errno_error("open /x", ENOENT);
  EXPECT_EQ(e.code, ErrorCode::kIo);
  EXPECT_EQ(e.message, "open /x: No such file or directory");
}

}  // namespace
}  // namespace pvs
