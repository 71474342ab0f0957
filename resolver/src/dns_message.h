// The few DNS messages pve-sandbox-resolver handles (RFC 1035), parsed strictly: every read is
// bounds-checked, compression pointers must point backwards and are followed at most 64 times,
// names are at most 255 bytes. Anything unexpected is an error, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"

namespace pvs::dns {

inline constexpr std::uint16_t kTypeA = 1;
inline constexpr std::uint16_t kTypeCname = 5;
inline constexpr std::uint16_t kTypeAaaa = 28;
inline constexpr std::uint16_t kTypeOpt = 41;
inline constexpr std::uint16_t kClassIn = 1;

enum class Rcode : std::uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

// A client's query: one question.
struct Query {
  std::uint16_t id = 0;
  bool recursion_desired = false;
  std::string name;  // lower-cased, dotted, no trailing dot ("" for the root)
  std::uint16_t type = 0;
  std::uint16_t klass = 0;
  std::vector<std::uint8_t> question;  // the question's wire bytes, echoed in the answer
};

// Parses a query. With `id_out`, the id is stored as soon as the header is read, so a
// malformed query can still be answered with FORMERR.
Result<Query> parse_query(std::span<const std::uint8_t> wire, std::optional<std::uint16_t>* id_out);

struct Record {
  std::string owner;  // lower-cased
  std::uint16_t type = 0;
  std::uint16_t klass = 0;
  std::uint32_t ttl = 0;
  std::string target;                  // CNAME: lower-cased target name
  std::optional<Ipv4Address> address;  // A
};

// An upstream's response to our query.
struct Response {
  std::uint16_t id = 0;
  bool truncated = false;
  Rcode rcode = Rcode::kNoError;
  std::string question_name;
  std::uint16_t question_type = 0;
  std::vector<Record> answers;  // IN class A and CNAME only; others skipped
};

Result<Response> parse_response(std::span<const std::uint8_t> wire);

// What the answer chain for `name` resolves to: the CNAME hops followed from `name` (at most
// 8), the A addresses at the end of the chain, and the smallest TTL along it.
struct Resolution {
  std::vector<Record> chain;  // CNAMEs in order, then the A records
  std::vector<Ipv4Address> addresses;
  std::uint32_t min_ttl = 0;
};
Resolution follow_chain(const Response& response, const std::string& name);

// A query for `name`/A with RD set.
std::vector<std::uint8_t> build_query(std::uint16_t id, const std::string& name,
                                      std::uint16_t type);

// An answer to `query`: `records` (CNAME/A, written without compression, each with `ttl`).
// Records that do not fit `max_size` are left out; `*written` tells how many went in.
std::vector<std::uint8_t> build_answer(const Query& query, Rcode rcode,
                                       const std::vector<Record>& records, std::uint32_t ttl,
                                       std::size_t max_size, std::size_t* written = nullptr);
// An error answer for a query whose question could not be read.
std::vector<std::uint8_t> build_header_only(std::uint16_t id, Rcode rcode);

// "a.example" -> wire labels; nullopt for names that are not encodable.
std::optional<std::vector<std::uint8_t>> encode_name(const std::string& name);

}  // namespace pvs::dns
