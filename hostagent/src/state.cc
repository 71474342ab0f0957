#include "state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::agent {
namespace {

constexpr std::string_view kHeader = "pve-sandbox-agent-state 1";
constexpr std::size_t kMaxStateFile = 64 * 1024 * 1024;

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    auto space = line.find(' ');
    out.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return out;
}

std::optional<std::uint64_t> parse_epoch(std::string_view f) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() ||
      (f.size() > 1 && f[0] == '0')) {
    return std::nullopt;
  }
  return value;
}

Result<std::optional<std::int64_t>> parse_expiry(std::string_view f) {
  if (f == "-") return std::optional<std::int64_t>();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || value <= 0 || f[0] == '0') {
    return fail(ErrorCode::kInvalidArgument, "invalid expiry " + pvs::quoted(f));
  }
  return std::optional<std::int64_t>(value);
}

Result<std::string> read_file(const std::string& path, bool* missing) {
  *missing = false;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      *missing = true;
      return std::string();
    }
    return fail(errno_error(path, errno));
  }
  std::string text;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno_error("reading " + path, errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxStateFile) {
      return fail(ErrorCode::kTooLarge, path + " is larger than 64 MiB");
    }
  }
  return text;
}

// "egress <ipv4> <ports> <names>" through the protocol's own EGRESS parser.
Result<std::pair<Ipv4Address, proto::EgressList>> parse_egress_record(
    const std::vector<std::string_view>& fields) {
  if (fields.size() != 4) {
    return fail(ErrorCode::kInvalidArgument, "expected: egress <ipv4> <ports> <names>");
  }
  auto request =
      proto::parse_request("EGRESS " + std::string(fields[1]) + " ports=" + std::string(fields[2]) +
                           " names=" + std::string(fields[3]));
  if (!request) return fail(request.error());
  const auto& egress = std::get<proto::EgressRequest>(*request);
  return std::make_pair(egress.address, *egress.list);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

}  // namespace

std::string egress_record(Ipv4Address source, const proto::EgressList* list) {
  if (list == nullptr) return "egress-off " + source.to_string() + "\n";
  std::vector<std::string> ports;
  for (auto p : list->ports) ports.push_back(std::to_string(p));
  return "egress " + source.to_string() + " " + join(ports) + " " + join(list->names) + "\n";
}

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::size_t DesiredState::prune(std::int64_t now_ms) {
  std::size_t dropped = 0;
  for (auto it = grants.begin(); it != grants.end();) {
    if (it->second && *it->second <= now_ms) {
      it = grants.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

Result<DesiredState> parse_state(std::string_view text) {
  DesiredState state;
  std::size_t line_no = 0;
  bool header = false;
  auto bad = [&](const std::string& what) {
    return fail(ErrorCode::kInvalidArgument, "line " + std::to_string(line_no) + ": " + what);
  };
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return bad("not terminated by a newline (truncated file?)");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    for (char c : line) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) return bad("byte outside printable ASCII");
    }
    if (!header) {
      if (line != kHeader) return bad("expected " + std::string(kHeader));
      header = true;
      continue;
    }
    auto fields = fields_of(line);
    if (fields.empty() || fields[0].empty()) return bad("empty line");
    if (fields[0] == "epoch") {
      if (line_no != 2 || fields.size() != 2) return bad("epoch belongs on line 2");
      auto epoch = parse_epoch(fields[1]);
      if (!epoch) return bad("invalid epoch " + pvs::quoted(fields[1]));
      state.epoch = *epoch;
    } else if (fields[0] == "grant") {
      if (fields.size() != 3) return bad("expected: grant <ipv4> <expiry-ms|->");
      auto address = Ipv4Address::parse(fields[1]);
      if (!address) return bad(address.error().message);
      auto expiry = parse_expiry(fields[2]);
      if (!expiry) return bad(expiry.error().message);
      if (!state.grants.emplace(*address, *expiry).second) {
        return bad("address " + address->to_string() + " listed twice");
      }
    } else if (fields[0] == "bind") {
      if (fields.size() != 4) return bad("expected: bind <port> <mac> <ipv4>");
      auto request = proto::parse_request("BIND " + std::string(fields[1]) + " " +
                                          std::string(fields[2]) + " " + std::string(fields[3]));
      if (!request) return bad(request.error().message);
      const auto& binding = std::get<proto::BindRequest>(*request).binding;
      if (!state.bindings.emplace(binding.port, binding).second) {
        return bad("port " + binding.port + " listed twice");
      }
    } else if (fields[0] == "egress") {
      auto record = parse_egress_record(fields);
      if (!record) return bad(record.error().message);
      if (!state.egress.emplace(record->first, record->second).second) {
        return bad("egress source " + record->first.to_string() + " listed twice");
      }
    } else {
      return bad("unknown record " + pvs::quoted(fields[0], 16));
    }
  }
  if (!header) return fail(ErrorCode::kInvalidArgument, "empty state file");
  return state;
}

