#include "http/chunk_frames.h"

#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/StreamSocket.h>

#include <poll.h>

#include <cstdio>

namespace pvs::service {

ChunkFrames::ChunkFrames(RequestContext& ctx, std::ostream& stream, bool chunked)
    : stream_(stream), chunked_(chunked) {
  if (auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(ctx.request))
    socket_ = &impl->socket();
}

bool ChunkFrames::send(std::string_view data) {
  if (data.empty()) return static_cast<bool>(stream_);
  if (!socket_) {
    stream_.write(data.data(), static_cast<std::streamsize>(data.size()));
    return static_cast<bool>(stream_);
  }
  std::string_view out = data;
  if (chunked_) {
    char size[24];
    int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    frame_.assign(size, static_cast<std::size_t>(n));
    frame_.append(data);
    frame_.append("\r\n");
    out = frame_;
  }
  while (!out.empty()) {
    int w = socket_->sendBytes(out.data(), static_cast<int>(out.size()));
    if (w <= 0) return false;
    out.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

bool client_hung_up(const RequestContext& ctx) {
  auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(ctx.request);
  if (!impl) return false;
  pollfd p{impl->socket().impl()->sockfd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace pvs::service
