// Building a custom template from a recipe (Manager::build_template, custom_templates.h):
//   1. a container cloned from the recipe's base, brought up as a create does (phase
//      "creating", label pve-sandbox/build; the base's SSH host key kept),
//   2. the packages' egress read from the base's apt sources (before any file of the recipe is
//      there), the files copied in (and the env defaults written), the packages installed with
//      the container's egress allowlisted to those hosts for that step only, the script run as
//      root, the service (start, ready) started and checked as a sandbox's boot does, then
//      stopped and its log removed, the clean command run,
//   3. its SSH closed, stopped, its egress, binding and address given back, its description
//      rewritten (phase "pooled", the template labels), converted into a template.
// Any failure rolls the container back as a failed create (nothing left but the log).
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "lifecycle/core.h"
#include "lifecycle/service.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "spread.h"

namespace pvs::lifecycle {

namespace {

using ssh_detail::shell_quote;
constexpr std::size_t kMaxLog = 1 << 20;

// The build's output: split into lines, kept (the last kMaxLog bytes) and passed on.
class BuildLog {
 public:
  explicit BuildLog(const BuildOutput& out) : out_(out) {}

  void line(std::string_view text) {
    std::lock_guard lock(mu_);
    line_locked(text);
  }
  void chunk(ExecStream stream, std::string_view data) {
    std::lock_guard lock(mu_);
    auto& buf = buf_[stream == ExecStream::kStdout ? 0 : 1];
    buf.append(data);
    for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
      line_locked(std::string_view(buf).substr(0, nl));
      buf.erase(0, nl + 1);
    }
  }
  void flush() {
    std::lock_guard lock(mu_);
    for (auto& buf : buf_) {
      if (!buf.empty()) line_locked(buf);
      buf.clear();
    }
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  std::string tail(std::size_t n) const {
    std::lock_guard lock(mu_);
    return log_.size() <= n ? log_ : log_.substr(log_.size() - n);
  }

 private:
  void line_locked(std::string_view text) {
    log_.append(text).push_back('\n');
    if (log_.size() > kMaxLog) log_.erase(0, log_.size() - kMaxLog);
    if (out_) {
      try {
        out_(text);
      } catch (...) {  // a caller gone (a closed stream) does not stop the build
      }
    }
  }

  const BuildOutput& out_;
  mutable std::mutex mu_;
  std::string log_;
  std::string buf_[2];
};

// One step: a command over the build container's SSH, its output into the log.
Status run_step(SandboxImpl& box, BuildLog& log, std::chrono::milliseconds timeout,
                std::string_view what, std::string command, std::string stdin_data = {}) {
  log.line("==> " + std::string(what));
  ExecOptions o;
  o.stdin_data = std::move(stdin_data);
  o.timeout = timeout;
  o.max_output = 64 << 10;  // the log has it all
  o.on_output = [&log](ExecStream s, std::string_view d) { log.chunk(s, d); };
  auto r = box.exec(std::move(command), std::move(o));
  log.flush();
  if (!r) return fail(r.error().code, std::string(what) + ": " + r.error().message);
  if (r->timed_out) return fail(ErrorCode::kTimeout, std::string(what) + ": timed out");
  if (r->exit_code != 0)
    return fail(ErrorCode::kInvalidArgument,
                std::string(what) + ": exited with " +
                    (r->exit_code < 0 ? "signal " + r->exit_signal : std::to_string(r->exit_code)));
  return {};
}

std::string dirname(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Files (and the env defaults), packages, script, clean: each a step in the log.
Status run_recipe(SandboxImpl& box, BuildLog& log, const TemplateRecipe& r,
                  const ManagerConfig& cfg) {
  auto files = r.files;
  if (!r.env.empty()) {
    // Every command over SSH (sshd's SetEnv: exec, files, E2B), login shells (profile.d) and
    // PAM sessions (/etc/environment) see them.
    std::string profile, environment, sshd = "SetEnv";  // one line: sshd keeps its first
    for (auto& [k, v] : r.env) {
      std::string quoted_v;
      for (char c : v) {
        if (c == '"' || c == '\\') quoted_v += '\\';
        quoted_v += c;
      }
      profile += "export " + k + "=" + shell_quote(v) + "\n";
      environment += k + "=\"" + quoted_v + "\"\n";
      sshd += " " + k + "=\"" + quoted_v + "\"";
    }
    sshd += "\n";
    files.push_back({"/etc/profile.d/pve-sandbox-template.sh", profile, 0644});
    files.push_back({"/etc/environment", environment, 0644});
    files.push_back({"/etc/ssh/sshd_config.d/pve-sandbox-template.conf", sshd, 0644});
  }
  auto service = service_files(r);
  files.insert(files.end(), service.begin(), service.end());
  const auto timeout = cfg.template_step_timeout;
  // Packages, env defaults and a service change system files: only inside a real container,
  // never on a stand-in that shares the host's file system (pvesim's netns backend).
  if (!r.packages.empty() || !r.env.empty() || !service.empty()) {
    auto inside = box.exec(std::string(kInsideContainerTest), {});
    if (!inside || inside->exit_code != 0)
      return fail(ErrorCode::kInvalidArgument,
                  "packages, env, start and ready need a real container: this sandbox's init "
                  "is not one (a stand-in sharing the host's file system?)");
  }
  // The packages' egress comes from the base's apt sources, read before any file of the recipe
  // is copied: no file can add a host to it (and parse_recipe refuses files under /etc/apt/
  // with packages, is_apt_config_path).
  Egress mirror = Egress::off();
  if (!r.packages.empty()) {
    auto sources = box.exec("cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null", {});
    mirror = sources ? apt_mirror_egress(sources->out) : Egress::off();
    if (!mirror.allowlist())
      return fail(ErrorCode::kInvalidArgument,
                  "packages: no http(s) package mirror in the base's apt sources");
    std::string hosts;
    for (auto& h : mirror.list.names) hosts += " " + h;
    log.line("==> egress for the packages:" + hosts);
  }
  if (!files.empty()) {
    std::string dirs = "mkdir -p", modes;
    for (auto& f : files) {
      dirs += " " + shell_quote(dirname(f.path));
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", f.mode);
      modes += "chmod " + std::string(mode) + " " + shell_quote(f.path) + " && ";
    }
    if (auto st = run_step(box, log, timeout, "files: " + std::to_string(files.size()), dirs); !st)
      return st;
    for (auto& f : files) {
      log.line(f.path);
      if (auto st = box.write_file(f.path, f.content, f.mode); !st)
        return fail(st.error().code, "files: " + f.path + ": " + st.error().message);
    }
    if (auto st = run_step(box, log, timeout, "file modes", modes + "true"); !st) return st;
  }
  if (!r.packages.empty()) {
    if (auto st = box.set_egress(mirror); !st) return st;
    std::string install =
        "export DEBIAN_FRONTEND=noninteractive && apt-get update && "
        "apt-get install -y --no-install-recommends";
    for (auto& p : r.packages) install += " " + shell_quote(p);
    auto st = run_step(box, log, timeout, "packages:" + std::to_string(r.packages.size()), install);
    auto off = box.set_egress(Egress::off());
    if (!st) return st;
    if (!off) return off;
  }
  if (!r.script.empty()) {
    const std::string path = "/tmp/pve-sandbox-build-" + random_hex(12) + ".sh";
    if (auto st = box.write_file(path, r.script, 0700); !st)
      return fail(st.error().code, "script: " + st.error().message);
    if (auto st = run_step(box, log, timeout, "script",
                           "sh -e " + path + "; rc=$?; rm -f " + path + "; exit $rc");
        !st)
      return st;
  }
  if (!service.empty()) {  // as every boot of a sandbox of it will: started, then ready
    if (auto st = run_step(box, log, std::max<std::chrono::milliseconds>(timeout, kServiceUpGuard),
                           "start and ready", service_up_command());
        !st)
      return st;
    log.line("ready");
    if (auto st = run_step(box, log, timeout, "stop the service", service_down_command()); !st)
      return st;
  }
  if (!cfg.template_clean_command.empty())
    return run_step(box, log, timeout, "clean", cfg.template_clean_command);
  return {};
}

}  // namespace

Egress apt_mirror_egress(const std::string& sources) {
  static const std::regex uri(R"((https?)://([a-z0-9.-]+)(:([0-9]{1,5}))?[/\s])",
                              std::regex::icase);
  std::vector<std::string> names;
  std::set<std::uint16_t> ports;
  std::istringstream lines(sources);
  for (std::string line; std::getline(lines, line);) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line += '\n';
    for (std::sregex_iterator it(line.begin(), line.end(), uri), end; it != end; ++it) {
      std::string host = (*it)[2];
      for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!validate_egress_name(host)) continue;  // an address is not a name the list holds
      names.push_back(host);
      if ((*it)[4].matched)
        ports.insert(static_cast<std::uint16_t>(std::stoi((*it)[4])));
      else
        ports.insert(((*it)[1].str().size() == 5) ? 443 : 80);
    }
  }
  if (names.empty()) return Egress::off();
  return Egress::allow(std::move(names), {ports.begin(), ports.end()});
}

