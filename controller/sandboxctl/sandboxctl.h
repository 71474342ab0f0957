// sandboxctl's parts (private to the CLI): the HTTP client of the REST API, the output helpers
// and the commands, one function each (commands.cc: sandboxes, internet, TTL, snapshots,
// health; commands_io.cc: exec, cp, ls, edit). sandboxctl.cc parses the options and dispatches.
#pragma once

#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <Poco/JSON/Object.h>

namespace pvs::cli {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string url;
  std::string token;
  std::string cacert;  // CA bundle for https:// (empty: the system's)
  bool json = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Reply {
  long status = 0;
  std::string body;
  std::string content_type;
};

class Client {
 public:
  explicit Client(Options options) : options_(std::move(options)) {
    while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
  }

  // `on_data` (streaming) receives the body as it arrives instead of collecting it.
  Reply request(const std::string& method, const std::string& path, const std::string& body = "",
                const std::string& content_type = "application/json",
                const std::string& accept = "application/json",
                std::function<void(std::string_view)> on_data = nullptr);

  const Options& options() const { return options_; }

 private:
  Options options_;
};

std::string url_encode(const std::string& s);
std::string json_string(const std::string& s);  // a JSON string literal
Poco::JSON::Object::Ptr parse_object(const std::string& text);
// Throws with the API's error message unless the status is one of `ok`.
void check(const Reply& r, std::initializer_list<long> ok = {200});

// Output. Whatever the server sends (an agent's command, a label, a file name, an error message)
// is untrusted: every table cell, line and --json document passes pvs::terminal_safe on its
// way to the terminal (docs/cli.md, "Untrusted text").
std::string str(const Poco::JSON::Object::Ptr& o, const std::string& k);  // "-" when absent
std::string labels_text(const Poco::JSON::Object::Ptr& o);                // "a=1,b=2"
void print_table(const std::vector<std::vector<std::string>>& rows);
void print_sandbox(const Poco::JSON::Object::Ptr& o);
void print_json(const std::string& body);  // a --json reply, its hazards as \uXXXX

// The arguments after the command.
struct Args {
  std::vector<std::string> v;
  std::size_t i = 0;
  bool more() const { return i < v.size(); }
  std::string next(const std::string& what) {
    if (!more()) throw UsageError("missing " + what);
    return v[i++];
  }
  void done() const {
    if (more()) throw UsageError("unexpected argument " + v[i]);
  }
  // The remaining `--name VALUE` pairs as a query string ("?since=1&until=2", "" when none),
  // values URL-encoded; a flag not among `names` is a UsageError naming `command`.
  std::string query(const std::string& command, std::initializer_list<std::string_view> names);
};

// A sandbox's "internet": "yes", "no", or "allow a.org,b.org ports 80,443 (list L)".
std::string internet_text(const Poco::JSON::Object::Ptr& o);
// {"allow":[...],"ports":[...]} or {"list":"..."} from `allow NAME... [--ports P,..]
// [--list L]` arguments (after the word allow); UsageError for anything else.
std::string allowlist_json(Args& a);

// The commands: each returns the process exit code.
int cmd_create(Client& c, Args& a);
int cmd_list(Client& c, Args& a);
int cmd_show(Client& c, Args& a);
int cmd_ports(Client& c, Args& a);
int cmd_usage(Client& c, Args& a);
int cmd_preview(Client& c, Args& a);
int cmd_pause(Client& c, Args& a);
int cmd_resume(Client& c, Args& a);
int cmd_exec(Client& c, Args& a);
int cmd_shell(Client& c, Args& a);  // commands_shell.cc
int cmd_cp(Client& c, Args& a);
int cmd_ls(Client& c, Args& a);
int cmd_edit(Client& c, Args& a);
int cmd_internet(Client& c, Args& a);
int cmd_ttl(Client& c, Args& a);
int cmd_snapshot(Client& c, Args& a);
int cmd_snapshots(Client& c, Args& a);
int cmd_rollback(Client& c, Args& a);
int cmd_delete_snapshot(Client& c, Args& a);
int cmd_destroy(Client& c, Args& a);
int cmd_health(Client& c, Args& a);
int cmd_pool(Client& c, Args& a);
int cmd_nodes(Client& c, Args& a);     // commands_nodes.cc
int cmd_template(Client& c, Args& a);  // commands_templates.cc
int cmd_capture(Client& c, Args& a);
int cmd_fork(Client& c, Args& a);
int cmd_node(Client& c, Args& a);
int cmd_audit(Client& c, Args& a);
int cmd_approvals(Client& c, Args& a);  // commands_approvals.cc
int cmd_volume(Client& c, Args& a);     // commands_volumes.cc
// create's --volume NAME:PATH[:ro] as one item of "volumes".
std::string volume_mount_json(const std::string& spec);

}  // namespace pvs::cli
