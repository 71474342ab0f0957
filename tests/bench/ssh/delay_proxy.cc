// The delaying relay (delay_proxy.h): per connection and direction, a reader that stamps what
// arrives and a writer that sends it on once its time has come.
#include "delay_proxy.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "support/loopback.h"

namespace ssh_bench {
namespace {

using pvs::UniqueFd;

using Clock = std::chrono::steady_clock;

struct Held {
  Clock::time_point due;
  std::string bytes;  // empty: the end of the stream
};

// One direction: `from` to `to`, each piece `delay` after it arrived.
void pump(int from, int to, std::chrono::milliseconds delay) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Held> queue;
  std::thread writer([&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !queue.empty(); });
      Held h = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      std::this_thread::sleep_until(h.due);
      if (h.bytes.empty()) break;
      for (std::size_t off = 0; off < h.bytes.size();) {
        ssize_t n = ::write(to, h.bytes.data() + off, h.bytes.size() - off);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
      }
    }
    ::shutdown(to, SHUT_WR);
  });
  std::string buf(256 << 10, '\0');
  for (;;) {
    ssize_t n = ::read(from, buf.data(), buf.size());
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(
        {Clock::now() + delay, n > 0 ? buf.substr(0, static_cast<std::size_t>(n)) : ""});
    cv.notify_one();
    if (n <= 0) break;
  }
  writer.join();
}

[[noreturn]] void serve(UniqueFd listener, std::uint16_t target, std::chrono::milliseconds delay) {
  for (;;) {
    UniqueFd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    UniqueFd server = client ? pvs::test::loopback_connect(target) : UniqueFd();
    if (!server) continue;
    for (int fd : {client.get(), server.get()}) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    std::thread([client = std::move(client), server = std::move(server), delay] {
      std::thread back([&] { pump(server.get(), client.get(), delay); });
      pump(client.get(), server.get(), delay);
      back.join();
    }).detach();
  }
}

}  // namespace

DelayProxy::DelayProxy(std::uint16_t target_port, std::chrono::milliseconds one_way) {
  UniqueFd listener = pvs::test::loopback_listen(&port_);
  if (!listener) {
    std::perror("delay proxy");
    std::exit(2);
  }
  pid_ = ::fork();
  if (pid_ == 0) serve(std::move(listener), target_port, one_way);
}

DelayProxy::~DelayProxy() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace ssh_bench
