// sandboxctl: a command-line client for the pve-sandbox REST API. See docs/cli.md.
//
//   sandboxctl create --internet --label team=ml      # prints the new sandbox
//   sandboxctl exec sb-0123456789ab -- python3 -c 'print(42)'   # exit code = the command's
//   sandboxctl cp ./in.txt sb-0123456789ab:/tmp/in.txt
//
// Server, token and CA come from flags (--url, --token, --cacert), the environment
// (SANDBOXCTL_URL, SANDBOXCTL_TOKEN, SANDBOXCTL_CACERT) or a config file (--config,
// SANDBOXCTL_CONFIG, else ~/.config/sandboxctl/config.yaml with keys url, token or token_file,
// cacert), in that order.
#include <curl/curl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>
#include <yaml-cpp/yaml.h>

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char* kUsage =
    R"(usage: sandboxctl [--url URL] [--token TOKEN] [--cacert FILE] [--config FILE] [--json]
                  COMMAND ...

commands:
  create [--cpus N] [--memory MB] [--disk GB] [--internet] [--ttl SECONDS]
         [--label KEY=VALUE]... [--hostname NAME]
  list [--label KEY=VALUE]...
  show ID
  exec ID [--cwd DIR] [--env NAME=VALUE]... [--timeout SECONDS] [--stdin] -- COMMAND...
  cp SRC DST            one side is ID:/path; '-' is stdin/stdout   [--mode 0644]
  ls ID PATH
  internet ID on|off
  ttl ID SECONDS
  snapshot ID NAME [--description TEXT]
  snapshots ID
  rollback ID NAME
  delete-snapshot ID NAME
  destroy ID...
  health

exec exits with the remote command's exit code (124 if it timed out).
--cacert FILE: PEM CA (or self-signed certificate) that an https:// server must chain to;
without it the system's CA store is used. The server's name is always verified.
environment: SANDBOXCTL_URL, SANDBOXCTL_TOKEN, SANDBOXCTL_CACERT, SANDBOXCTL_CONFIG
)";

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

// ---- HTTP -------------------------------------------------------------------------------------

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
                std::function<void(std::string_view)> on_data = nullptr) {
    CURL* curl = curl_easy_init();
    if (!curl) throw std::runtime_error("curl_easy_init failed");
    Reply reply;
    struct Sink {
      Reply* reply;
      std::function<void(std::string_view)>* on_data;
    } sink{&reply, &on_data};
    std::string url = options_.url + path;
    curl_slist* headers = nullptr;
    std::string auth = "Authorization: Bearer " + options_.token;
    if (!options_.token.empty()) headers = curl_slist_append(headers, auth.c_str());
    headers = curl_slist_append(headers, ("Accept: " + accept).c_str());
    if (!body.empty() || method == "POST" || method == "PUT") {
      headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
    }
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    if (!options_.cacert.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.cacert.c_str());
    if (method == "POST" || method == "PUT" || !body.empty()) {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
          auto* s = static_cast<Sink*>(user);
          std::string_view chunk(data, size * n);
          long status = 0;
          (void)status;
          if (*s->on_data && s->reply->status == 0) {
            (*s->on_data)(chunk);
          } else {
            s->reply->body.append(chunk);
          }
          return size * n;
        });
    // The status is known once headers are in: stream only 200 replies.
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(
        curl, CURLOPT_HEADERFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
          auto* s = static_cast<Sink*>(user);
          std::string_view line(data, size * n);
          if (line.rfind("HTTP/", 0) == 0) {
            auto sp = line.find(' ');
            long code = sp == std::string_view::npos
                            ? 0
                            : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
            // Streaming applies to a 200 only; errors are collected.
            s->reply->status = code == 200 ? 0 : code;
          }
          return size * n;
        });
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    char* ct = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
    if (ct) reply.content_type = ct;
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) {
      throw std::runtime_error("cannot reach " + options_.url + ": " + curl_easy_strerror(rc));
    }
    reply.status = status;
    return reply;
  }

  const Options& options() const { return options_; }

 private:
  Options options_;
};

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string json_string(const std::string& s) {
  std::ostringstream out;
  Poco::JSON::Stringifier::formatString(s, out);
  return out.str();
}

