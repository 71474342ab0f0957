#include "resolver_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pvesandbox/common/protocol.h"

namespace pvs::resolver::testing {
namespace {

sockaddr_in loopback(const std::string& ip, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
  return sa;
}

bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
}

}  // namespace

FakeAgent::FakeAgent(std::string path) : path_(std::move(path)) {
  listen_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path_.c_str(), sizeof(sa.sun_path) - 1);
  ::unlink(path_.c_str());
  ::bind(listen_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  ::chmod(path_.c_str(), 0666);
  ::listen(listen_.get(), 128);
  std::lock_guard lock(mutex_);
  threads_.emplace_back([this] {
    while (!stop_) {
      if (!wait_readable(listen_.get(), std::chrono::milliseconds(50))) continue;
      UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd) continue;
      ++connections_;
      std::lock_guard inner(mutex_);
      threads_.emplace_back([this, f = std::move(fd)]() mutable { serve(std::move(f)); });
    }
  });
}

FakeAgent::~FakeAgent() {
  stop_ = true;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  std::lock_guard lock(mutex_);  // threads started while joining
  for (auto& t : threads_) t.join();
  ::unlink(path_.c_str());
}

void FakeAgent::serve(UniqueFd fd) {
  std::string in;
  while (!stop_) {
    if (!wait_readable(fd.get(), std::chrono::milliseconds(50))) continue;
    char buf[4096];
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) return;
    in.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    std::string out;
    while ((nl = in.find('\n')) != std::string::npos) {
      std::string line = in.substr(0, nl);
      in.erase(0, nl + 1);
      ++requests_;
      if (line.rfind("ASK ", 0) == 0) {
        std::string name = line.substr(line.rfind(' ') + 1);
        bool no = name.rfind("no", 0) == 0;
        proto::AskAnswer answer{true, {80}, name};  // listed as itself
        if (no) answer = {false, {}, ""};
        out += proto::format_ok(proto::format_ask_payload(answer)) + "\n";
      } else if (line.rfind("ELOG ", 0) == 0) {
        auto parsed = proto::parse_egress_log(line);
        if (parsed) {
          std::lock_guard lock(mutex_);
          log_.push_back(std::move(*parsed));
        }
        out +=
            (parsed ? proto::format_ok()
                    : proto::format_error(proto::ReplyCode::kBadRequest, parsed.error().message)) +
            "\n";
      } else if (line.rfind("PAIR ", 0) == 0) {
        out += proto::format_ok("1") + "\n";
      } else {
        out += proto::format_ok() + "\n";
      }
    }
    if (!out.empty()) ::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL);
  }
}

std::vector<proto::EgressLogLine> FakeAgent::log() {
  std::lock_guard lock(mutex_);
  return log_;
}

FakeUpstream::FakeUpstream(std::string held_prefix) : held_prefix_(std::move(held_prefix)) {
  fd_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa = loopback("127.0.0.1", 0);
  ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { serve(); });
}

FakeUpstream::~FakeUpstream() {
  stop_ = true;
  thread_.join();
}

void FakeUpstream::serve() {
  while (!stop_) {
    if (!wait_readable(fd_.get(), std::chrono::milliseconds(50))) continue;
    std::uint8_t buf[4096];
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    ssize_t n =
        ::recvfrom(fd_.get(), buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) continue;
    auto query = dns::parse_query({buf, static_cast<std::size_t>(n)}, nullptr);
    if (!query) continue;
    dns::Record a{query->name, dns::kTypeA, dns::kClassIn,
                  60,          "",          *Ipv4Address::parse("198.51.100.1")};
    auto reply = dns::build_answer(*query, dns::Rcode::kNoError, {a}, 60, 512);
    std::lock_guard lock(mutex_);
    asked_.push_back(query->name);
    if (query->name.rfind(held_prefix_, 0) == 0) {
      auto* raw = reinterpret_cast<const std::uint8_t*>(&from);
      held_.push_back(Held{reply, {raw, raw + sizeof(from)}});
    } else {
      ::sendto(fd_.get(), reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
    changed_.notify_all();
  }
}

std::vector<std::string> FakeUpstream::asked() {
  std::lock_guard lock(mutex_);
  return asked_;
}

bool FakeUpstream::wait_asked(std::size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return asked_.size() >= n; });
}

