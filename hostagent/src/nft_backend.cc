#include "nft_backend.h"

#include <arpa/inet.h>
#include <endian.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/gen.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <type_traits>

#include "pvesandbox/common/log.h"

namespace pvs::agent {
namespace {

// A netlink message buffer: MNL_SOCKET_BUFFER_SIZE's largest value. The macro reads the page size
// at run time (min(page size, 8192)), so an array of it is a variable-length array.
constexpr std::size_t kNlBuffer = 8192;

// Not in Debian 12's uapi header (kernel 6.1); the kernel has it since 6.3.
constexpr std::uint16_t kMsgDestroySetElem = 30;
static_assert(NFT_MSG_DELFLOWTABLE == 24);

// Payload budget of one element message: the element list is one nested attribute with a
// 16-bit length, so stay well below 64 KiB.
constexpr std::size_t kMessageBudget = 60000;
constexpr std::size_t kRxBufferSize = 128 * 1024;

std::size_t align4(std::size_t n) {
  return (n + 3) & ~std::size_t{3};
}

std::size_t element_wire_size(const RawElement& e) {
  // element nest + key nest + data attr + optional u64 timeout attr
  return 4 + 4 + 4 + align4(e.key.size()) + (e.timeout_ms ? 12 : 0);
}

struct NftnlSet {
  nftnl_set* s = nftnl_set_alloc();
  ~NftnlSet() {
    if (s != nullptr) nftnl_set_free(s);
  }
  NftnlSet() = default;
  // The set `ref` names (its table and name; the family goes in the message header).
  explicit NftnlSet(const SetRef& ref) {
    nftnl_set_set_str(s, NFTNL_SET_TABLE, ref.table.c_str());
    nftnl_set_set_str(s, NFTNL_SET_NAME, ref.set.c_str());
  }
  NftnlSet(const NftnlSet&) = delete;
  NftnlSet& operator=(const NftnlSet&) = delete;
};

Error kernel_error(int err, const std::string& what, const std::string& ext) {
  ErrorCode code = ErrorCode::kIo;
  switch (err) {
    case ENOENT: code = ErrorCode::kNotFound; break;
    case EEXIST: code = ErrorCode::kAlreadyExists; break;
    case EINVAL:
    case EOPNOTSUPP: code = ErrorCode::kInvalidArgument; break;
    case ENFILE:
    case ENOSPC:
    case E2BIG:
    case EMSGSIZE: code = ErrorCode::kTooLarge; break;
    case EPERM:
    case EACCES: code = ErrorCode::kPermissionDenied; break;
    default: break;
  }
  std::string message = what + ": " + std::strerror(err);
  if (!ext.empty()) message += " (" + ext + ")";
  return Error{code, message};
}

// The extended-ack message of an NLMSG_ERROR sent with NETLINK_CAP_ACK, if any.
std::string ext_ack_message(const nlmsghdr* nlh) {
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) == 0) return {};
  const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  // With NETLINK_CAP_ACK the original message is cut to its header.
  std::size_t offset = sizeof(nlmsgerr);
  if ((nlh->nlmsg_flags & NLM_F_CAPPED) == 0 && err->error != 0) {
    offset += err->msg.nlmsg_len - sizeof(nlmsghdr);
  }
  std::string out;
  const char* begin = static_cast<const char*>(mnl_nlmsg_get_payload_offset(nlh, offset));
  const char* end = reinterpret_cast<const char*>(nlh) + nlh->nlmsg_len;
  const auto* attr = reinterpret_cast<const nlattr*>(begin);
  while (mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<const char*>(attr)))) {
    if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
        mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0) {
      out = mnl_attr_get_str(attr);
    }
    attr = static_cast<const nlattr*>(mnl_attr_next(attr));
  }
  return out;
}

}  // namespace

// ---- NftBackend -----------------------------------------------------------------------------

Result<std::unique_ptr<NftBackend>> NftBackend::open(const Options& options) {
  std::unique_ptr<NftBackend> backend(new NftBackend());
  backend->ack_timeout_ms_ = options.ack_timeout_ms;
  backend->nl_ = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (backend->nl_ == nullptr) return fail(errno_error("netlink socket", errno));
  if (mnl_socket_bind(backend->nl_, 0, MNL_SOCKET_AUTOPID) < 0) {
    return fail(errno_error("netlink bind", errno));
  }
  backend->portid_ = mnl_socket_get_portid(backend->nl_);
  int one = 1;
  // Acks carry only the header of the failed message, plus the kernel's reason text.
  mnl_socket_setsockopt(backend->nl_, NETLINK_CAP_ACK, &one, sizeof(one));
  mnl_socket_setsockopt(backend->nl_, NETLINK_EXT_ACK, &one, sizeof(one));
  int fd = mnl_socket_get_fd(backend->nl_);
  int size = options.socket_buffer_bytes;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  }
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  backend->rx_.resize(kRxBufferSize);
  if (options.use_destroy.has_value()) {
    backend->destroy_supported_ = *options.use_destroy;
  } else if (auto probed = backend->probe_destroy(); !probed) {
    return fail(probed.error());
  }
  return backend;
}