Poco::JSON::Object::Ptr parse_object(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
}

// Throws with the API's error message unless the status is one of `ok`.
void check(const Reply& r, std::initializer_list<long> ok = {200}) {
  for (long s : ok) {
    if (r.status == s) return;
  }
  std::string message = r.body;
  try {
    auto obj = parse_object(r.body);
    auto err = obj->getObject("error");
    if (err) {
      message = err->getValue<std::string>("code") + ": " + err->getValue<std::string>("message");
    }
  } catch (...) {
  }
  while (!message.empty() && message.back() == '\n') message.pop_back();
  throw std::runtime_error("HTTP " + std::to_string(r.status) + ": " + message);
}

// ---- output -----------------------------------------------------------------------------------

std::string str(const Poco::JSON::Object::Ptr& o, const std::string& k) {
  if (!o->has(k) || o->isNull(k)) return "-";
  return o->get(k).toString();
}

std::string labels_text(const Poco::JSON::Object::Ptr& o) {
  auto labels = o->getObject("labels");
  std::string out;
  if (!labels) return "-";
  for (const auto& [k, v] : *labels) out += (out.empty() ? "" : ",") + k + "=" + v.toString();
  return out.empty() ? "-" : out;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

void print_sandbox(const Poco::JSON::Object::Ptr& o) {
  print_table({{"id:", str(o, "id")},
               {"hostname:", str(o, "hostname")},
               {"address:", str(o, "address")},
               {"state:", str(o, "state") + " (" + str(o, "status") + ")"},
               {"internet:", str(o, "internet")},
               {"resources:", str(o, "cpus") + " cpu, " + str(o, "memory_mb") + " MB, disk " +
                                  str(o, "disk_gb") + " GB"},
               {"created:", str(o, "created_at")},
               {"expires:", str(o, "expires_at")},
               {"labels:", labels_text(o)},
               {"owner:", str(o, "owner")},
               {"vmid:", str(o, "vmid") + " on " + str(o, "node")}});
}

// ---- commands ---------------------------------------------------------------------------------

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
};

int cmd_create(Client& c, Args& a) {
  std::ostringstream body;
  body << "{";
  bool first = true;
  auto field = [&](const std::string& k, const std::string& raw_json) {
    body << (first ? "" : ",") << json_string(k) << ":" << raw_json;
    first = false;
  };
  std::map<std::string, std::string> labels;
  auto integer = [&](const std::string& flag) {
    std::string v = a.next(flag);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError(flag + " needs a number");
    }
    return v;
  };
  while (a.more()) {
    std::string f = a.next("flag");
    if (f == "--cpus")
      field("cpus", integer(f));
    else if (f == "--memory")
      field("memory_mb", integer(f));
    else if (f == "--disk")
      field("disk_gb", integer(f));
    else if (f == "--ttl")
      field("ttl_seconds", integer(f));
    else if (f == "--internet")
      field("internet", "true");
    else if (f == "--hostname")
      field("hostname", json_string(a.next(f)));
    else if (f == "--label") {
      std::string kv = a.next(f);
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw UsageError("--label needs KEY=VALUE");
      labels[kv.substr(0, eq)] = kv.substr(eq + 1);
    } else {
      throw UsageError("create: unknown option " + f);
    }
  }
  if (!labels.empty()) {
    std::string l = "{";
    for (const auto& [k, v] : labels)
      l += (l.size() > 1 ? "," : "") + json_string(k) + ":" + json_string(v);
    field("labels", l + "}");
  }
  body << "}";
  auto r = c.request("POST", "/v1/sandboxes", body.str());
  check(r, {201});
  if (c.options().json) {
    std::cout << r.body;
  } else {
    print_sandbox(parse_object(r.body));
  }
  return 0;
}