namespace {

// Decimal IPv4 without temporaries: a 10,000-grant snapshot is formatted on every SYNC.
void append_ipv4(std::string& out, Ipv4Address address) {
  std::uint32_t v = address.to_uint();
  char buf[16];
  char* p = buf;
  for (int shift = 24; shift >= 0; shift -= 8) {
    p = std::to_chars(p, buf + sizeof(buf), (v >> shift) & 0xffu).ptr;
    *p++ = '.';
  }
  out.append(buf, static_cast<std::size_t>(p - buf - 1));
}

template <typename T>
void append_number(std::string& out, T value) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  out.append(buf, static_cast<std::size_t>(end - buf));
}

void append_grants(std::string& out,
                   const std::map<Ipv4Address, std::optional<std::int64_t>>& grants) {
  for (const auto& [address, expiry] : grants) {
    out += "grant ";
    append_ipv4(out, address);
    out += ' ';
    if (expiry) {
      append_number(out, *expiry);
    } else {
      out += '-';
    }
    out += '\n';
  }
}

std::string format_state(const DesiredState& state, std::uint64_t epoch) {
  std::string out;
  out.reserve(64 + state.grants.size() * 32 + state.bindings.size() * 64);
  out += kHeader;
  out += "\nepoch ";
  append_number(out, epoch);
  out += '\n';
  append_grants(out, state.grants);
  for (const auto& [port, b] : state.bindings) {
    out += "bind " + port + " " + b.mac.to_string() + " " + b.address.to_string() + "\n";
  }
  for (const auto& [source, list] : state.egress) out += egress_record(source, &list);
  return out;
}

}  // namespace

std::string format_state(const DesiredState& state) {
  return format_state(state, state.epoch);
}

Result<std::optional<DesiredState>> load_state(const std::string& path) {
  bool missing = false;
  auto text = read_file(path, &missing);
  if (!text) return fail(text.error());
  if (missing) return std::optional<DesiredState>();
  auto state = parse_state(*text);
  if (!state) return fail(state.error().code, "state file " + path + ": " + state.error().message);
  return std::optional<DesiredState>(std::move(*state));
}

Status save_state(const std::string& path, const DesiredState& state, bool fsync) {
  return write_file_atomic(path, format_state(state), {.mode = 0600, .fsync = fsync});
}

void append_sync_records(std::string* out,
                         const std::map<Ipv4Address, std::optional<std::int64_t>>& grants) {
  out->reserve(out->size() + 16 + grants.size() * 32);
  *out += "sync ";
  append_number(*out, grants.size());
  *out += '\n';
  append_grants(*out, grants);
}

