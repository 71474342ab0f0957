#include "http/ws_sessions.h"

#include <utility>
#include <vector>

namespace pvs::service {

std::optional<WsSessions::Ticket> WsSessions::reserve(const std::string& token, std::string* why) {
  std::lock_guard lock(counts_mu_);
  if (stopped_) {
    *why = "the controller is stopping";
    return std::nullopt;
  }
  if (limits_.total > 0 && total_ >= static_cast<std::size_t>(limits_.total)) {
    *why = std::to_string(limits_.total) +
           " terminal WebSockets are open on this controller (terminals.max_websockets)";
    return std::nullopt;
  }
  int& mine = per_token_[token];
  if (limits_.per_token > 0 && mine >= limits_.per_token) {
    *why = "token " + token + " has " + std::to_string(limits_.per_token) +
           " terminal WebSockets open (terminals.max_websockets_per_token)";
    return std::nullopt;
  }
  ++mine;
  ++total_;
  return Ticket(this, token);
}

void WsSessions::release(const std::string& token) {
  std::lock_guard lock(counts_mu_);
  --total_;
  auto it = per_token_.find(token);
  if (it != per_token_.end() && --it->second <= 0) per_token_.erase(it);
}

void WsSessions::start(Ticket ticket, std::function<void()> session,
                       std::function<void()> hang_up) {
  std::vector<std::thread> ended;
  std::function<void()> late;  // started while stop() ran: hung up at once
  {
    std::lock_guard lock(mu_);
    ended.swap(finished_threads_);
    if (stopped_) late = hang_up;
    running_.push_back(Running{{}, std::move(hang_up)});
    auto it = std::prev(running_.end());
    // The thread's last step takes mu_, so it cannot move its handle before this assignment.
    try {
      it->thread =
          std::thread([this, it, t = std::move(ticket), run = std::move(session)]() mutable {
            try {
              run();
            } catch (...) {  // a session's failure ends that session only
            }
            { Ticket done = std::move(t); }  // the place is free before the thread is reaped
            std::lock_guard reap(mu_);
            finished_threads_.push_back(std::move(it->thread));
            running_.erase(it);
            idle_.notify_all();
          });
    } catch (...) {  // no thread: the ticket went with the lambda (counts_mu_, not mu_)
      running_.erase(it);
      throw;
    }
  }
  if (late) late();
  for (auto& t : ended) t.join();  // ended already: joining does not wait
}

void WsSessions::stop() {
  std::vector<std::function<void()>> hang_ups;
  {
    std::lock_guard lock(mu_);  // start() reads stopped_ under mu_ too: one of us hangs up
    stopped_ = true;
    for (auto& r : running_) hang_ups.push_back(r.hang_up);
  }
  for (auto& h : hang_ups) h();
  std::vector<std::thread> ended;
  {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return running_.empty(); });
    ended.swap(finished_threads_);
  }
  for (auto& t : ended) t.join();
}

std::size_t WsSessions::active() const {
  std::lock_guard lock(counts_mu_);
  return total_;
}

std::size_t WsSessions::active(const std::string& token) const {
  std::lock_guard lock(counts_mu_);
  auto it = per_token_.find(token);
  return it == per_token_.end() ? 0 : static_cast<std::size_t>(it->second);
}

}  // namespace pvs::service