NftBackend::~NftBackend() {
  if (nl_ != nullptr) mnl_socket_close(nl_);
}

// DESTROYSETELEM against a table that cannot exist: a kernel that knows the message looks the
// table up and says ENOENT; an older one rejects the unknown message type with EINVAL/EOPNOTSUPP.
Status NftBackend::probe_destroy() {
  std::vector<char> buf(4096);
  std::uint32_t batch_seq = next_seq();
  char* pos = buf.data();
  nftnl_batch_begin(pos, batch_seq);
  pos += NLMSG_ALIGN(reinterpret_cast<nlmsghdr*>(pos)->nlmsg_len);
  std::uint32_t seq = next_seq();
  NftnlSet s;
  nftnl_set_set_str(s.s, NFTNL_SET_TABLE, "pve-sandbox-destroy-probe");
  nftnl_set_set_str(s.s, NFTNL_SET_NAME, "probe");
  nftnl_set_elem* e = nftnl_set_elem_alloc();
  std::uint32_t key = 0;
  nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
  nftnl_set_elem_add(s.s, e);
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(pos, kMsgDestroySetElem, NFPROTO_INET, NLM_F_ACK, seq);
  nftnl_set_elems_nlmsg_build_payload(nlh, s.s);
  pos += NLMSG_ALIGN(nlh->nlmsg_len);
  nftnl_batch_end(pos, next_seq());
  pos += NLMSG_ALIGN(reinterpret_cast<nlmsghdr*>(pos)->nlmsg_len);
  auto result =
      send_and_ack(buf.data(), static_cast<std::size_t>(pos - buf.data()), seq, seq, batch_seq);
  --stats_.batches;  // the probe is not a change
  if (result) {
    destroy_supported_ = true;  // cannot happen, but a success means the verb exists
  } else if (result.error().code == ErrorCode::kNotFound) {
    destroy_supported_ = true;
    --stats_.failed_batches;
  } else if (result.error().code == ErrorCode::kInvalidArgument) {
    destroy_supported_ = false;
    --stats_.failed_batches;
  } else {
    return fail(result.error().code, "probing NFT_MSG_DESTROYSETELEM: " + result.error().message);
  }
  log::info(std::string("kernel destroy-element message: ") +
            (destroy_supported_ ? "supported" : "not supported, emulating with add+delete"));
  return {};
}