Result<int> ManagerCore::recipe_base(const TemplateRecipe& r, const Node& n) const {
  if (r.base.empty()) return n.cfg.template_vmid;
  if (r.base.find_first_not_of("0123456789") == std::string::npos) return std::stoi(r.base);
  std::lock_guard lock(mu_);
  int vmid = custom_vmid_locked(r.base, n);
  if (vmid == 0)
    return fail(ErrorCode::kInvalidArgument,
                "base: no template " + pvs::quoted(r.base) +
                    (nodes_.size() > 1 ? " on node " + n.cfg.name : std::string()));
  return vmid;
}

Result<TemplateCopy> ManagerCore::seal_template(Step& s, SandboxImpl& box, const TemplateRecipe& r,
                                                int base, const std::string& nodes) {
  Node& n = *s.node;
  box.close_session();
  if (s.ssh) s.ssh->close();
  s.ssh.reset();
  if (auto st = wait(pve_.stop(n.cfg.name, s.vmid), "stop"); !st) return fail(st.error());
  if (auto st = revoke_all(n, *s.address); !st) return fail(st.error());
  s.granted = false;
  unbind(n, s.port);
  s.port.clear();
  n.addrs->release(*s.address);
  s.address.reset();
  TemplateCopy t;
  t.node = n.cfg.name;
  t.vmid = s.vmid;
  t.id = s.id;
  t.base_vmid = base;
  SandboxMetadata md;
  md.id = s.id;
  md.vmid = s.vmid;
  md.phase = SandboxMetadata::Phase::kPooled;
  md.created_at = now_unix();
  md.labels[std::string(kTemplateNameLabel)] = r.name;
  md.labels[std::string(kRecipeDigestLabel)] = r.digest();
  md.labels[std::string(kTemplateBaseLabel)] = std::to_string(base);
  md.labels[std::string(kTemplatePoolLabel)] = std::to_string(r.pool_size);
  if (nodes_.size() > 1) md.labels[std::string(kTemplateNodesLabel)] = nodes;
  // Killed before the conversion, this is a pooled clone of no template: recovery destroys it.
  if (auto st = write_description(n, s.vmid, md); !st) return fail(st.error());
  if (auto st = make_template(n, s.vmid); !st) return fail(st.error());
  return t;
}

