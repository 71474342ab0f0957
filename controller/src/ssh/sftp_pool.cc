// The session's pool of SFTP instances (I/O thread): an op borrows one for its whole duration
// (libssh2 keeps per-instance state), opens a new one while under max_sftp_channels, and gives
// it back; one left with a request in flight is discarded; an idle one gives way to a command
// at the channel limit. Ops are in ssh_sftp_ops.cc.
#include <algorithm>

#include "session_impl.h"

namespace pvs {

Result<int> SshSession::Impl::acquire_sftp(const Op* op) {
  // An op that began opening an instance finishes that first, even when another instance
  // came free meanwhile: libssh2 keeps the half-done init in the session, and the opener (which
  // every channel open waits for) is released only when the init ends.
  if (opener_ != op) {
    if (int idle = idle_sftp(); idle >= 0) {
      sftp_slots_[static_cast<std::size_t>(idle)].busy = true;
      return idle;
    }
    // Discarded instances do not count here (a tenant's stuck sftp-server must not stop the
    // session's transfers); their channels still count against the channel limit until closed.
    const auto live = std::count_if(sftp_slots_.begin(), sftp_slots_.end(),
                                    [](const SftpSlot& s) { return s.sftp != nullptr; });
    if (live >= std::max(1, config_.max_sftp_channels)) return -1;
    if (sftp_refused_ && release_epoch_ == sftp_refused_epoch_ && Clock::now() < sftp_retry_at_) {
      return -1;
    }
    sftp_refused_ = false;
    if (opener_ != nullptr) return -1;
    if (!try_reserve_channel()) {
      if (!spares_.empty()) {  // give a spare exec channel's slot to SFTP
        adopt_zombie(take_spare());
      }
      return -1;
    }
    opener_ = op;
  }
  LIBSSH2_SFTP* sftp = libssh2_sftp_init(session_);
  if (sftp == nullptr) {
    int rc = libssh2_session_last_errno(session_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return -1;
    release_opener(op);
    release_channel();
    Error e = ssh_detail::session_error(session_, rc, "sftp subsystem");
    if (ssh_detail::is_fatal_session_error(rc)) {
      fatal(e);
      return -1;
    }
    if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && refusal_is_busy(sftp_lag_retries_)) {
      sftp_refused_ = true;
      sftp_refused_epoch_ = release_epoch_;
      sftp_retry_at_ = Clock::now() + std::chrono::milliseconds(20);
      return -1;
    }
    return tl::unexpected<Error>(std::move(e));
  }
  release_opener(op);
  sftp_lag_retries_ = 0;
  for (std::size_t i = 0; i < sftp_slots_.size(); ++i) {
    if (sftp_slots_[i].sftp == nullptr) {
      sftp_slots_[i] = SftpSlot{sftp, true};
      return static_cast<int>(i);
    }
  }
  sftp_slots_.push_back(SftpSlot{sftp, true});
  return static_cast<int>(sftp_slots_.size() - 1);
}

void SshSession::Impl::release_sftp(int slot) {
  if (slot >= 0 && static_cast<std::size_t>(slot) < sftp_slots_.size()) {
    sftp_slots_[static_cast<std::size_t>(slot)].busy = false;
  }
}

bool SshSession::Impl::reclaim_idle_sftp() {
  if (!sftp_zombies_.empty()) return false;  // one at a time: that one's channel comes free
  int idle = idle_sftp();
  if (idle >= 0) discard_sftp(idle);
  return idle >= 0;
}

int SshSession::Impl::idle_sftp() const {
  for (std::size_t i = 0; i < sftp_slots_.size(); ++i) {
    if (sftp_slots_[i].sftp != nullptr && !sftp_slots_[i].busy) return static_cast<int>(i);
  }
  return -1;
}

void SshSession::Impl::discard_sftp(int slot) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= sftp_slots_.size()) return;
  auto& s = sftp_slots_[static_cast<std::size_t>(slot)];
  if (s.sftp != nullptr) sftp_zombies_.push_back(s.sftp);
  s = SftpSlot{};
}

}  // namespace pvs
