#include "dns_message.h"

#include <algorithm>

namespace pvs::dns {
namespace {

constexpr int kMaxPointers = 64;
constexpr std::size_t kMaxName = 255;
constexpr std::size_t kMaxChain = 8;

Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, "dns: " + std::move(message)};
}

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> wire) : wire_(wire) {}
  std::size_t pos() const { return pos_; }
  bool u8(std::uint8_t* out) {
    if (pos_ + 1 > wire_.size()) return false;
    *out = wire_[pos_++];
    return true;
  }
  bool u16(std::uint16_t* out) {
    if (pos_ + 2 > wire_.size()) return false;
    *out = static_cast<std::uint16_t>(wire_[pos_] << 8 | wire_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool u32(std::uint32_t* out) {
    std::uint16_t hi = 0, lo = 0;
    if (!u16(&hi) || !u16(&lo)) return false;
    *out = std::uint32_t{hi} << 16 | lo;
    return true;
  }
  bool skip(std::size_t n) {
    if (pos_ + n > wire_.size()) return false;
    pos_ += n;
    return true;
  }
  // A (possibly compressed) name at the current position, lower-cased and dotted.
  Status name(std::string* out) {
    out->clear();
    std::size_t at = pos_;
    std::size_t wire_len = 0;
    bool jumped = false;
    for (int pointers = 0;;) {
      if (at >= wire_.size()) return fail(bad("name runs past the message"));
      std::uint8_t len = wire_[at];
      if ((len & 0xc0) == 0xc0) {
        if (at + 1 >= wire_.size()) return fail(bad("truncated compression pointer"));
        std::size_t target = (std::size_t{len & 0x3fu} << 8) | wire_[at + 1];
        if (target >= at) return fail(bad("compression pointer does not point backwards"));
        if (++pointers > kMaxPointers) return fail(bad("too many compression pointers"));
        if (!jumped) pos_ = at + 2;
        jumped = true;
        at = target;
        continue;
      }
      if ((len & 0xc0) != 0) return fail(bad("unsupported label type"));
      if (len == 0) {
        if (!jumped) pos_ = at + 1;
        return {};
      }
      if (at + 1 + len > wire_.size()) return fail(bad("label runs past the message"));
      wire_len += 1 + len;
      if (wire_len + 1 > kMaxName) return fail(bad("name longer than 255 bytes"));
      if (!out->empty()) out->push_back('.');
      for (std::size_t i = 0; i < len; ++i) {
        char c = static_cast<char>(wire_[at + 1 + i]);
        if (c <= 0x20 || c >= 0x7f || c == '.') return fail(bad("unsupported byte in a label"));
        out->push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
      }
      at += 1 + len;
    }
  }

 private:
  std::span<const std::uint8_t> wire_;
  std::size_t pos_ = 0;
};

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v));
}

}  // namespace

std::optional<std::vector<std::uint8_t>> encode_name(const std::string& name) {
  std::vector<std::uint8_t> out;
  std::string_view rest = name;
  while (!rest.empty()) {
    auto dot = rest.find('.');
    std::string_view label = rest.substr(0, dot);
    if (label.empty() || label.size() > 63) return std::nullopt;
    out.push_back(static_cast<std::uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
    if (rest.empty()) return std::nullopt;  // trailing dot
  }
  out.push_back(0);
  if (out.size() > kMaxName) return std::nullopt;
  return out;
}

Result<Query> parse_query(std::span<const std::uint8_t> wire,
                          std::optional<std::uint16_t>* id_out) {
  Reader r(wire);
  Query q;
  std::uint16_t flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(&q.id) || !r.u16(&flags) || !r.u16(&qd) || !r.u16(&an) || !r.u16(&ns) || !r.u16(&ar)) {
    return fail(bad("message shorter than a header"));
  }
  if (id_out != nullptr) *id_out = q.id;
  if (flags & 0x8000) return fail(bad("not a query (QR set)"));
  if (((flags >> 11) & 0xf) != 0) return fail(bad("opcode other than QUERY"));
  if (qd != 1 || an != 0 || ns != 0 || ar > 1) return fail(bad("expected exactly one question"));
  q.recursion_desired = (flags & 0x0100) != 0;
  std::size_t start = r.pos();
  if (auto ok = r.name(&q.name); !ok) return fail(ok.error());
  if (!r.u16(&q.type) || !r.u16(&q.klass)) return fail(bad("truncated question"));
  q.question.assign(wire.begin() + static_cast<std::ptrdiff_t>(start),
                    wire.begin() + static_cast<std::ptrdiff_t>(r.pos()));
  // An EDNS OPT record may follow; it is read for well-formedness and otherwise ignored.
  if (ar == 1) {
    std::string owner;
    std::uint16_t type = 0, klass = 0, rdlen = 0;
    std::uint32_t ttl = 0;
    if (auto ok = r.name(&owner); !ok) return fail(ok.error());
    if (!r.u16(&type) || !r.u16(&klass) || !r.u32(&ttl) || !r.u16(&rdlen) || !r.skip(rdlen)) {
      return fail(bad("truncated additional record"));
    }
    if (type != kTypeOpt || !owner.empty()) return fail(bad("additional record other than OPT"));
  }
  if (r.pos() != wire.size()) return fail(bad("trailing bytes after the query"));
  return q;
}

