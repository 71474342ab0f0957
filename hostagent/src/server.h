// The agent's unix-socket server: one thread, one epoll loop.
//
// Peers are checked with SO_PEERCRED (uid, primary gid, and supplementary groups via
// SO_PEERGROUPS) before a byte is read; refused peers get one ERR line and are closed. Every
// client has bounded input (one request line), bounded unsent output, an idle timeout, and a
// fair share of each loop turn, so a misbehaving client never disturbs the others.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::agent {

// The listening socket: inherited from systemd (LISTEN_PID/LISTEN_FDS, fd 3) or bound at
// `config.socket` (mode 0660, group `config.socket_group`).
struct Listener {
  UniqueFd fd;
  bool activated = false;  // from systemd: not ours to unlink
  std::string path;
};
Result<Listener> open_listener(const AgentConfig& config);

class Server {
 public:
  Server(Agent& agent, Listener listener);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Runs until SIGTERM/SIGINT (blocked and read through a signalfd) or stop(). Returns the exit
  // code.
  int run();
  // Thread-safe; for tests that run the server in a thread.
  void stop();

 private:
  struct Client {
    UniqueFd fd;
    Peer peer;
    std::string in;
    std::size_t consumed = 0;  // bytes of `in` already handled
    bool skipping = false;     // discarding the rest of an overlong line
    bool read_closed = false;
    bool broken = false;
    std::string out;
    std::size_t out_sent = 0;
    // OK replies in `out` (offset, length) to requests that changed the desired state; they
    // wait for this turn's persist() and become errors if it fails.
    std::vector<std::pair<std::size_t, std::size_t>> unpersisted;
    std::uint32_t events = 0;
    std::int64_t last_activity_ms = 0;
  };

  void accept_clients();
  bool peer_allowed(int fd, const Peer& peer) const;
  void read_client(Client& c);
  // Handles up to `budget` complete lines; true if complete lines remain.
  bool process_client(Client& c, int budget);
  void flush_client(Client& c);
  void update_interest(Client& c);
  void close_client(int fd);
  // Group commit of one loop turn: writes the state file once for every change the turn made,
  // before any of the turn's replies leaves. If the write fails, the OK replies to those changes
  // are turned into errors (the change is in the kernel and in memory, but not durable yet: the
  // next write retries, and the client's retry of the idempotent verb is answered once it is).
  void persist_turn(const std::vector<int>& fds);
  std::size_t pending_out(const Client& c) const { return c.out.size() - c.out_sent; }
  // The event loop's pieces: its descriptors, signals, the end of a turn (commit, replies,
  // closes), the periodic tick (drift check, idle clients) and the last replies on stop.
  Status open_loop();
  void read_signals();
  void finish_turn(const std::vector<int>& touched, std::vector<int>* ready);
  void periodic(std::int64_t now, std::vector<int>* ready);
  void drain_on_stop();

  Agent& agent_;
  Listener listener_;
  UniqueFd epoll_;
  UniqueFd signal_fd_;
  UniqueFd wake_fd_;  // eventfd for stop()
  std::map<int, Client> clients_;
  std::atomic<bool> stopping_{false};
};

}  // namespace pvs::agent
