// ChunkFrames: the chunks of a chunked reply written whole, straight to the connection.
//
// Poco 1.11's chunked output stream frames and sends every 4 KiB on its own
// (HTTPBufferAllocator::BUFFER_SIZE): a 1 MiB download is 256 sends and as many copies. A
// handler that streams large bodies begins the reply with chunked transfer encoding, calls
// send() (the headers go out), and then writes each chunk here as one frame and one send.
// Poco's stream still writes the last chunk when the reply ends, so nothing else may be written
// to that stream.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "http/request_context.h"

namespace Poco::Net {
class StreamSocket;
}

namespace pvs::service {

class ChunkFrames {
 public:
  // `stream`: what response->send() returned (used when the connection is not a plain Poco
  // server connection).
  ChunkFrames(RequestContext& ctx, std::ostream& stream);

  // Sends `data` (not empty) as one chunk. Throws Poco::Exception when the client is gone,
  // and returns false when the stream went bad, as a write to the stream would.
  bool send(std::string_view data);

 private:
  Poco::Net::StreamSocket* socket_ = nullptr;
  std::ostream& stream_;
  std::string frame_;
};

// Whether the client closed its connection (the kernel saw its FIN or a reset), without
// reading from it: a handler that waits on something else while the client waits for its
// reply (a service in a sandbox that is silent) polls this to give up early. False when the
// connection is not a plain Poco server connection.
bool client_hung_up(const RequestContext& ctx);

}  // namespace pvs::service