Status NftBackend::commit(const Batch& batch) {
  if (batch.empty()) return {};
  for (const auto& op : batch.ops()) {
    for (const auto& e : op.elements) {
      if (!e.key.complete()) {
        return fail(ErrorCode::kInvalidArgument, "element key of " + std::to_string(e.key.size()) +
                                                     " bytes in " + op.set.to_string() +
                                                     ": longer than " +
                                                     std::to_string(ElementKey::kMaxSize));
      }
    }
  }
  // Size the buffer: every message gets a generous fixed overhead.
  std::size_t bytes = 1024;
  for (const auto& op : batch.ops()) {
    std::size_t elements = 0;
    for (const auto& e : op.elements) elements += element_wire_size(e);
    std::size_t messages = elements / kMessageBudget + 1;
    bytes += (elements + messages * 1024) * (op.kind == Batch::Kind::kDestroy ? 2 : 1);
  }
  // One buffer for the backend's lifetime: a fresh multi-100-KiB vector per batch costs an
  // mmap, page faults and a munmap every time.
  if (tx_.size() < bytes) tx_.resize(bytes);
  std::vector<char>& buf = tx_;
  std::size_t used = 0;
  auto put = [&](nlmsghdr* nlh) { used += NLMSG_ALIGN(nlh->nlmsg_len); };

  std::uint32_t batch_seq = next_seq();
  put(nftnl_batch_begin(buf.data() + used, batch_seq));
  std::uint32_t first_seq = seq_;
  std::uint32_t last_seq = first_seq;

  // The element messages are written straight into the buffer with libmnl (the attribute
  // layout libnftnl's nftnl_set_elems_nlmsg_build_payload() produces): no per-element heap
  // objects, which dominated the CPU time of a 10,000-element SYNC.
  auto message = [&](std::uint16_t type, std::uint16_t flags, const Batch::Op& op, std::size_t from,
                     std::size_t to, bool with_timeout) {
    last_seq = next_seq();
    nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf.data() + used, type, op.set.family,
                                          static_cast<std::uint16_t>(flags | NLM_F_ACK), last_seq);
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, op.set.set.c_str());
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, op.set.table.c_str());
    if (from < to) {
      nlattr* list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
      for (std::size_t i = from; i < to; ++i) {
        const RawElement& element = op.elements[i];
        nlattr* elem = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        if (with_timeout && element.timeout_ms) {
          mnl_attr_put_u64(nlh, NFTA_SET_ELEM_TIMEOUT, htobe64(*element.timeout_ms));
        }
        nlattr* key = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nlh, NFTA_DATA_VALUE, element.key.size(), element.key.data());
        mnl_attr_nest_end(nlh, key);
        mnl_attr_nest_end(nlh, elem);
      }
      mnl_attr_nest_end(nlh, list);
    }
    put(nlh);
    ++stats_.messages;
  };
  // Splits the op's elements into messages below the size budget.
  auto chunked = [&](std::uint16_t type, std::uint16_t flags, const Batch::Op& op,
                     bool with_timeout) {
    std::size_t from = 0;
    while (from < op.elements.size()) {
      std::size_t size = 0;
      std::size_t to = from;
      while (to < op.elements.size() &&
             size + element_wire_size(op.elements[to]) < kMessageBudget) {
        size += element_wire_size(op.elements[to]);
        ++to;
      }
      message(type, flags, op, from, to, with_timeout);
      from = to;
    }
  };

  for (const auto& op : batch.ops()) {
    switch (op.kind) {
      case Batch::Kind::kAdd: chunked(NFT_MSG_NEWSETELEM, NLM_F_CREATE, op, true); break;
      case Batch::Kind::kFlush: message(NFT_MSG_DELSETELEM, 0, op, 0, 0, false); break;
      case Batch::Kind::kDestroy:
        if (destroy_supported_) {
          chunked(kMsgDestroySetElem, 0, op, false);
        } else {
          // Emulation: make sure the element exists, then delete it, in the same transaction.
          chunked(NFT_MSG_NEWSETELEM, NLM_F_CREATE, op, false);
          chunked(NFT_MSG_DELSETELEM, 0, op, false);
        }
        break;
    }
  }
  put(nftnl_batch_end(buf.data() + used, next_seq()));
  return send_and_ack(buf.data(), used, first_seq, last_seq, batch_seq);
}

Status NftBackend::send_and_ack(const char* buf, std::size_t len, std::uint32_t first_seq,
                                std::uint32_t last_seq, std::uint32_t batch_seq) {
  if (need_drain_) drain();
  ++stats_.batches;
  auto failed = [&](Error error) {
    ++stats_.failed_batches;
    // Whatever the kernel still sends about this batch must not confuse the next request.
    need_drain_ = true;
    return fail(std::move(error));
  };
  if (mnl_socket_sendto(nl_, buf, len) < 0) {
    return failed(errno_error("netlink send of " + std::to_string(len) + " bytes", errno));
  }
  std::size_t pending = last_seq - first_seq + 1;
  std::vector<bool> acked(pending, false);
  std::optional<Error> first_error;
  bool batch_failed = false;
  int fd = mnl_socket_get_fd(nl_);
  // The kernel handles a batch inside sendmsg(), so all acks are queued by now; the timeout
  // only guards against the unexpected.
  while (pending > 0) {
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, batch_failed ? 0 : ack_timeout_ms_);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return failed(errno_error("poll on netlink socket", errno));
    }
    if (ready == 0) {
      if (batch_failed) break;
      return failed(Error{ErrorCode::kTimeout, "no acknowledgement from the kernel within " +
                                                   std::to_string(ack_timeout_ms_) + " ms"});
    }
    ssize_t n = recv(fd, rx_.data(), rx_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        ++stats_.lost_acks;
        return failed(Error{ErrorCode::kUnavailable,
                            "netlink acknowledgements lost (ENOBUFS): state unknown"});
      }
      return failed(errno_error("netlink receive", errno));
    }
    auto remaining = static_cast<int>(n);
    for (auto* nlh = reinterpret_cast<const nlmsghdr*>(rx_.data()); mnl_nlmsg_ok(nlh, remaining);
         nlh = mnl_nlmsg_next(nlh, &remaining)) {
      if (nlh->nlmsg_pid != portid_ || nlh->nlmsg_type != NLMSG_ERROR) continue;
      if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) continue;
      const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
      std::uint32_t seq = nlh->nlmsg_seq;
      if (seq == batch_seq) {
        if (err->error != 0) {
          batch_failed = true;
          if (!first_error) {
            first_error = kernel_error(-err->error, "nftables batch", ext_ack_message(nlh));
          }
        }
        continue;
      }
      if (seq < first_seq || seq > last_seq) continue;  // a stale ack of an earlier request
      std::size_t index = seq - first_seq;
      if (acked[index]) continue;
      acked[index] = true;
      --pending;
      if (err->error != 0) {
        batch_failed = true;
        if (!first_error) {
          first_error = kernel_error(-err->error, "nftables message " + std::to_string(index + 1),
                                     ext_ack_message(nlh));
        }
      }
    }
  }
  if (first_error) return failed(*first_error);
  if (pending > 0) {
    return failed(Error{ErrorCode::kInternal, "batch failed without an error acknowledgement"});
  }
  return {};
}

