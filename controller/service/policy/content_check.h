// What content rules (policy.h: `content`) see of a call that writes: the head of a streamed
// upload, read before the policy decides and then streamed on ahead of the rest, and the file
// a files.edit would leave (docs/policy.md "Content rules").
//
//   BodyHead head(&req.stream(), policy.content_bound(token, kFilesWrite, path), length);
//   head.describe(asked);                    // asked.content: the head; content_cut: more follows
//   if (!gate.admit(ctx, asked)) return;
//   upload(*head.stream());                  // the whole body, from its first byte
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/requests.h"
#include "policy/policy.h"

namespace pvs {
class Sandbox;
}

namespace pvs::service {

class BodyHead {
 public:
  // Reads the first `bound` + 1 bytes of `body` (at most `length` when it is known); nothing
  // when `bound` is 0 or there is no body. A body that breaks off meanwhile is a 400.
  BodyHead(std::istream* body, std::uint64_t bound, std::optional<std::uint64_t> length);
  ~BodyHead();
  BodyHead(const BodyHead&) = delete;
  BodyHead& operator=(const BodyHead&) = delete;

  // Sets asked.content (the head; it stays owned here) and content_cut (more follows), when
  // a head was read.
  void describe(PolicyRequest& asked) const;
  // The SHA-256 (lower-case hex) of the whole body when the head is all of it.
  std::optional<std::string> sha256() const;
  // The body from its first byte: the head, then the rest. Null without a body. A read error
  // of the rest is thrown (std::ios::failure), not taken for the body's end.
  std::istream* stream();

 private:
  class Rest;
  std::istream* body_;
  bool read_ = false;  // a head was read
  bool whole_ = false;
  std::string head_;
  std::unique_ptr<Rest> rest_;
  std::unique_ptr<std::istream> stream_;
};

// What `req` would leave in its file, when a content rule of `token` could judge that file:
// the file read (as files.edit reads it) and the edit applied. nullopt when no rule could, or
// when the edit does not apply (the edit itself then says why). A file that cannot be read is
// thrown as the edit would throw it.
std::optional<std::string> edited_content(const Policy& policy, std::string_view token,
                                          Sandbox& sandbox, const EditRequest& req);

}  // namespace pvs::service
