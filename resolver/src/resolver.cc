#include "resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::resolver {
namespace {

constexpr std::size_t kUdpMax = 512;  // no EDNS: classic UDP size
constexpr int kTcpIdleMs = 10'000;

sockaddr_in to_sockaddr(Ipv4Address address, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(address.to_uint());
  return sa;
}

std::uint16_t random_id() {
  std::uint16_t id = 0;
  if (::getrandom(&id, sizeof(id), 0) != sizeof(id)) {
    id = static_cast<std::uint16_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return id;
}

std::int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads exactly `n` bytes before `deadline_ms`; false on EOF, error, timeout or `*stop`.
bool read_exact(int fd, std::uint8_t* out, std::size_t n, std::int64_t deadline_ms,
                const std::atomic<bool>* stop = nullptr) {
  std::size_t got = 0;
  while (got < n) {
    int left = static_cast<int>(deadline_ms - mono_ms());
    if (left <= 0 || (stop != nullptr && *stop)) return false;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, std::min(left, 200));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    ssize_t r = ::recv(fd, out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

bool send_framed(int fd, const std::vector<std::uint8_t>& message) {
  std::vector<std::uint8_t> out;
  out.push_back(static_cast<std::uint8_t>(message.size() >> 8));
  out.push_back(static_cast<std::uint8_t>(message.size()));
  out.insert(out.end(), message.begin(), message.end());
  return ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
}

bool matches(const dns::Response& r, std::uint16_t id, const std::string& name) {
  return r.id == id && r.question_name == name && r.question_type == dns::kTypeA;
}

}  // namespace

Resolver::~Resolver() {
  stop();
}

bool Resolver::admit(Ipv4Address source) {
  if (config_.queries_per_second == 0) return true;
  std::lock_guard lock(buckets_mutex_);
  std::int64_t now = mono_ms();
  double rate = config_.queries_per_second;
  double burst = 2.0 * rate;
  if (buckets_.size() > 65536) buckets_.clear();  // a bound on memory, not a policy
  auto [it, fresh] = buckets_.try_emplace(source.to_uint(), Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst, b.tokens + static_cast<double>(now - b.last_ms) * rate / 1000.0);
    b.last_ms = now;
  }
  if (b.tokens < 1.0) {
    ++stats_.limited;
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

Status Resolver::open() {
  auto bind_socket = [&](int type) -> Result<UniqueFd> {
    UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
    if (!fd) return fail(errno_error("socket", errno));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::setsockopt(fd.get(), IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
    sockaddr_in sa = to_sockaddr(config_.listen, config_.port);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      return fail(errno_error(
          "bind " + config_.listen.to_string() + ":" + std::to_string(config_.port), errno));
    }
    if (type == SOCK_STREAM && ::listen(fd.get(), 64) != 0) {
      return fail(errno_error("listen", errno));
    }
    return fd;
  };
  auto udp = bind_socket(SOCK_DGRAM);
  if (!udp) return fail(udp.error());
  auto tcp = bind_socket(SOCK_STREAM);
  if (!tcp) return fail(tcp.error());
  udp_ = std::move(*udp);
  tcp_ = std::move(*tcp);
  return {};
}

void Resolver::start() {
  for (std::uint32_t i = 0; i < config_.workers; ++i) threads_.emplace_back([this] { udp_loop(); });
  threads_.emplace_back([this] { tcp_loop(); });
}

void Resolver::stop() {
  stopping_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  while (tcp_clients_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::optional<std::vector<std::uint8_t>> Resolver::answer(Ipv4Address source,
                                                          std::span<const std::uint8_t> wire,
                                                          AgentLink& link, bool tcp) {
  ++stats_.queries;
  std::optional<std::uint16_t> id;
  auto query = dns::parse_query(wire, &id);
  if (!query) {
    if (!id) return std::nullopt;
    ++stats_.refused;
    return dns::build_header_only(*id, dns::Rcode::kFormErr);
  }
  auto refuse = [&](dns::Rcode rcode) {
    ++(rcode == dns::Rcode::kRefused ? stats_.refused : stats_.failed);
    return dns::build_answer(*query, rcode, {}, 0, kUdpMax);
  };
  if (!config_.sandbox_cidr.contains(source) || query->klass != dns::kClassIn ||
      (query->type != dns::kTypeA && query->type != dns::kTypeAaaa) ||
      !proto::is_valid_egress_name(query->name, false)) {
    return refuse(dns::Rcode::kRefused);
  }
  auto asked = link.call("ASK " + source.to_string() + " " + query->name);
  if (!asked || !asked->ok) {
    log::warn("ASK " + source.to_string() + " " + query->name + ": " +
              (asked ? asked->text : asked.error().message));
    return refuse(dns::Rcode::kServFail);
  }
  auto verdict = proto::parse_ask_payload(asked->text);
  if (!verdict || !verdict->allow) return refuse(dns::Rcode::kRefused);
  if (query->type == dns::kTypeAaaa) {  // IPv6 stays blocked: an empty answer, at once
    ++stats_.answered;
    return dns::build_answer(*query, dns::Rcode::kNoError, {}, 0, kUdpMax);
  }
  auto response = ask_upstream(query->name);
  if (!response) {
    log::warn("upstream for " + query->name + ": " + response.error().message);
    return refuse(dns::Rcode::kServFail);
  }
  if (response->rcode != dns::Rcode::kNoError) {
    ++stats_.answered;
    return dns::build_answer(*query, response->rcode, {}, 0, kUdpMax);
  }
  auto resolution = dns::follow_chain(*response, query->name);
  std::uint32_t ttl = std::min(resolution.min_ttl, config_.max_answer_ttl);
  std::size_t max_size = tcp ? 65535 : kUdpMax;
  // What fits the answer is what gets paired: no address is handed out without its pair.
  std::size_t fits = 0;
  (void)dns::build_answer(*query, dns::Rcode::kNoError, resolution.chain, ttl, max_size, &fits);
  std::vector<dns::Record> records(resolution.chain.begin(), resolution.chain.begin() + fits);
  std::vector<Ipv4Address> addresses;
  for (const auto& rec : records) {
    if (rec.address && addresses.size() < proto::kMaxPairDestinations)
      addresses.push_back(*rec.address);
  }
  std::erase_if(records, [&](const dns::Record& rec) {
    return rec.address &&
           std::find(addresses.begin(), addresses.end(), *rec.address) == addresses.end();
  });
  if (!addresses.empty()) {
    proto::PairRequest pair{source, query->name, addresses, ttl};
    auto paired = link.call(proto::format_request(pair));
    if (!paired || !paired->ok) {
      log::warn(
          "PAIR " + source.to_string() + " " + query->name + ": " +
          (paired ? std::to_string(paired->code) + " " + paired->text : paired.error().message));
      return refuse(paired && paired->code == 403 ? dns::Rcode::kRefused : dns::Rcode::kServFail);
    }
  }
  ++stats_.answered;
  log::debug("answer " + source.to_string() + " " + query->name +
             " addresses=" + std::to_string(addresses.size()) + " ttl=" + std::to_string(ttl));
  return dns::build_answer(*query, dns::Rcode::kNoError, records, ttl, max_size);
}

Result<dns::Response> Resolver::ask_upstream(const std::string& name) {
  Error last{ErrorCode::kUnavailable, "no upstream answered"};
  for (const auto& upstream : config_.upstreams) {
    std::uint16_t id = random_id();
    auto query = dns::build_query(id, name, dns::kTypeA);
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(errno_error("socket", errno));
    sockaddr_in sa = to_sockaddr(upstream.first, upstream.second);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::send(fd.get(), query.data(), query.size(), 0) != static_cast<ssize_t>(query.size())) {
      last = errno_error("upstream " + upstream.first.to_string(), errno);
      continue;
    }
    std::int64_t deadline = mono_ms() + config_.upstream_timeout_ms;
    while (true) {
      int left = static_cast<int>(deadline - mono_ms());
      pollfd p{fd.get(), POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) {
        last = Error{ErrorCode::kTimeout, "upstream " + upstream.first.to_string() + " timed out"};
        break;
      }
      std::uint8_t buf[4096];
      ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
      if (n <= 0) {
        last = errno_error("upstream " + upstream.first.to_string(), errno);
        break;
      }
      auto response = dns::parse_response({buf, static_cast<std::size_t>(n)});
      if (!response || !matches(*response, id, name)) continue;  // not ours: keep waiting
      if (response->truncated) return ask_upstream_tcp(upstream, query);
      return response;
    }
  }
  return fail(last);
}

Result<dns::Response> Resolver::ask_upstream_tcp(std::pair<Ipv4Address, std::uint16_t> upstream,
                                                 const std::vector<std::uint8_t>& query) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail(errno_error("socket", errno));
  sockaddr_in sa = to_sockaddr(upstream.first, upstream.second);
  std::int64_t deadline = mono_ms() + config_.upstream_timeout_ms;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      !send_framed(fd.get(), query)) {
    return fail(errno_error("upstream tcp " + upstream.first.to_string(), errno));
  }
  std::uint8_t len[2];
  if (!read_exact(fd.get(), len, 2, deadline)) return fail(ErrorCode::kTimeout, "upstream tcp");
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(len[0] << 8 | len[1]));
  if (!read_exact(fd.get(), buf.data(), buf.size(), deadline)) {
    return fail(ErrorCode::kTimeout, "upstream tcp");
  }
  auto response = dns::parse_response(buf);
  if (!response) return fail(response.error());
  std::uint16_t id = static_cast<std::uint16_t>(query[0] << 8 | query[1]);
  if (response->id != id) return fail(ErrorCode::kInvalidArgument, "upstream tcp: wrong id");
  return response;
}

void Resolver::udp_loop() {
  AgentLink link(config_.agent_socket, 2000);
  std::uint8_t buf[4096];
  while (!stopping_) {
    pollfd p{udp_.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    ssize_t n = ::recvfrom(udp_.get(), buf, sizeof(buf), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) continue;
    Ipv4Address source(ntohl(from.sin_addr.s_addr));
    if (!admit(source)) continue;  // over its budget: dropped, never amplified
    auto reply = answer(source, {buf, static_cast<std::size_t>(n)}, link, false);
    if (reply) {
      ::sendto(udp_.get(), reply->data(), reply->size(), 0, reinterpret_cast<sockaddr*>(&from),
               len);
    }
  }
}

void Resolver::tcp_loop() {
  while (!stopping_) {
    pollfd p{tcp_.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    int fd = ::accept4(tcp_.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (tcp_clients_ >= config_.max_tcp_clients) {
      ::close(fd);
      continue;
    }
    ++tcp_clients_;
    Ipv4Address source(ntohl(from.sin_addr.s_addr));
    std::thread([this, fd, source] {
      tcp_client(fd, source);
      --tcp_clients_;
    }).detach();
  }
}

void Resolver::tcp_client(int raw, Ipv4Address source) {
  UniqueFd fd(raw);
  AgentLink link(config_.agent_socket, 2000);
  while (!stopping_) {
    std::uint8_t len[2];
    std::int64_t deadline = mono_ms() + kTcpIdleMs;
    if (!read_exact(fd.get(), len, 2, deadline, &stopping_)) return;
    std::vector<std::uint8_t> message(static_cast<std::size_t>(len[0] << 8 | len[1]));
    if (!read_exact(fd.get(), message.data(), message.size(), deadline, &stopping_)) return;
    if (!admit(source)) continue;
    auto reply = answer(source, message, link, true);
    if (!reply || !send_framed(fd.get(), *reply)) return;
  }
}

}  // namespace pvs::resolver