int cmd_list(Client& c, Args& a) {
  std::string query;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f != "--label") throw UsageError("list: unknown option " + f);
    query += (query.empty() ? "?" : "&") + std::string("label=") + url_encode(a.next(f));
  }
  auto r = c.request("GET", "/v1/sandboxes" + query);
  check(r);
  if (c.options().json) {
    std::cout << r.body;
    return 0;
  }
  auto list = parse_object(r.body)->getArray("sandboxes");
  std::vector<std::vector<std::string>> rows{
      {"ID", "HOSTNAME", "ADDRESS", "STATE", "INTERNET", "EXPIRES", "LABELS"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    rows.push_back({str(o, "id"), str(o, "hostname"), str(o, "address"), str(o, "state"),
                    str(o, "internet") == "true" ? "yes" : "no", str(o, "expires_at"),
                    labels_text(o)});
  }
  print_table(rows);
  return 0;
}

int cmd_show(Client& c, Args& a) {
  std::string id = a.next("ID");
  a.done();
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id));
  check(r);
  if (c.options().json) {
    std::cout << r.body;
  } else {
    print_sandbox(parse_object(r.body));
  }
  return 0;
}

std::string read_all(std::istream& in) {
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_fd(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

int cmd_exec(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string cwd, timeout;
  std::vector<std::pair<std::string, std::string>> env;
  bool use_stdin = false;
  while (a.more() && a.v[a.i] != "--") {
    std::string f = a.next("flag");
    if (f == "--cwd")
      cwd = a.next(f);
    else if (f == "--timeout")
      timeout = a.next(f);
    else if (f == "--stdin" || f == "-i")
      use_stdin = true;
    else if (f == "--env") {
      std::string kv = a.next(f);
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw UsageError("--env needs NAME=VALUE");
      env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      // No "--": the rest is the command.
      --a.i;
      break;
    }
  }
  if (a.more() && a.v[a.i] == "--") ++a.i;
  if (!a.more()) throw UsageError("exec: missing COMMAND");
  std::string command;
  while (a.more()) command += (command.empty() ? "" : " ") + a.next("COMMAND");
  std::ostringstream body;
  body << "{\"command\":" << json_string(command);
  if (!cwd.empty()) body << ",\"cwd\":" << json_string(cwd);
  if (!timeout.empty()) {
    if (timeout.find_first_not_of("0123456789") != std::string::npos || timeout.empty()) {
      throw UsageError("--timeout needs seconds");
    }
    body << ",\"timeout_seconds\":" << timeout;
  }
  if (!env.empty()) {
    body << ",\"env\":{";
    for (std::size_t i = 0; i < env.size(); ++i) {
      body << (i ? "," : "") << json_string(env[i].first) << ":" << json_string(env[i].second);
    }
    body << "}";
  }
  if (use_stdin) body << ",\"stdin\":" << json_string(read_all(std::cin));
  body << "}";
  std::string path = "/v1/sandboxes/" + url_encode(id) + "/exec";

  if (c.options().json) {
    auto r = c.request("POST", path, body.str());
    check(r);
    std::cout << r.body;
    auto o = parse_object(r.body);
    if (o->getValue<bool>("timed_out")) return 124;
    int code = o->getValue<int>("exit_code");
    return code < 0 ? 255 : code;
  }
  // Stream: print stdout/stderr as they arrive; the exit event decides the exit code.
  std::string pending;
  int exit_code = 255;
  std::string error;
  auto on_line = [&](const std::string& line) {
    if (line.empty()) return;
    auto ev = parse_object(line);
    std::string type = ev->getValue<std::string>("type");
    if (type == "stdout")
      write_fd(1, ev->getValue<std::string>("data"));
    else if (type == "stderr")
      write_fd(2, ev->getValue<std::string>("data"));
    else if (type == "exit") {
      if (ev->getValue<bool>("timed_out")) {
        exit_code = 124;
      } else {
        int code = ev->getValue<int>("exit_code");
        exit_code = code < 0 ? 255 : code;
      }
    } else if (type == "error") {
      auto e = ev->getObject("error");
      error = e->getValue<std::string>("code") + ": " + e->getValue<std::string>("message");
    }
  };
  auto r = c.request("POST", path, body.str(), "application/json", "application/x-ndjson",
                     [&](std::string_view chunk) {
                       pending.append(chunk);
                       std::size_t nl;
                       while ((nl = pending.find('\n')) != std::string::npos) {
                         on_line(pending.substr(0, nl));
                         pending.erase(0, nl + 1);
                       }
                     });
  if (r.status != 200) check(r);
  if (!pending.empty()) on_line(pending);
  if (!error.empty()) throw std::runtime_error(error);
  return exit_code;
}

// "sb-...:/path" -> {id, path}
std::optional<std::pair<std::string, std::string>> remote_spec(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || s.rfind("sb-", 0) != 0) return std::nullopt;
  return std::make_pair(s.substr(0, colon), s.substr(colon + 1));
}

int cmd_cp(Client& c, Args& a) {
  std::string mode;
  std::vector<std::string> pos;
  while (a.more()) {
    std::string f = a.next("argument");
    if (f == "--mode")
      mode = a.next(f);
    else
      pos.push_back(f);
  }
  if (pos.size() != 2) throw UsageError("cp: need SRC and DST");
  auto src = remote_spec(pos[0]);
  auto dst = remote_spec(pos[1]);
  if (src && dst) throw UsageError("cp: copy between sandboxes is not supported");
  if (!src && !dst) throw UsageError("cp: one side must be ID:/path");
  if (dst) {
    std::string data;
    if (pos[0] == "-") {
      data = read_all(std::cin);
    } else {
      std::ifstream in(pos[0], std::ios::binary);
      if (!in) throw std::runtime_error("cannot read " + pos[0]);
      data = read_all(in);
    }
    std::string q = "?path=" + url_encode(dst->second) + (mode.empty() ? "" : "&mode=" + mode);
    auto r = c.request("PUT", "/v1/sandboxes/" + url_encode(dst->first) + "/files" + q, data,
                       "application/octet-stream");
    check(r);
    if (c.options().json) std::cout << r.body;
    return 0;
  }
  auto r = c.request(
      "GET", "/v1/sandboxes/" + url_encode(src->first) + "/files?path=" + url_encode(src->second),
      "", "application/json", "application/octet-stream");
  check(r);
  if (pos[1] == "-") {
    write_fd(1, r.body);
  } else {
    std::ofstream out(pos[1], std::ios::binary | std::ios::trunc);
    out << r.body;
    if (!out) throw std::runtime_error("cannot write " + pos[1]);
  }
  return 0;
}

int cmd_ls(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string path = a.next("PATH");
  a.done();
  auto r = c.request(
      "GET", "/v1/sandboxes/" + url_encode(id) + "/files?list=true&path=" + url_encode(path));
  check(r);
  if (c.options().json) {
    std::cout << r.body;
    return 0;
  }
  auto entries = parse_object(r.body)->getArray("entries");
  std::vector<std::vector<std::string>> rows{{"MODE", "SIZE", "TYPE", "NAME"}};
  for (std::size_t i = 0; entries && i < entries->size(); ++i) {
    auto e = entries->getObject(static_cast<unsigned>(i));
    rows.push_back({str(e, "mode"), str(e, "size"), str(e, "type"), str(e, "name")});
  }
  print_table(rows);
  return 0;
}

int simple_sandbox_call(Client& c, const std::string& method, const std::string& path,
                        const std::string& body, std::initializer_list<long> ok) {
  auto r = c.request(method, path, body);
  check(r, ok);
  if (c.options().json) {
    std::cout << r.body;
  } else if (!r.body.empty() && r.body[0] == '{') {
    auto o = parse_object(r.body);
    if (o->has("id")) print_sandbox(o);
  }
  return 0;
}

int cmd_internet(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string v = a.next("on|off");
  a.done();
  if (v != "on" && v != "off") throw UsageError("internet: on or off");
  return simple_sandbox_call(c, "PUT", "/v1/sandboxes/" + url_encode(id) + "/internet",
                             std::string("{\"enabled\":") + (v == "on" ? "true" : "false") + "}",
                             {200});
}

int cmd_ttl(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string s = a.next("SECONDS");
  a.done();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError("ttl: SECONDS must be a number");
  }
  return simple_sandbox_call(c, "POST", "/v1/sandboxes/" + url_encode(id) + "/ttl",
                             "{\"ttl_seconds\":" + s + "}", {200});
}

