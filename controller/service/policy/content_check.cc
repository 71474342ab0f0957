#include "policy/content_check.h"

#include <algorithm>
#include <stdexcept>
#include <streambuf>

#include "core/text/file_edit.h"
#include "http/api_error.h"
#include "http/auth.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

// The head again, then the rest of the body, 64 KiB at a time.
class BodyHead::Rest : public std::streambuf {
 public:
  Rest(std::string& head, std::istream* body) : head_(head), body_(body) {}

 protected:
  int_type underflow() override {
    if (!head_done_) {
      head_done_ = true;
      if (!head_.empty()) {
        setg(head_.data(), head_.data(), head_.data() + head_.size());
        return traits_type::to_int_type(*gptr());
      }
    }
    if (!body_ || !*body_) return traits_type::eof();
    body_->read(buf_, sizeof buf_);
    auto got = body_->gcount();
    if (body_->bad()) throw std::ios::failure("reading the request body failed");
    if (got <= 0) return traits_type::eof();
    setg(buf_, buf_, buf_ + got);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::string& head_;
  std::istream* body_;
  bool head_done_ = false;
  char buf_[64 << 10];
};

BodyHead::BodyHead(std::istream* body, std::uint64_t bound, std::optional<std::uint64_t> length)
    : body_(body) {
  if (!body || bound == 0) return;
  std::uint64_t want = bound + 1;
  if (length) want = std::min(want, *length);
  head_.resize(static_cast<std::size_t>(want));
  try {
    body->read(head_.data(), static_cast<std::streamsize>(want));
  } catch (const std::exception& e) {
    throw bad_request(std::string("reading the request body failed: ") + e.what());
  }
  if (body->bad()) throw bad_request("reading the request body failed");
  head_.resize(static_cast<std::size_t>(body->gcount()));
  read_ = true;
  // Whole: the body ended within the bound (Content-Length says so, or the stream ended).
  whole_ = head_.size() <= bound && (!length || head_.size() == *length);
}

BodyHead::~BodyHead() = default;

void BodyHead::describe(PolicyRequest& asked) const {
  if (!read_) return;
  asked.content = std::string_view(head_);
  asked.content_cut = !whole_;
}

std::optional<std::string> BodyHead::sha256() const {
  if (!read_ || !whole_) return std::nullopt;
  return sha256_hex(head_);
}

std::istream* BodyHead::stream() {
  if (!body_ || !read_) return body_;
  if (!stream_) {
    rest_ = std::make_unique<Rest>(head_, body_);
    stream_ = std::make_unique<std::istream>(rest_.get());
    stream_->exceptions(std::ios::badbit);
  }
  return stream_.get();
}

std::optional<std::string> edited_content(const Policy& policy, std::string_view token,
                                          Sandbox& sandbox, const EditRequest& req) {
  if (policy.content_bound(token, PolicyAction::kFilesEdit, req.path) == 0) return std::nullopt;
  auto content = sandbox.read_file(req.path, kMaxEditFileBytes);
  if (!content) throw from_error(content.error());
  auto edit = apply_edit(*content, req.spec);
  if (!edit) return std::nullopt;
  return std::move(edit->content);
}

}  // namespace pvs::service
