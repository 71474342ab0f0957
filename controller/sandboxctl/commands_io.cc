// The commands that move data: exec (stdin, streamed output, the remote exit code), cp, ls,
// edit.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {

namespace {

std::string read_all(std::istream& in) {
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_fd(int fd, std::string_view data) {
  (void)pvs::write_all(fd, data);  // a closed stdout/stderr: nothing to tell anyone
}

}  // namespace

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
    print_json(r.body);
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
    if (c.options().json) print_json(r.body);
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
    print_json(r.body);
    return 0;
  }
  auto reply = parse_object(r.body);
  auto entries = reply->getArray("entries");
  std::vector<std::vector<std::string>> rows{{"MODE", "SIZE", "TYPE", "NAME"}};
  for (std::size_t i = 0; entries && i < entries->size(); ++i) {
    auto e = entries->getObject(static_cast<unsigned>(i));
    rows.push_back({str(e, "mode"), str(e, "size"), str(e, "type"), str(e, "name")});
  }
  print_table(rows);
  if (reply->optValue("truncated", false))
    std::cerr << "sandboxctl: the listing was cut short (" << rows.size() - 1 << " entries)\n";
  return 0;
}

int cmd_edit(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string path = a.next("PATH");
  std::optional<std::string> old_s, new_s;
  bool all = false;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f == "--old")
      old_s = a.next(f);
    else if (f == "--new")
      new_s = a.next(f);
    else if (f == "--all")
      all = true;
    else
      throw UsageError("edit: unknown argument " + f);
  }
  if (!old_s || !new_s) throw UsageError("edit: needs --old TEXT and --new TEXT");
  std::string body = "{\"path\":" + json_string(path) + ",\"old_string\":" + json_string(*old_s) +
                     ",\"new_string\":" + json_string(*new_s) +
                     ",\"replace_all\":" + (all ? "true" : "false") + "}";
  auto r = c.request("POST", "/v1/sandboxes/" + url_encode(id) + "/files/edit", body);
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto reply = parse_object(r.body);
  std::cerr << "sandboxctl: replaced " << reply->getValue<std::uint64_t>("replaced") << " in "
            << terminal_safe(path) << "\n";
  std::cout << terminal_safe(reply->getValue<std::string>("diff"), TerminalText::kLines);
  return 0;
}

}  // namespace pvs::cli
