// One bounded queue of byte chunks between two threads, for streaming transfers that are never
// held whole: uploads (the request's thread reads the socket into it while the SSH session's
// I/O thread writes what is there to SFTP) and downloads (the other way round). At most
// `depth` chunks wait; a producer waits when it is full, a consumer when it is empty.
//
//   ChunkQueue q;                        producer: q.push(chunk) ... q.close();
//   ChunkReader in_buf(q); std::istream in(&in_buf);    a consumer that wants an istream
//   ChunkWriter out_buf(q); std::ostream out(&out_buf); a producer that wants an ostream
//
// Either side may give up: cancel() (the consumer is gone: push fails) and fail() (the producer
// broke off: the reader fails instead of seeing a clean end).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <streambuf>
#include <string>

namespace pvs::service {

class ChunkQueue {
 public:
  explicit ChunkQueue(std::size_t depth = 8) : depth_(depth) {}

  // Blocks while the queue is full; false (chunk dropped) once cancelled.
  bool push(std::string chunk) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return queue_.size() < depth_ || cancelled_; });
    if (cancelled_) return false;
    queue_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }
  // Blocks while the queue is empty and open; false at the end (closed and drained).
  bool pop(std::string* chunk) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return false;
    *chunk = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }
  // The producer is done: the consumer sees the end after the last chunk. With failed, the
  // end is an error (ChunkReader throws).
  void close(bool failed = false) {
    std::lock_guard lock(mu_);
    closed_ = true;
    failed_ = failed;
    cv_.notify_all();
  }
  // The consumer is gone: push() fails from now on.
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  bool failed() const {
    std::lock_guard lock(mu_);
    return failed_;
  }

 private:
  const std::size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool closed_ = false, failed_ = false, cancelled_ = false;
};

// Reads a ChunkQueue as a stream. A queue closed as failed sets badbit in the istream (an
// exception from a streambuf does), so its consumer gives up instead of taking a short body.
class ChunkReader : public std::streambuf {
 public:
  explicit ChunkReader(ChunkQueue& queue) : queue_(queue) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!queue_.pop(&current_)) {
      if (queue_.failed()) throw std::runtime_error("the stream broke off");
      return traits_type::eof();
    }
    setg(current_.data(), current_.data(), current_.data() + current_.size());
    return traits_type::to_int_type(*gptr());
  }

 private:
  ChunkQueue& queue_;
  std::string current_;
};

// Writes a stream into a ChunkQueue, one chunk per write. A cancelled queue sets badbit in the
// ostream, so its producer stops.
class ChunkWriter : public std::streambuf {
 public:
  explicit ChunkWriter(ChunkQueue& queue) : queue_(queue) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (!queue_.push(std::string(s, static_cast<std::size_t>(n))))
      throw std::runtime_error("the reader went away");
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  ChunkQueue& queue_;
};

}  // namespace pvs::service
