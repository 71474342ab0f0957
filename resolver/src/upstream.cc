#include "upstream.h"

#include <ares.h>
#include <netinet/in.h>

#include <cstring>

namespace pvs::resolver {
namespace {

struct Pending {
  std::string name;
  Upstream::Callback done;
};

void on_answer(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
  std::unique_ptr<Pending> p(static_cast<Pending*>(arg));
  if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED) return;
  if (abuf == nullptr || alen <= 0) {
    p->done(fail(status == ARES_ETIMEOUT ? ErrorCode::kTimeout : ErrorCode::kUnavailable,
                 std::string("upstream: ") + ares_strerror(status)));
    return;
  }
  auto response = dns::parse_response({abuf, static_cast<std::size_t>(alen)});
  if (!response) {
    p->done(fail(response.error()));
  } else if (response->question_name != p->name || response->question_type != dns::kTypeA) {
    p->done(fail(ErrorCode::kInvalidArgument, "upstream: answer to another question"));
  } else {
    p->done(std::move(*response));
  }
}

}  // namespace

Result<std::unique_ptr<Upstream>> Upstream::create(
    const std::vector<std::pair<Ipv4Address, std::uint16_t>>& servers, std::uint32_t timeout_ms) {
  static const int library = ares_library_init(ARES_LIB_INIT_ALL);
  if (library != ARES_SUCCESS) return fail(ErrorCode::kInternal, ares_strerror(library));
  std::unique_ptr<Upstream> self(new Upstream());
  ares_options options{};
  // NOCHECKRESP: the first upstream's answer is the answer, its rcode included (SERVFAIL and
  // REFUSED too); the next upstream is asked when one does not answer.
  options.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES | ARES_FLAG_NOCHECKRESP;
  options.timeout = static_cast<int>(timeout_ms);
  options.tries = 1;
  options.sock_state_cb = &Upstream::on_socket;
  options.sock_state_cb_data = self.get();
  int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_SOCK_STATE_CB |
             ARES_OPT_NOROTATE;
  if (int rc = ares_init_options(&self->channel_, &options, mask); rc != ARES_SUCCESS) {
    return fail(ErrorCode::kInternal, std::string("c-ares: ") + ares_strerror(rc));
  }
  std::vector<ares_addr_port_node> nodes(servers.size());
  for (std::size_t i = 0; i < servers.size(); ++i) {
    nodes[i].next = i + 1 < servers.size() ? &nodes[i + 1] : nullptr;
    nodes[i].family = AF_INET;
    nodes[i].addr.addr4.s_addr = htonl(servers[i].first.to_uint());
    nodes[i].udp_port = servers[i].second;
    nodes[i].tcp_port = servers[i].second;
  }
  if (int rc = ares_set_servers_ports(self->channel_, nodes.empty() ? nullptr : nodes.data());
      rc != ARES_SUCCESS) {
    return fail(ErrorCode::kInternal, std::string("c-ares servers: ") + ares_strerror(rc));
  }
  return self;
}

Upstream::~Upstream() {
  if (channel_ != nullptr) ares_destroy(channel_);  // pending callbacks see ARES_EDESTRUCTION
}

void Upstream::on_socket(void* self, int fd, int readable, int writable) {
  auto* up = static_cast<Upstream*>(self);
  if (!readable && !writable) {
    up->sockets_.erase(fd);
    return;
  }
  up->sockets_[fd] = static_cast<short>((readable ? POLLIN : 0) | (writable ? POLLOUT : 0));
}

void Upstream::query(const std::string& name, Callback done) {
  auto wire = dns::build_query(0, name, dns::kTypeA);  // c-ares sets a random id
  auto* pending = new Pending{name, std::move(done)};
  ares_send(channel_, wire.data(), static_cast<int>(wire.size()), on_answer, pending);
}

void Upstream::add_pollfds(std::vector<pollfd>& out) const {
  for (const auto& [fd, events] : sockets_) out.push_back(pollfd{fd, events, 0});
}

void Upstream::process(const std::vector<pollfd>& fds) {
  for (const auto& p : fds) {
    if (p.revents == 0 || !sockets_.contains(p.fd)) continue;
    bool in = (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    bool out = (p.revents & POLLOUT) != 0;
    ares_process_fd(channel_, in ? p.fd : ARES_SOCKET_BAD, out ? p.fd : ARES_SOCKET_BAD);
  }
  ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
}

int Upstream::next_timeout_ms() const {
  timeval tv{};
  if (ares_timeout(channel_, nullptr, &tv) == nullptr) return -1;
  return static_cast<int>(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
}

}  // namespace pvs::resolver