Result<TemplateCopy> ManagerCore::build_copy(const TemplateRecipe& r, Node& n, int base,
                                             const std::vector<std::string>& serves,
                                             const BuildOutput& out, std::string* text) {
  BuildLog log(out);
  Step s;
  s.id = "build-" + random_hex(12);
  s.node = &n;
  s.template_vmid = base;
  s.template_build = true;
  CreateOptions o;
  o.cpus = std::min(2, cfg_.max_cpus);
  o.memory_mb = std::min(1024, cfg_.max_memory_mb);
  o.labels[std::string(kTemplateBuildLabel)] = r.name;
  o.labels[std::string(kRecipeDigestLabel)] = r.digest();
  log.line("==> build " + r.name + " (digest " + r.digest().substr(0, 16) + ") from " +
           std::to_string(base) + " on " + n.cfg.name);
  Result<TemplateCopy> made = [&]() -> Result<TemplateCopy> {
    auto address = n.addrs->acquire();
    if (!address)
      return fail(ErrorCode::kUnavailable, "no free address: " + address.error().message);
    s.address = *address;
    // A recipe's disk_gb grows a smaller base's disk (never shrinks a larger one).
    double base_gib = 0;
    if (r.disk_gb > 0) {
      if (r.disk_gb > cfg_.max_disk_gb)
        return fail(ErrorCode::kInvalidArgument, "disk_gb " + std::to_string(r.disk_gb) +
                                                     " is more than limits.max_disk_gb " +
                                                     std::to_string(cfg_.max_disk_gb));
      auto conf = pve_.config(template_home(base, n), base);
      if (!conf) return fail(pve_error(conf.error(), "base config"));
      base_gib = conf->count("rootfs") ? size_gib(conf->at("rootfs")) : 0;
      if (r.disk_gb > base_gib) o.disk_gb = r.disk_gb;
    }
    auto box = build(s, o, base_gib);
    if (!box) return fail(box.error());
    log.line("==> container " + std::to_string(s.vmid) + " is up");
    auto ran = run_recipe(**box, log, r, cfg_);
    if (!ran) {
      (*box)->close_session();
      return fail(ran.error());
    }
    return seal_template(s, **box, r, base, nodes_label(serves, node_names()));
  }();
  if (!made) {
    log.line("==> failed: " + made.error().message);
    // The packages step may have left an allowlist: revoke whatever the address may hold.
    if (s.address && !s.port.empty()) s.granted = true;
    (void)rollback(s);
    *text = log.text();
    return fail(made.error().code, made.error().message + "\n" + log.tail(4096));
  }
  made->serves = serves;
  log.line("==> template " + r.name + " is vmid " + std::to_string(made->vmid) + " on " +
           n.cfg.name);
  log::info("template " + r.name + " built on " + n.cfg.name + ": vmid " +
            std::to_string(made->vmid));
  *text = log.text();
  return made;
}

std::vector<std::string> ManagerCore::node_names() const {
  std::vector<std::string> out;
  for (auto& n : nodes_) out.push_back(n->cfg.name);
  return out;
}

}  // namespace pvs::lifecycle