void FakeUpstream::release(std::size_t n) {
  std::lock_guard lock(mutex_);
  if (n == 0 || n > held_.size()) n = held_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Held& h = held_[i];
    ::sendto(fd_.get(), h.reply.data(), h.reply.size(), 0,
             reinterpret_cast<const sockaddr*>(h.to.data()), sizeof(sockaddr_in));
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
}

std::string resolver_binary() {
  const char* env = std::getenv("PVS_RESOLVER_BIN");
  return env != nullptr && *env != '\0' ? env : PVS_RESOLVER_BIN;
}

std::uint16_t free_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa = loopback("127.0.0.1", 0);
    ::bind(udp.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    socklen_t len = sizeof(sa);
    ::getsockname(udp.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::bind(tcp.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      return ntohs(sa.sin_port);
    }
  }
  return 0;
}

ResolverProcess::ResolverProcess(const std::string& dir, const FakeAgent& agent,
                                 const FakeUpstream& upstream, const std::string& extra) {
  port_ = free_port();
  std::string config = dir + "/resolver.yaml";
  std::ofstream(config) << "listen: 127.0.0.1\nport: " << port_
                        << (extra.find("sandbox_cidr:") == std::string::npos
                                ? "\nsandbox_cidr: 127.0.0.0/8"
                                : "")
                        << "\nupstreams: [\"127.0.0.1:" << upstream.port()
                        << "\"]\nagent_socket: " << agent.path()
                        << "\nqueries_per_second: 0\nlog_level: error\n"
                        << extra;
  std::string binary = resolver_binary();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), nullptr);
    ::_exit(127);
  }
  // Ready when the TCP port accepts.
  for (int i = 0; i < 800 && !started_; ++i) {
    UniqueFd probe = tcp_connect("127.0.0.1", port_);
    if (probe) {
      started_ = true;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
}

ResolverProcess::~ResolverProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

int ResolverProcess::threads() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

UniqueFd udp_socket(const std::string& source, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in from = loopback(source, 0);
  sockaddr_in to = loopback("127.0.0.1", port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    return UniqueFd();
  }
  return fd;
}

void udp_send(int fd, const std::string& name, std::uint16_t id, std::uint16_t type) {
  auto wire = dns::build_query(id, name, type);
  ::send(fd, wire.data(), wire.size(), 0);
}

std::optional<Answer> udp_query(const std::string& source, std::uint16_t port,
                                const std::string& name, std::chrono::milliseconds timeout,
                                std::uint16_t type) {
  UniqueFd fd = udp_socket(source, port);
  if (!fd) return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  udp_send(fd.get(), name, 0x4242, type);
  if (!wait_readable(fd.get(), timeout)) return std::nullopt;
  std::uint8_t buf[4096];
  ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
  if (n <= 0) return std::nullopt;
  auto response = dns::parse_response({buf, static_cast<std::size_t>(n)});
  if (!response) return std::nullopt;
  return Answer{response->rcode, std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now() - start)};
}

UniqueFd tcp_connect(const std::string& source, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from = loopback(source, 0);
  sockaddr_in to = loopback("127.0.0.1", port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    return UniqueFd();
  }
  return fd;
}

bool tcp_send_query(int fd, const std::string& name, std::uint16_t id) {
  auto wire = dns::build_query(id, name, dns::kTypeA);
  std::vector<std::uint8_t> out{static_cast<std::uint8_t>(wire.size() >> 8),
                                static_cast<std::uint8_t>(wire.size())};
  out.insert(out.end(), wire.begin(), wire.end());
  return ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
}

std::optional<dns::Response> tcp_read_answer(int fd, std::chrono::milliseconds timeout) {
  std::vector<std::uint8_t> in;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (in.size() >= 2 && in.size() >= 2u + (in[0] << 8 | in[1])) {
      auto r = dns::parse_response({in.data() + 2, static_cast<std::size_t>(in[0] << 8 | in[1])});
      if (!r) return std::nullopt;
      return *r;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !wait_readable(fd, left)) return std::nullopt;
    std::uint8_t buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return std::nullopt;
    in.insert(in.end(), buf, buf + n);
  }
}

bool tcp_closed(int fd, std::chrono::milliseconds timeout) {
  if (!wait_readable(fd, timeout)) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

}  // namespace pvs::resolver::testing
