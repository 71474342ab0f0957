// An upgraded connection to a sandbox's port (port_routes.h): after the service's 101, the
// client's connection leaves the HTTP session and becomes a byte stream spliced to the
// service's tunnel, both ways, on a thread of its own (http/ws_sessions.h: counted per token
// and in all, so long-lived WebSockets never hold the HTTP pool).
//
// Two threads per connection: this session's thread reads the client and writes the stream to
// the service (port_stream.h: the SSH tunnel or the route), a second reads it and writes the
// client. Every call on the client's socket happens
// under one mutex (TLS sockets are not safe for concurrent use), and reads only happen when
// data is there (poll), so the writer is never held up long. When the service closes, the
// client's side is shut for sending once everything reached it, and the connection ends; when
// the client closes, the service sees EOF and has kCloseGrace to finish its side. One audit
// record at the end: the port, the path, and the bytes each way.
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/String.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>
#include <thread>
#include <vector>

#include "api/ports/port_audit.h"
#include "api/ports/port_routes.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

namespace {

constexpr std::size_t kSpliceChunk = 64 << 10;
constexpr auto kTunnelWait = std::chrono::milliseconds(200);  // how often `done` is looked at
constexpr auto kCloseGrace = std::chrono::seconds(10);
constexpr auto kWriteTimeout = std::chrono::seconds(60);  // a service that stops reading

// One upgraded connection.
struct Splice {
  Splice(Poco::Net::StreamSocket s, std::unique_ptr<PortStream> t)
      : socket(std::move(s)), tunnel(std::move(t)) {}

  Poco::Net::StreamSocket socket;
  std::unique_ptr<PortStream> tunnel;
  std::mutex mu;  // every call on socket
  std::atomic<bool> done{false};
  std::atomic<bool> service_closed{false};
  std::atomic<std::uint64_t> from_client{0};
  std::atomic<std::uint64_t> to_client{0};

  // All of `data` to the client; false when it is gone.
  bool send(std::string_view data) {
    std::lock_guard lock(mu);
    try {
      while (!data.empty()) {
        int n = socket.sendBytes(data.data(),
                                 static_cast<int>(std::min<std::size_t>(data.size(), INT_MAX)));
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
        to_client += static_cast<std::uint64_t>(n);
      }
      return true;
    } catch (const Poco::Exception&) {
      return false;
    }
  }
  void hang_up() {
    done = true;
    tunnel->close();
    std::lock_guard lock(mu);
    try {
      socket.shutdown();
    } catch (const Poco::Exception&) {
    }
  }
};

// The service's bytes to the client until the service closes or the splice ends.
void service_to_client(Splice& s) {
  std::vector<char> buf(kSpliceChunk);
  while (!s.done) {
    auto n = s.tunnel->read(buf.data(), buf.size(), kTunnelWait);
    if (!n && n.error().is(SshErrc::kTimeout)) continue;
    if (!n || *n == 0) break;
    if (!s.send(std::string_view(buf.data(), *n))) break;
  }
  s.service_closed = true;
  std::lock_guard lock(s.mu);
  try {
    s.socket.shutdownSend();  // what was sent reaches the client, then its EOF
  } catch (const Poco::Exception&) {
  }
}

// Whether the client's socket has bytes to read now (TLS may hold some back from poll).
bool client_readable(Splice& s) {
  {
    std::lock_guard lock(s.mu);
    if (s.socket.available() > 0) return true;
  }
  return s.socket.poll(Poco::Timespan(0, 100000),
                       Poco::Net::Socket::SELECT_READ | Poco::Net::Socket::SELECT_ERROR);
}

// The client's bytes to the service until the client closes (true) or the splice ends.
bool client_to_service(Splice& s) {
  std::vector<char> buf(kSpliceChunk);
  while (!s.done && !s.service_closed) {
    if (!client_readable(s)) continue;
    int n = 0;
    {
      std::lock_guard lock(s.mu);
      try {
        n = s.socket.receiveBytes(buf.data(), static_cast<int>(buf.size()));
      } catch (const Poco::TimeoutException&) {
        continue;
      } catch (const Poco::Exception&) {
        return false;
      }
    }
    if (n <= 0) {
      s.tunnel->shutdown_write();
      return true;
    }
    s.from_client += static_cast<std::uint64_t>(n);
    if (!s.tunnel->write(std::string_view(buf.data(), static_cast<std::size_t>(n)), kWriteTimeout))
      return false;
  }
  return false;
}

// One connection's life, on its WsSessions thread.
void run_splice(Splice& s) {
  std::thread writer([&] { service_to_client(s); });
  if (client_to_service(s)) {
    auto until = std::chrono::steady_clock::now() + kCloseGrace;
    while (!s.done && !s.service_closed && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(kTunnelWait);
  }
  s.done = true;
  writer.join();
  s.tunnel->close();
  std::lock_guard lock(s.mu);
  try {
    s.socket.close();
  } catch (const Poco::Exception&) {
  }
}

}  // namespace

void PortRoutes::splice(RequestContext& ctx, const Target& to, std::unique_ptr<PortStream> tunnel,
                        std::string pending, const ports::ResponseHead& head,
                        WsSessions::Ticket ticket, std::uint64_t sent) {
  auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(ctx.request);
  if (!impl) throw bad_gateway("this connection cannot be upgraded");
  // The record is written at the end, with the bytes each way (run on the session's thread).
  AuditRecord record = audit_record(ctx, 101);
  ctx.action.clear();
  auto& resp = *ctx.response;
  d_.replies.begin_reply(ctx, 101, "");
  resp.erase("Content-Type");
  resp.setReason(head.reason.empty() ? "Switching Protocols" : head.reason);
  for (const auto& [name, value] : head.headers)
    if (Poco::icompare(name, "x-request-id") != 0) resp.add(name, value);
  resp.set("Upgrade", head.upgrade);
  resp.set("Connection", "Upgrade");
  resp.setContentLength(Poco::Net::HTTPMessage::UNKNOWN_CONTENT_LENGTH);
  resp.send().flush();
  auto s = std::make_shared<Splice>(impl->detachSocket(), std::move(tunnel));
  s->from_client = sent;
  s->socket.setSendTimeout(Poco::Timespan(std::chrono::seconds(kWriteTimeout).count(), 0));
  s->socket.setReceiveTimeout(Poco::Timespan(10, 0));
  if (!pending.empty() && !s->send(pending)) s->done = true;  // what followed the 101 head
  auto start = ctx.start;
  upgrades_.start(
      std::move(ticket),
      [this, s, record = std::move(record), start, port = to.port, path = to.path]() mutable {
        try {
          run_splice(*s);
        } catch (const std::exception& e) {  // Poco::Exception is one too
          log::warn("request " + record.request_id + ": upgraded connection: " + e.what());
        }
        auto in = s->from_client.load(), out = s->to_client.load();
        ports::count(d_.metrics, "upgrade", in, out);
        record.params_json = ports::audit_params(port, "GET", path, std::make_pair(in, out));
        record.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
        if (d_.audit && !record.action.empty()) d_.audit(record);
      },
      [s] { s->hang_up(); });
}

}  // namespace pvs::service