int cmd_snapshot(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  std::string description;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f != "--description") throw UsageError("snapshot: unknown option " + f);
    description = a.next(f);
  }
  auto r = c.request(
      "POST", "/v1/sandboxes/" + url_encode(id) + "/snapshots",
      "{\"name\":" + json_string(name) + ",\"description\":" + json_string(description) + "}");
  check(r, {201});
  std::cout << (c.options().json ? r.body : "snapshot " + name + " taken\n");
  return 0;
}

int cmd_snapshots(Client& c, Args& a) {
  std::string id = a.next("ID");
  a.done();
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id) + "/snapshots");
  check(r);
  if (c.options().json) {
    std::cout << r.body;
    return 0;
  }
  auto list = parse_object(r.body)->getArray("snapshots");
  std::vector<std::vector<std::string>> rows{{"NAME", "CREATED", "DESCRIPTION"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto s = list->getObject(static_cast<unsigned>(i));
    rows.push_back({str(s, "name"), str(s, "created_at"), str(s, "description")});
  }
  print_table(rows);
  return 0;
}

int cmd_rollback(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  a.done();
  return simple_sandbox_call(
      c, "POST", "/v1/sandboxes/" + url_encode(id) + "/snapshots/" + url_encode(name) + "/rollback",
      "", {200});
}

