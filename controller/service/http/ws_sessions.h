// Long-lived connections off the HTTP worker pool: terminal WebSockets, and upgraded
// connections to a sandbox's port (api/ports/). A WebSocket lives as long as a person watches
// a terminal or a page stays open, so it must not hold one of the pool's threads (a few tokens'
// terminals would fill it and nobody could approve anything): after the upgrade the handler hands
// the connection to a thread of its own here and returns its worker. Caps bound the threads: at
// most `per_token` WebSockets per token and `total` together; beyond them the upgrade answers
// 429 before anything is switched.
//
//   std::string why;
//   auto ticket = sessions.reserve(principal.name, &why);   // before the upgrade
//   if (!ticket) throw limit_exceeded(why);
//   sessions.start(std::move(*ticket), [conn] { ... }, [conn] { conn->hang_up(); });
//   ...
//   sessions.stop();  // at shutdown: hangs every session up and joins its thread
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/held_slot.h"

namespace pvs::service {

class WsSessions {
 public:
  struct Limits {
    int per_token = 16;  // WebSockets one token holds open (terminals.max_websockets_per_token)
    int total = 256;     // all tokens together (terminals.max_websockets)
  };

  // A place among the caps, held from before the upgrade until the session's thread ends.
  // Dropping an unused ticket gives the place back.
  using Ticket = HeldSlot<WsSessions, std::string>;

  explicit WsSessions(Limits limits) : limits_(limits) {}
  ~WsSessions() { stop(); }
  WsSessions(const WsSessions&) = delete;
  WsSessions& operator=(const WsSessions&) = delete;

  // nullopt, with `why` naming the cap, when `token` or everyone is at the cap, or after stop().
  std::optional<Ticket> reserve(const std::string& token, std::string* why);
  // Runs `session` on a thread of its own, holding the ticket until it returns. `hang_up` ends
  // it from outside (stop()): it must make `session` return soon, from any thread.
  void start(Ticket ticket, std::function<void()> session, std::function<void()> hang_up);
  // Refuses new sessions, hangs up every running one and joins all their threads.
  void stop();

  std::size_t active() const;                          // sessions (and reservations) now
  std::size_t active(const std::string& token) const;  // of one token

 private:
  struct Running {
    std::thread thread;
    std::function<void()> hang_up;
  };
  friend Ticket;
  void release(const std::string& token);

  const Limits limits_;
  std::atomic<bool> stopped_{false};
  mutable std::mutex counts_mu_;  // the two counts below (a Ticket's release takes only this)
  std::size_t total_ = 0;
  std::map<std::string, int> per_token_;
  std::mutex mu_;  // the sessions below
  std::condition_variable idle_;
  std::list<Running> running_;
  std::vector<std::thread> finished_threads_;  // ended sessions' threads: joined by start, stop
};

}  // namespace pvs::service
