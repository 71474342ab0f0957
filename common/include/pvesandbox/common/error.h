// Errors as values at module boundaries.
//
//   pvs::Result<Cidr> r = Cidr::parse(text);
//   if (!r) log(r.error().message);
//
// A Result<T> holds either a T or an Error; Status is Result<void>. Both are tl::expected
// (std::expected cannot be used: clang 14 does not compile libstdc++ 12's <expected>).
#pragma once

#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace pvs {

// What went wrong, coarse enough for a caller to act on. Modules add detail in the message.
enum class ErrorCode {
  kInvalidArgument,   // the input is malformed or out of range
  kNotFound,          // the thing named does not exist
  kAlreadyExists,     // creating something that is there already
  kPermissionDenied,  // the caller may not do this
  kUnauthenticated,   // the caller could not be identified
  kConflict,          // state forbids it now (locked, running, ...)
  kTooLarge,          // a size limit was exceeded
  kUnavailable,       // a peer cannot be reached; retrying later may work
  kTimeout,           // a deadline passed
  kIo,                // an operating system call failed
  kInternal,          // a bug or an invariant broken
};

// The stable lower-case name of a code, e.g. "invalid_argument".
std::string_view to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // "invalid_argument: bad ttl"
  std::string to_string() const;
};

template <typename T>
using Result = tl::expected<T, Error>;
using Status = Result<void>;

// Builds the error side of a Result: `return pvs::fail(ErrorCode::kNotFound, "no such vm");`
inline tl::unexpected<Error> fail(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}
inline tl::unexpected<Error> fail(Error error) {
  return tl::unexpected<Error>(std::move(error));
}

// An error from errno: "<what>: <strerror(err)>", code kIo.
Error errno_error(std::string_view what, int err);

}  // namespace pvs
