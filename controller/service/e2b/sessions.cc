#include "e2b/sessions.h"

#include "e2b/filesystem/files_wire.h"
#include "e2b/session_store.h"
#include "http/auth.h"
#include "http/seal.h"

namespace pvs::service::e2b {
namespace {

bool signed_with(const FileSignature& u, const std::string& access_token) {
  std::string expected =
      file_signature(u.path, u.operation, u.username, access_token, u.expiration);
  return u.signature.size() == expected.size() && constant_time_equal(u.signature, expected);
}

bool same_secret(std::string_view given, const std::string& secret) {
  return !given.empty() && given.size() == secret.size() && constant_time_equal(given, secret);
}

}  // namespace

std::string mint_access_token() {
  return generate_token("");
}

SessionRegistry::SessionRegistry(const std::string& sessions_file) {
  if (!sessions_file.empty()) {
    store_ = std::make_unique<SessionStore>(sessions_file, [this] { return contents(); });
    if (auto loaded = store_->load(); !loaded) {
      load_error_ = loaded.error().message;
    } else {
      volume_key_ = std::move(loaded->volume_key);
      for (auto& r : loaded->sessions) kept_.emplace(r.id, std::move(r));
    }
  }
  if (volume_key_.empty()) {
    volume_key_ = new_seal_key();
    // Kept before the first volume token is handed out; a file that could not be read stays
    // as it is until the next change, for the operator to look at.
    if (load_error_.empty()) changed();
  }
}

SessionRegistry::~SessionRegistry() {
  store_.reset();  // its last write, while the sessions are still here
}

std::shared_ptr<SandboxSession> SessionRegistry::ensure(
    const std::shared_ptr<pvs::Sandbox>& sandbox, const std::string& template_id,
    const std::map<std::string, std::string>& env, const PortAccess& ports) {
  std::shared_ptr<SandboxSession> made;
  {
    std::lock_guard lock(mu_);
    auto& slot = sessions_[sandbox->id()];
    if (slot) return slot;
    slot = std::make_shared<SandboxSession>();
    if (auto kept = kept_.find(sandbox->id()); kept != kept_.end()) {
      static_cast<SessionRecord&>(*slot) = std::move(kept->second);
      kept_.erase(kept);
    } else {
      slot->id = sandbox->id();
      slot->access_token = mint_access_token();
      slot->template_id = template_id;
      slot->env_vars = env;
      slot->owner = sandbox->info().owner;
      if (!ports.public_traffic) slot->traffic_token = mint_access_token();
      slot->mask_host = ports.mask_host;
    }
    if (slot->node.empty()) slot->node = sandbox->info().node;  // also a kept one's from before
    slot->processes = std::make_shared<ProcessTable>(sandbox);
    slot->watchers = std::make_shared<Watchers>(sandbox);
    made = slot;
  }
  changed();
  return made;
}

std::shared_ptr<SandboxSession> SessionRegistry::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::string SessionRegistry::kept_owner(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = kept_.find(id);
  return it == kept_.end() ? "" : it->second.owner;
}

const SessionRecord* SessionRegistry::record(const std::string& id) const {
  if (auto it = sessions_.find(id); it != sessions_.end()) return it->second.get();
  if (auto it = kept_.find(id); it != kept_.end()) return &it->second;
  return nullptr;
}

bool SessionRegistry::token_matches(const std::string& id, std::string_view token) const {
  std::lock_guard lock(mu_);
  const SessionRecord* r = record(id);
  return r && same_secret(token, r->access_token);
}

bool SessionRegistry::signature_matches(const std::string& id,
                                        const FileSignature& signed_url) const {
  std::lock_guard lock(mu_);
  const SessionRecord* r = record(id);
  return r && signed_with(signed_url, r->access_token);
}

std::string SessionRegistry::signed_by(const FileSignature& signed_url) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sessions_)
    if (signed_with(signed_url, s->access_token)) return id;
  for (const auto& [id, r] : kept_)
    if (signed_with(signed_url, r.access_token)) return id;
  return "";
}

bool SessionRegistry::traffic_token_matches(const std::string& id, std::string_view token) const {
  std::lock_guard lock(mu_);
  const SessionRecord* r = record(id);
  return r && same_secret(token, r->traffic_token);
}

void SessionRegistry::erase(const std::string& id) {
  std::shared_ptr<SandboxSession> gone;
  {
    std::lock_guard lock(mu_);
    bool was_kept = kept_.erase(id) > 0;
    auto it = sessions_.find(id);
    if (it != sessions_.end()) {
      gone = std::move(it->second);
      sessions_.erase(it);
    } else if (!was_kept) {
      return;
    }
  }
  changed();
  if (!gone) return;
  gone->processes->shutdown();
  gone->watchers->stop_all();
}

void SessionRegistry::shutdown() {
  std::map<std::string, std::shared_ptr<SandboxSession>> all;
  {
    std::lock_guard lock(mu_);
    all = sessions_;  // the file keeps them: the sandboxes run on
  }
  for (auto& [id, s] : all) {
    s->processes->shutdown();
    s->watchers->stop_all();
  }
}

bool kept_prunable(const SessionRecord& record, const std::set<std::string>& unrecovered) {
  return unrecovered.empty() || (!record.node.empty() && !unrecovered.count(record.node));
}

std::size_t SessionRegistry::prune_kept(const std::function<bool(const SessionRecord&)>& gone) {
  std::map<std::string, SessionRecord> kept;
  {
    std::lock_guard lock(mu_);
    kept = kept_;
  }
  std::size_t n = 0;
  for (const auto& [id, r] : kept) {
    if (!gone(r)) continue;  // outside the lock: it may ask the Manager
    std::lock_guard lock(mu_);
    n += kept_.erase(id);
  }
  if (n > 0) changed();
  return n;
}

void SessionRegistry::flush() {
  if (store_) store_->flush();
}

SessionFile SessionRegistry::contents() const {
  std::lock_guard lock(mu_);
  SessionFile out;
  out.volume_key = volume_key_;
  out.sessions.reserve(sessions_.size() + kept_.size());
  for (const auto& [id, s] : sessions_) out.sessions.push_back(*s);
  for (const auto& [id, r] : kept_) out.sessions.push_back(r);
  return out;
}

void SessionRegistry::changed() {
  if (store_) store_->changed();
}

}  // namespace pvs::service::e2b