int cmd_delete_snapshot(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  a.done();
  return simple_sandbox_call(
      c, "DELETE", "/v1/sandboxes/" + url_encode(id) + "/snapshots/" + url_encode(name), "", {204});
}

int cmd_destroy(Client& c, Args& a) {
  if (!a.more()) throw UsageError("destroy: missing ID");
  int rc = 0;
  while (a.more()) {
    std::string id = a.next("ID");
    auto r = c.request("DELETE", "/v1/sandboxes/" + url_encode(id));
    try {
      check(r, {204});
      if (!c.options().json) std::cout << "destroyed " << id << "\n";
    } catch (const std::exception& e) {
      std::cerr << "sandboxctl: " << id << ": " << e.what() << "\n";
      rc = kExitError;
    }
  }
  return rc;
}

int cmd_health(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/health");
  if (c.options().json) {
    std::cout << r.body;
  } else {
    auto o = parse_object(r.body);
    std::cout << "status: " << str(o, "status") << "\n";
    for (const char* k : {"proxmox", "agent"}) {
      auto p = o->getObject(k);
      if (p) {
        std::cout << k << ": " << (p->getValue<bool>("ok") ? "ok" : "FAILING");
        if (p->has("error")) std::cout << " (" << p->getValue<std::string>("error") << ")";
        std::cout << "\n";
      }
    }
    if (o->has("sandboxes")) std::cout << "sandboxes: " << str(o, "sandboxes") << "\n";
  }
  return r.status == 200 ? 0 : kExitError;
}