namespace {
template <typename F>
int trampoline(const nlmsghdr* nlh, void* data) {
  return (*static_cast<F*>(data))(nlh);
}
}  // namespace

void NftBackend::drain() {
  int fd = mnl_socket_get_fd(nl_);
  while (recv(fd, rx_.data(), rx_.size(), MSG_DONTWAIT) > 0) {
  }
  need_drain_ = false;
}

template <typename F>
Status NftBackend::request(const char* buf, std::size_t len, std::uint32_t seq, F&& on_msg) {
  if (need_drain_) drain();
  if (mnl_socket_sendto(nl_, buf, len) < 0) return fail(errno_error("netlink send", errno));
  int fd = mnl_socket_get_fd(nl_);
  using Fn = std::remove_reference_t<F>;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, ack_timeout_ms_);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return fail(errno_error("poll on netlink socket", errno));
    }
    if (ready == 0) {
      need_drain_ = true;
      return fail(ErrorCode::kTimeout, "no reply from the kernel");
    }
    ssize_t n = mnl_socket_recvfrom(nl_, rx_.data(), rx_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno_error("netlink receive", errno));
    }
    int rc =
        mnl_cb_run(rx_.data(), static_cast<std::size_t>(n), seq, portid_, &trampoline<Fn>, &on_msg);
    if (rc == MNL_CB_STOP) return {};
    if (rc == MNL_CB_ERROR) {
      int err = errno;
      need_drain_ = true;  // what is left of this request must not confuse the next one
      return fail(kernel_error(err, "nftables request", ""));
    }
  }
}

namespace {

// The packets of an element's counter (NFTA_SET_ELEM_EXPR or NFTA_SET_ELEM_EXPRESSIONS), if it
// has one.
std::optional<std::uint64_t> element_packets(nftnl_set_elem* e) {
  std::optional<std::uint64_t> packets;
  auto on_expr = [](nftnl_expr* expr, void* data) -> int {
    const char* name = nftnl_expr_get_str(expr, NFTNL_EXPR_NAME);
    if (name != nullptr && std::strcmp(name, "counter") == 0 &&
        nftnl_expr_is_set(expr, NFTNL_EXPR_CTR_PACKETS)) {
      *static_cast<std::optional<std::uint64_t>*>(data) =
          nftnl_expr_get_u64(expr, NFTNL_EXPR_CTR_PACKETS);
    }
    return 0;
  };
  nftnl_set_elem_expr_foreach(e, on_expr, &packets);
  return packets;
}

}  // namespace

Status NftBackend::dump(const SetRef& set, std::vector<ListedElement>* out, int* messages) {
  char buf[kNlBuffer];
  std::uint32_t seq = next_seq();
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, set.family, NLM_F_DUMP, seq);
  NftnlSet s(set);
  nftnl_set_elems_nlmsg_build_payload(nlh, s.s);
  out->clear();
  *messages = 0;
  auto on_msg = [&](const nlmsghdr* msg) -> int {
    ++*messages;
    NftnlSet parsed;
    if (nftnl_set_elems_nlmsg_parse(msg, parsed.s) < 0) return MNL_CB_ERROR;
    nftnl_set_elems_iter* it = nftnl_set_elems_iter_create(parsed.s);
    if (it == nullptr) return MNL_CB_ERROR;
    for (nftnl_set_elem* e = nftnl_set_elems_iter_next(it); e != nullptr;
         e = nftnl_set_elems_iter_next(it)) {
      ListedElement element;
      std::uint32_t key_len = 0;
      const void* key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &key_len);
      if (key != nullptr) element.key = ElementKey(static_cast<const std::uint8_t*>(key), key_len);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION)) {
        element.expires_in_ms = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_EXPIRATION);
      } else if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_TIMEOUT)) {
        element.expires_in_ms = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_TIMEOUT);
      }
      element.packets = element_packets(e);
      out->push_back(std::move(element));
    }
    nftnl_set_elems_iter_destroy(it);
    return MNL_CB_OK;
  };
  return request(buf, nlh->nlmsg_len, seq, on_msg);
}

