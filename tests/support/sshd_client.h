// The client side of SshdFixture (sshd_fixture.h): an SshConfig that logs in to it as its user
// with its client key, pinned to its host key, connecting within 5 s.
//
//   pvs::test::SshdFixture sshd;
//   pvs::SshSession session(pvs::test::client_config(sshd));
#pragma once

#include <chrono>

#include "pvesandbox/ssh_session.h"
#include "support/sshd_fixture.h"

namespace pvs::test {

inline SshConfig client_config(const SshdFixture& sshd) {
  SshConfig c;
  c.host = sshd.host();
  c.port = sshd.port();
  c.user = sshd.user();
  c.private_key_file = sshd.client_key_path();
  c.host_key_policy = HostKeyPolicy::kPinned;
  c.host_key_fingerprint = sshd.host_key_fingerprint();
  c.connect_timeout = std::chrono::seconds(5);
  return c;
}

}  // namespace pvs::test