// Fills url/token from the config file for what flags and environment left empty.
void load_file_config(Options& o, std::string path) {
  bool explicit_path = !path.empty();
  if (path.empty()) {
    if (const char* e = std::getenv("SANDBOXCTL_CONFIG")) {
      path = e;
      explicit_path = true;
    } else if (const char* home = std::getenv("HOME")) {
      path = std::string(home) + "/.config/sandboxctl/config.yaml";
    }
  }
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) {
    if (explicit_path) throw std::runtime_error("cannot read config " + path);
    return;
  }
  YAML::Node root = YAML::Load(read_all(in));
  if (!root.IsMap()) throw std::runtime_error(path + ": must be a mapping");
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (k != "url" && k != "token" && k != "token_file" && k != "cacert") {
      throw std::runtime_error(path + ": " + k + ": unknown key");
    }
  }
  if (o.url.empty() && root["url"]) o.url = root["url"].as<std::string>();
  if (o.cacert.empty() && root["cacert"]) o.cacert = root["cacert"].as<std::string>();
  if (o.token.empty() && root["token"]) o.token = root["token"].as<std::string>();
  if (o.token.empty() && root["token_file"]) {
    std::ifstream t(root["token_file"].as<std::string>());
    if (!t) throw std::runtime_error(path + ": token_file: cannot read it");
    std::getline(t, o.token);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string config_path;
  Args args;
  try {
    int i = 1;
    for (; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&](const std::string& flag) -> std::string {
        auto eq = a.find('=');
        if (eq != std::string::npos) return a.substr(eq + 1);
        if (i + 1 >= argc) throw UsageError(flag + " needs a value");
        return argv[++i];
      };
      if (a == "--json")
        options.json = true;
      else if (a == "--url" || a.rfind("--url=", 0) == 0)
        options.url = value("--url");
      else if (a == "--token" || a.rfind("--token=", 0) == 0)
        options.token = value("--token");
      else if (a == "--cacert" || a.rfind("--cacert=", 0) == 0)
        options.cacert = value("--cacert");
      else if (a == "--config" || a.rfind("--config=", 0) == 0)
        config_path = value("--config");
      else if (a == "-h" || a == "--help") {
        std::cout << kUsage;
        return 0;
      } else if (a.rfind("--", 0) == 0) {
        throw UsageError("unknown option " + a);
      } else {
        break;
      }
    }
    for (; i < argc; ++i) args.v.push_back(argv[i]);
    if (options.url.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_URL")) options.url = e;
    }
    if (options.token.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_TOKEN")) options.token = e;
    }
    if (options.cacert.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_CACERT")) options.cacert = e;
    }
    load_file_config(options, config_path);
    if (!options.cacert.empty() && !std::ifstream(options.cacert)) {
      throw std::runtime_error("--cacert: cannot read " + options.cacert);
    }
    if (options.url.empty()) options.url = "http://127.0.0.1:8787";
    if (!args.more()) throw UsageError("missing COMMAND");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    Client client(options);
    std::string cmd = args.next("COMMAND");
    static const std::map<std::string, int (*)(Client&, Args&)> commands = {
        {"create", cmd_create},
        {"list", cmd_list},
        {"show", cmd_show},
        {"exec", cmd_exec},
        {"cp", cmd_cp},
        {"ls", cmd_ls},
        {"internet", cmd_internet},
        {"ttl", cmd_ttl},
        {"snapshot", cmd_snapshot},
        {"snapshots", cmd_snapshots},
        {"rollback", cmd_rollback},
        {"delete-snapshot", cmd_delete_snapshot},
        {"destroy", cmd_destroy},
        {"health", cmd_health}};
    auto it = commands.find(cmd);
    if (it == commands.end()) throw UsageError("unknown command " + cmd);
    std::cout.flush();
    int rc = it->second(client, args);
    std::cout.flush();
    return rc;
  } catch (const UsageError& e) {
    std::cerr << "sandboxctl: " << e.what() << "\n\n" << kUsage;
    return kExitUsage;
  } catch (const Poco::Exception& e) {
    std::cerr << "sandboxctl: bad reply: " << e.displayText() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "sandboxctl: " << e.what() << "\n";
    return kExitError;
  }
}