Result<std::vector<ListedElement>> NftBackend::list(const SetRef& set) {
  auto by_key = [](const ListedElement& a, const ListedElement& b) { return a.key < b.key; };
  auto same_key = [](const ListedElement& a, const ListedElement& b) { return a.key == b.key; };
  std::optional<std::vector<ListedElement>> previous;
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::vector<ListedElement> out;
    int messages = 0;
    if (auto status = dump(set, &out, &messages); !status) {
      // NLM_F_DUMP_INTR (libmnl reports EINTR): a commit raced the dump; start again.
      if (status.error().message.find(std::strerror(EINTR)) != std::string::npos) continue;
      return fail(status.error().code,
                  "listing " + set.to_string() + ": " + status.error().message);
    }
    std::sort(out.begin(), out.end(), by_key);
    out.erase(std::unique(out.begin(), out.end(), same_key), out.end());
    if (messages <= 1) return out;  // one walk of the table: consistent
    if (previous &&
        std::equal(out.begin(), out.end(), previous->begin(), previous->end(), same_key))
      return out;
    previous = std::move(out);
  }
  return fail(ErrorCode::kUnavailable, "listing " + set.to_string() + ": no stable dump in 10");
}

Result<SetInfo> NftBackend::info(const SetRef& set) {
  SetInfo info;
  {
    char buf[kNlBuffer];
    std::uint32_t seq = next_seq();
    nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETTABLE, set.family, NLM_F_ACK, seq);
    nftnl_table* t = nftnl_table_alloc();
    nftnl_table_set_str(t, NFTNL_TABLE_NAME, set.table.c_str());
    nftnl_table_nlmsg_build_payload(nlh, t);
    nftnl_table_free(t);
    auto status = request(buf, nlh->nlmsg_len, seq, [](const nlmsghdr*) { return MNL_CB_OK; });
    if (!status) {
      if (status.error().code == ErrorCode::kNotFound) return info;
      return fail(status.error());
    }
    info.table_present = true;
  }
  char buf[kNlBuffer];
  std::uint32_t seq = next_seq();
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSET, set.family, NLM_F_ACK, seq);
  NftnlSet s(set);
  nftnl_set_nlmsg_build_payload(nlh, s.s);
  auto status = request(buf, nlh->nlmsg_len, seq, [&](const nlmsghdr* msg) -> int {
    NftnlSet parsed;
    if (nftnl_set_nlmsg_parse(msg, parsed.s) < 0) return MNL_CB_ERROR;
    info.set_present = true;
    std::uint32_t flags = nftnl_set_is_set(parsed.s, NFTNL_SET_FLAGS)
                              ? nftnl_set_get_u32(parsed.s, NFTNL_SET_FLAGS)
                              : 0;
    info.has_timeout = (flags & NFT_SET_TIMEOUT) != 0;
    info.key_len = nftnl_set_is_set(parsed.s, NFTNL_SET_KEY_LEN)
                       ? nftnl_set_get_u32(parsed.s, NFTNL_SET_KEY_LEN)
                       : 0;
    info.timeout_ms = nftnl_set_is_set(parsed.s, NFTNL_SET_TIMEOUT)
                          ? nftnl_set_get_u64(parsed.s, NFTNL_SET_TIMEOUT)
                          : 0;
    return MNL_CB_OK;
  });
  if (!status) {
    if (status.error().code == ErrorCode::kNotFound) return info;
    return fail(status.error());
  }
  return info;
}

Result<std::uint32_t> NftBackend::generation() {
  char buf[kNlBuffer];
  std::uint32_t seq = next_seq();
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, seq);
  std::optional<std::uint32_t> id;
  auto status = request(buf, nlh->nlmsg_len, seq, [&](const nlmsghdr* msg) -> int {
    nftnl_gen* gen = nftnl_gen_alloc();
    if (nftnl_gen_nlmsg_parse(msg, gen) == 0 && nftnl_gen_is_set(gen, NFTNL_GEN_ID)) {
      id = nftnl_gen_get_u32(gen, NFTNL_GEN_ID);
    }
    nftnl_gen_free(gen);
    return MNL_CB_OK;
  });
  if (!status) return fail(status.error());
  if (!id) return fail(ErrorCode::kInternal, "GETGEN reply without a generation id");
  return *id;
}

}  // namespace pvs::agent