Result<std::uint64_t> apply_journal(std::string_view text, DesiredState* state) {
  std::size_t line_no = 0;
  std::optional<std::uint64_t> epoch;
  // Inside a `sync` group: the grants collected so far and how many lines are still due.
  std::optional<std::map<Ipv4Address, std::optional<std::int64_t>>> sync_grants;
  std::size_t sync_left = 0;
  auto bad = [&](const std::string& what) {
    return fail(ErrorCode::kInvalidArgument,
                "journal line " + std::to_string(line_no) + ": " + what);
  };
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // torn last write: never acknowledged
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    for (char c : line) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) return bad("byte outside printable ASCII");
    }
    auto fields = fields_of(line);
    if (fields.empty() || fields[0].empty()) return bad("empty line");
    if (!epoch) {
      if (fields[0] != "epoch" || fields.size() != 2) return bad("expected: epoch <n>");
      epoch = parse_epoch(fields[1]);
      if (!epoch) return bad("invalid epoch " + pvs::quoted(fields[1]));
      continue;
    }
    if (sync_grants) {
      if (fields[0] != "grant" || fields.size() != 3) return bad("expected a grant of the sync");
      auto address = Ipv4Address::parse(fields[1]);
      if (!address) return bad(address.error().message);
      auto expiry = parse_expiry(fields[2]);
      if (!expiry) return bad(expiry.error().message);
      if (!sync_grants->emplace(*address, *expiry).second) {
        return bad("address " + address->to_string() + " twice in one sync");
      }
      if (--sync_left == 0) {
        state->grants = std::move(*sync_grants);
        sync_grants.reset();
      }
      continue;
    }
    if (fields[0] == "sync" && fields.size() == 2) {
      auto count = parse_epoch(fields[1]);  // same syntax: a decimal without leading zeros
      if (!count) return bad("invalid count " + pvs::quoted(fields[1]));
      if (*count == 0) {
        state->grants.clear();
      } else {
        sync_grants.emplace();
        sync_left = static_cast<std::size_t>(*count);
      }
    } else if (fields[0] == "grant" && fields.size() == 3) {
      auto address = Ipv4Address::parse(fields[1]);
      if (!address) return bad(address.error().message);
      auto expiry = parse_expiry(fields[2]);
      if (!expiry) return bad(expiry.error().message);
      state->grants[*address] = *expiry;
    } else if (fields[0] == "revoke" && fields.size() == 2) {
      auto address = Ipv4Address::parse(fields[1]);
      if (!address) return bad(address.error().message);
      state->grants.erase(*address);
    } else if (fields[0] == "bind" && fields.size() == 4) {
      auto request = proto::parse_request("BIND " + std::string(fields[1]) + " " +
                                          std::string(fields[2]) + " " + std::string(fields[3]));
      if (!request) return bad(request.error().message);
      const auto& binding = std::get<proto::BindRequest>(*request).binding;
      state->bindings[binding.port] = binding;
    } else if (fields[0] == "unbind" && fields.size() == 2) {
      if (!proto::is_valid_port_name(fields[1]))
        return bad("invalid port " + pvs::quoted(fields[1]));
      state->bindings.erase(std::string(fields[1]));
    } else if (fields[0] == "egress") {
      auto record = parse_egress_record(fields);
      if (!record) return bad(record.error().message);
      state->egress[record->first] = record->second;
    } else if (fields[0] == "egress-off" && fields.size() == 2) {
      auto address = Ipv4Address::parse(fields[1]);
      if (!address) return bad(address.error().message);
      state->egress.erase(*address);
    } else {
      return bad("unknown record " + pvs::quoted(line, 32));
    }
  }
  if (!epoch) return fail(ErrorCode::kInvalidArgument, "journal without an epoch line");
  return *epoch;
}

StateStore::~StateStore() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

Result<std::optional<DesiredState>> StateStore::open() {
  auto snapshot = load_state(path_);
  if (!snapshot) return fail(snapshot.error());
  bool missing = false;
  std::string journal_path = path_ + ".journal";
  auto journal = read_file(journal_path, &missing);
  if (!journal) return fail(journal.error());
  std::optional<DesiredState> state = std::move(*snapshot);
  if (!missing && !journal->empty()) {
    DesiredState replayed = state ? *state : DesiredState{};
    auto epoch = apply_journal(*journal, &replayed);
    if (!epoch) return fail(epoch.error().code, journal_path + ": " + epoch.error().message);
    // A journal of another epoch predates the snapshot (a crash during compaction): skip it.
    if (*epoch == replayed.epoch) state = std::move(replayed);
  }
  epoch_ = state ? state->epoch : 0;
  return state;
}

Status StateStore::start_journal() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
  std::string journal_path = path_ + ".journal";
  journal_fd_ =
      ::open(journal_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (journal_fd_ < 0) return fail(errno_error("opening " + journal_path, errno));
  journal_bytes_ = 0;
  return append("epoch " + std::to_string(epoch_) + "\n");
}

Status StateStore::append(std::string_view records) {
  if (journal_fd_ < 0) return fail(ErrorCode::kInternal, "state journal not open");
  if (auto w = write_all(journal_fd_, records, "appending to " + path_ + ".journal"); !w) {
    return w;
  }
  journal_bytes_ += records.size();
  if (fsync_ && ::fdatasync(journal_fd_) != 0) {
    return fail(errno_error("fdatasync " + path_ + ".journal", errno));
  }
  return {};
}

Status StateStore::snapshot(const DesiredState& state) {
  // Formatted with the next epoch directly: copying a 10,000-grant map cost more than writing it.
  if (auto ok = write_file_atomic(path_, format_state(state, epoch_ + 1),
                                  {.mode = 0600, .fsync = fsync_});
      !ok) {
    return ok;
  }
  ++epoch_;
  return start_journal();
}

}  // namespace pvs::agent
