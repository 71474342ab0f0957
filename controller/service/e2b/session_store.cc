#include "e2b/session_store.h"

#include <fstream>
#include <sstream>

#include <Poco/JSON/Parser.h>

#include "core/json/json_writer.h"
#include "e2b/base64.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"

namespace pvs::service::e2b {
namespace {

constexpr std::size_t kMaxFileBytes = 64u << 20;
constexpr std::size_t kMaxField = 4096;

// A string member of `o` of at most kMaxField bytes ("" when absent); nullopt when it is there
// and not such a string.
std::optional<std::string> string_member(const Poco::JSON::Object& o, const std::string& name) {
  if (!o.has(name) || o.isNull(name)) return std::string();
  Poco::Dynamic::Var v = o.get(name);
  if (!v.isString()) return std::nullopt;
  std::string s = v.extract<std::string>();
  if (s.size() > kMaxField) return std::nullopt;
  return s;
}

Result<SessionRecord> record_of(const Poco::JSON::Object& o, std::size_t index) {
  auto bad = [&](const std::string& what) {
    return fail(ErrorCode::kInvalidArgument, "sessions[" + std::to_string(index) + "]: " + what);
  };
  SessionRecord r;
  std::pair<const char*, std::string*> fields[] = {
      {"id", &r.id},       {"access_token", &r.access_token}, {"traffic_token", &r.traffic_token},
      {"owner", &r.owner}, {"template_id", &r.template_id},   {"mask_host", &r.mask_host},
      {"node", &r.node}};
  for (auto& [name, out] : fields) {
    auto v = string_member(o, name);
    if (!v) return bad(std::string(name) + ": not a string of at most 4096 bytes");
    *out = std::move(*v);
  }
  if (r.id.empty() || r.access_token.empty() || r.owner.empty())
    return bad("id, access_token and owner are required");
  if (o.has("env_vars") && !o.isNull("env_vars")) {
    auto env = o.getObject("env_vars");
    if (!env) return bad("env_vars: not an object");
    for (const auto& [k, v] : *env) {
      if (!v.isString()) return bad("env_vars." + k + ": not a string");
      r.env_vars[k] = v.extract<std::string>();
    }
  }
  return r;
}

}  // namespace

SessionStore::SessionStore(std::string path, std::function<SessionFile()> snapshot)
    : path_(std::move(path)), snapshot_(std::move(snapshot)) {
  writer_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

SessionStore::~SessionStore() {
  writer_.request_stop();
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::string SessionStore::encode(const SessionFile& file) {
  JsonWriter w;
  w.begin_object().key("version").value(1);
  if (!file.volume_key.empty()) w.key("volume_key").value(base64_encode(file.volume_key));
  w.key("sessions").begin_array();
  for (const auto& r : file.sessions) {
    w.begin_object()
        .key("id")
        .value(r.id)
        .key("access_token")
        .value(r.access_token)
        .key("traffic_token")
        .value(r.traffic_token)
        .key("owner")
        .value(r.owner)
        .key("template_id")
        .value(r.template_id)
        .key("mask_host")
        .value(r.mask_host)
        .key("node")
        .value(r.node)
        .key("env_vars")
        .value(r.env_vars)
        .end_object();
  }
  w.end_array().end_object();
  return w.take();
}

Result<SessionFile> SessionStore::decode(std::string_view text) {
  Poco::JSON::Object::Ptr top;
  try {
    top = Poco::JSON::Parser().parse(std::string(text)).extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "not JSON: " + e.displayText());
  } catch (const std::exception& e) {
    return fail(ErrorCode::kInvalidArgument, std::string("not a JSON object: ") + e.what());
  }
  try {
    if (!top || !top->has("version") || !top->get("version").isInteger() ||
        top->getValue<int>("version") != 1)
      return fail(ErrorCode::kInvalidArgument, "version: 1 expected");
    SessionFile out;
    if (auto key = string_member(*top, "volume_key"); !key) {
      return fail(ErrorCode::kInvalidArgument, "volume_key: not a string");
    } else if (!key->empty()) {
      auto raw = base64_decode(*key);
      if (!raw || raw->size() != 32)
        return fail(ErrorCode::kInvalidArgument, "volume_key: not 32 bytes in base64");
      out.volume_key = std::move(*raw);
    }
    auto list = top->getArray("sessions");
    if (!list) return fail(ErrorCode::kInvalidArgument, "sessions: an array expected");
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto o = list->getObject(static_cast<unsigned>(i));
      if (!o)
        return fail(ErrorCode::kInvalidArgument,
                    "sessions[" + std::to_string(i) + "]: an object expected");
      auto r = record_of(*o, i);
      if (!r) return tl::unexpected(r.error());
      out.sessions.push_back(std::move(*r));
    }
    return out;
  } catch (const Poco::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, e.displayText());
  }
}

Result<SessionFile> SessionStore::load() const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return SessionFile{};  // none yet
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxFileBytes)
    return fail(ErrorCode::kInvalidArgument, path_ + ": larger than 64 MiB");
  auto file = decode(text.str());
  if (!file) return fail(ErrorCode::kInvalidArgument, path_ + ": " + file.error().message);
  return file;
}

void SessionStore::changed() {
  std::lock_guard lock(mu_);
  ++asked_;
  cv_.notify_all();
}

void SessionStore::flush() {
  std::unique_lock lock(mu_);
  const std::uint64_t want = asked_;
  cv_.wait(lock, [&] { return written_ >= want || !writer_.joinable(); });
}

void SessionStore::run(std::stop_token stop) {
  for (;;) {
    std::uint64_t upto = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return asked_ > written_; });
      if (asked_ == written_) return;  // stopped with nothing left to write
      upto = asked_;
    }
    // Said once when writes start failing (a missing directory, a full disk) and once when
    // they work again, not at every create.
    auto st = write_file_atomic(path_, encode(snapshot_()), {.mode = 0600});
    if (!st && !failing_)
      log::error("e2b.sessions_file: " + st.error().message +
                 ": the E2B sessions are not kept across a restart until it is written again");
    else if (st && failing_)
      log::info("e2b.sessions_file: written again (" + path_ + ")");
    failing_ = !st;
    std::lock_guard lock(mu_);
    written_ = upto;
    cv_.notify_all();
  }
}

}  // namespace pvs::service::e2b