Result<Response> parse_response(std::span<const std::uint8_t> wire) {
  Reader r(wire);
  Response resp;
  std::uint16_t flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(&resp.id) || !r.u16(&flags) || !r.u16(&qd) || !r.u16(&an) || !r.u16(&ns) ||
      !r.u16(&ar)) {
    return fail(bad("message shorter than a header"));
  }
  if (!(flags & 0x8000)) return fail(bad("not a response (QR clear)"));
  if (qd != 1) return fail(bad("response without exactly one question"));
  resp.truncated = (flags & 0x0200) != 0;
  resp.rcode = static_cast<Rcode>(flags & 0xf);
  std::uint16_t qclass = 0;
  if (auto ok = r.name(&resp.question_name); !ok) return fail(ok.error());
  if (!r.u16(&resp.question_type) || !r.u16(&qclass)) return fail(bad("truncated question"));
  for (std::uint16_t i = 0; i < an; ++i) {
    Record rec;
    std::uint16_t rdlen = 0;
    if (auto ok = r.name(&rec.owner); !ok) return fail(ok.error());
    if (!r.u16(&rec.type) || !r.u16(&rec.klass) || !r.u32(&rec.ttl) || !r.u16(&rdlen)) {
      return fail(bad("truncated answer record"));
    }
    std::size_t rdata = r.pos();
    if (rdata + rdlen > wire.size()) return fail(bad("record data runs past the message"));
    if (rec.klass == kClassIn && rec.type == kTypeA) {
      if (rdlen != 4) return fail(bad("A record of " + std::to_string(rdlen) + " bytes"));
      std::uint32_t v = 0;
      r.u32(&v);
      rec.address = Ipv4Address(v);
    } else if (rec.klass == kClassIn && rec.type == kTypeCname) {
      if (auto ok = r.name(&rec.target); !ok) return fail(ok.error());
      if (r.pos() != rdata + rdlen) return fail(bad("CNAME data length mismatch"));
    } else {
      r.skip(rdlen);
      continue;
    }
    if (rec.ttl > 0x7fffffffu) rec.ttl = 0;  // RFC 2181 8: treat as zero
    resp.answers.push_back(std::move(rec));
  }
  // Authority and additional sections are not used (the answer is rebuilt from scratch).
  return resp;
}

Resolution follow_chain(const Response& response, const std::string& name) {
  Resolution out;
  std::string current = name;
  bool first = true;
  auto take_ttl = [&](std::uint32_t ttl) {
    out.min_ttl = first ? ttl : std::min(out.min_ttl, ttl);
    first = false;
  };
  for (std::size_t hops = 0; hops <= kMaxChain; ++hops) {
    auto cname = std::find_if(response.answers.begin(), response.answers.end(), [&](auto& rec) {
      return rec.type == kTypeCname && rec.owner == current;
    });
    if (cname == response.answers.end()) break;
    if (hops == kMaxChain) return Resolution{};  // a loop or an absurd chain: nothing
    out.chain.push_back(*cname);
    take_ttl(cname->ttl);
    current = cname->target;
  }
  for (const auto& rec : response.answers) {
    if (rec.type != kTypeA || rec.owner != current || !rec.address) continue;
    if (std::find(out.addresses.begin(), out.addresses.end(), *rec.address) !=
        out.addresses.end()) {
      continue;
    }
    out.addresses.push_back(*rec.address);
    out.chain.push_back(rec);
    take_ttl(rec.ttl);
  }
  return out;
}

std::vector<std::uint8_t> build_query(std::uint16_t id, const std::string& name,
                                      std::uint16_t type) {
  std::vector<std::uint8_t> out;
  put16(out, id);
  put16(out, 0x0100);  // RD
  put16(out, 1);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  auto encoded = encode_name(name);
  if (encoded) out.insert(out.end(), encoded->begin(), encoded->end());
  put16(out, type);
  put16(out, kClassIn);
  return out;
}

std::vector<std::uint8_t> build_header_only(std::uint16_t id, Rcode rcode) {
  std::vector<std::uint8_t> out;
  put16(out, id);
  put16(out, static_cast<std::uint16_t>(0x8000 | 0x0080 | static_cast<std::uint16_t>(rcode)));
  for (int i = 0; i < 4; ++i) put16(out, 0);
  return out;
}

std::vector<std::uint8_t> build_answer(const Query& query, Rcode rcode,
                                       const std::vector<Record>& records, std::uint32_t ttl,
                                       std::size_t max_size, std::size_t* written) {
  std::vector<std::uint8_t> out;
  put16(out, query.id);
  std::uint16_t flags = 0x8000 | 0x0080 | static_cast<std::uint16_t>(rcode);  // QR, RA
  if (query.recursion_desired) flags |= 0x0100;
  put16(out, flags);
  put16(out, 1);
  put16(out, 0);  // ANCOUNT, patched below
  put16(out, 0);
  put16(out, 0);
  out.insert(out.end(), query.question.begin(), query.question.end());
  std::uint16_t count = 0;
  for (const auto& rec : records) {
    std::vector<std::uint8_t> rr;
    auto owner = encode_name(rec.owner);
    if (!owner) break;
    rr.insert(rr.end(), owner->begin(), owner->end());
    put16(rr, rec.type);
    put16(rr, kClassIn);
    put32(rr, ttl);
    if (rec.type == kTypeA && rec.address) {
      put16(rr, 4);
      put32(rr, rec.address->to_uint());
    } else if (rec.type == kTypeCname) {
      auto target = encode_name(rec.target);
      if (!target) break;
      put16(rr, static_cast<std::uint16_t>(target->size()));
      rr.insert(rr.end(), target->begin(), target->end());
    } else {
      continue;
    }
    if (out.size() + rr.size() > max_size) break;
    out.insert(out.end(), rr.begin(), rr.end());
    ++count;
  }
  out[6] = static_cast<std::uint8_t>(count >> 8);
  out[7] = static_cast<std::uint8_t>(count);
  if (written != nullptr) *written = count;
  return out;
}

}  // namespace pvs::dns
