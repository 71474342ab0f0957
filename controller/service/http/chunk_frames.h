// ChunkFrames: the chunks of a chunked reply written whole, straight to the connection (or, for
// a reply with a Content-Length, its body's pieces as they are).
//
// Poco 1.11's output streams send every 4 KiB on their own (HTTPBufferAllocator::BUFFER_SIZE):
// a 1 MiB download is 256 sends and as many copies. A handler that streams large bodies begins
// the reply with chunked transfer encoding (or its Content-Length), calls send() (the headers
// go out), and then writes each piece here as one frame and one send. Poco's chunked stream
// still writes the last chunk when the reply ends, so nothing else may be written to that
// stream; a Content-Length body must be written whole here, and nothing more, after a flush of
// that stream (Poco puts the head of such a reply in it).
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
  // server connection). `chunked` false: the reply has a Content-Length, no framing.
  ChunkFrames(RequestContext& ctx, std::ostream& stream, bool chunked = true);

  // Sends `data` (not empty) as one chunk. Throws Poco::Exception when the client is gone,
  // and returns false when the stream went bad, as a write to the stream would.
  bool send(std::string_view data);

 private:
  Poco::Net::StreamSocket* socket_ = nullptr;
  std::ostream& stream_;
  bool chunked_;
  std::string frame_;
};

// Whether the client closed its connection (the kernel saw its FIN or a reset), without
// reading from it: a handler that waits on something else while the client waits for its
// reply (a service in a sandbox that is silent) polls this to give up early. False when the
// connection is not a plain Poco server connection.
bool client_hung_up(const RequestContext& ctx);

}  // namespace pvs::service
