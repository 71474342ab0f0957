// secure_random_bytes (random.h): getrandom(2), retried on EINTR and short reads, an error
// (never a weaker source) on any other failure, and no file descriptor needed.
#include "pvesandbox/common/random.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace pvs {
namespace {

TEST(SecureRandom, GivesTheBytesAskedAndNeverTheSameTwice) {
  auto a = secure_random_bytes(32), b = secure_random_bytes(32);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(secure_random_hex(16, "a test").size(), 32u);
  EXPECT_EQ(secure_random_hex(16, "a test").find_first_not_of("0123456789abcdef"),
            std::string::npos);
  auto none = secure_random_bytes(0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

int calls = 0;

// Interrupted once, then a byte at a time.
ssize_t interrupted_then_short(void* buf, std::size_t len, unsigned) {
  if (calls++ == 0) {
    errno = EINTR;
    return -1;
  }
  if (len == 0) return 0;
  static_cast<unsigned char*>(buf)[0] = static_cast<unsigned char>(calls);
  return 1;
}

ssize_t broken(void*, std::size_t, unsigned) {
  errno = ENOSYS;
  return -1;
}

ssize_t nothing(void*, std::size_t, unsigned) {
  return 0;
}

TEST(SecureRandom, RetriesInterruptionsAndShortReads) {
  calls = 0;
  auto r = random_detail::secure_random_bytes_with(4, interrupted_then_short);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, std::string("\x02\x03\x04\x05", 4));
  EXPECT_EQ(calls, 5);
}

TEST(SecureRandom, FailsClosed) {
  auto r = random_detail::secure_random_bytes_with(32, broken);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find("getrandom"), std::string::npos) << r.error().message;
  auto zero = random_detail::secure_random_bytes_with(32, nothing);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kIo);
}

// Every descriptor taken (the limit below the lowest free one): /dev/urandom cannot be opened,
// and the bytes still come, from the kernel's generator rather than a fallback.
TEST(SecureRandom, NeedsNoFileDescriptor) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit none = saved;
  none.rlim_cur = 0;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  int open_errno = errno;
  auto bytes = secure_random_bytes(32);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(open_errno, EMFILE);
  ASSERT_TRUE(bytes) << bytes.error().message;
  EXPECT_EQ(bytes->size(), 32u);
}

TEST(SecureRandom, OrThrowNamesWhatHadNoBytes) {
  EXPECT_EQ(secure_random_or_throw(8, "a test").size(), 8u);
}

}  // namespace
}  // namespace pvs
