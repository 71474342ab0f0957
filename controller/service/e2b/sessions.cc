#include "e2b/sessions.h"

#include "e2b/filesystem/files_wire.h"
#include "http/auth.h"

namespace pvs::service::e2b {

std::string mint_access_token() {
  return generate_token("");
}

std::shared_ptr<SandboxSession> SessionRegistry::ensure(
    const std::shared_ptr<pvs::Sandbox>& sandbox, const std::string& template_id,
    const std::map<std::string, std::string>& env, const PortAccess& ports) {
  std::lock_guard lock(mu_);
  auto& slot = sessions_[sandbox->id()];
  if (!slot) {
    slot = std::make_shared<SandboxSession>();
    slot->id = sandbox->id();
    slot->access_token = mint_access_token();
    slot->template_id = template_id;
    slot->env_vars = env;
    slot->processes = std::make_shared<ProcessTable>(sandbox);
    slot->watchers = std::make_shared<Watchers>(sandbox);
    slot->owner = sandbox->info().owner;
    if (!ports.public_traffic) slot->traffic_token = mint_access_token();
    slot->mask_host = ports.mask_host;
  }
  return slot;
}

std::shared_ptr<SandboxSession> SessionRegistry::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

bool SessionRegistry::token_matches(const std::string& id, std::string_view token) const {
  auto s = find(id);
  return s && !token.empty() && token.size() == s->access_token.size() &&
         constant_time_equal(token, s->access_token);
}

namespace {

bool signed_with(const FileSignature& u, const std::string& access_token) {
  std::string expected =
      file_signature(u.path, u.operation, u.username, access_token, u.expiration);
  return u.signature.size() == expected.size() && constant_time_equal(u.signature, expected);
}

}  // namespace

bool SessionRegistry::signature_matches(const std::string& id,
                                        const FileSignature& signed_url) const {
  auto s = find(id);
  return s && signed_with(signed_url, s->access_token);
}

std::string SessionRegistry::signed_by(const FileSignature& signed_url) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sessions_)
    if (signed_with(signed_url, s->access_token)) return id;
  return "";
}

bool SessionRegistry::traffic_token_matches(const std::string& id, std::string_view token) const {
  auto s = find(id);
  return s && !s->traffic_token.empty() && token.size() == s->traffic_token.size() &&
         constant_time_equal(token, s->traffic_token);
}

void SessionRegistry::erase(const std::string& id) {
  std::shared_ptr<SandboxSession> gone;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    gone = std::move(it->second);
    sessions_.erase(it);
  }
  gone->processes->shutdown();
  gone->watchers->stop_all();
}

void SessionRegistry::clear() {
  std::map<std::string, std::shared_ptr<SandboxSession>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sessions_);
  }
  for (auto& [id, s] : all) {
    s->processes->shutdown();
    s->watchers->stop_all();
  }
}

}  // namespace pvs::service::e2b
