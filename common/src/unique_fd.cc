#include "pvesandbox/common/unique_fd.h"

#include <unistd.h>

namespace pvs {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close(2) releases the fd even when it reports EINTR on Linux
  fd_ = fd;
}

}  // namespace pvs
