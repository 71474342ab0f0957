// sandboxctl shell: an interactive terminal in a sandbox over the API's WebSocket
// (POST .../terminals, then GET .../terminals/{tid}/ws). On a tty: raw mode (restored on exit),
// SIGWINCH -> a resize message. Without one: stdin is sent as typed input and, at its end, a
// C-d. Exits with the remote program's exit code (255 when it is unknown).
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/NetSSL.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/URI.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

using Poco::Net::WebSocket;

int g_wake_pipe[2] = {-1, -1};

void on_sigwinch(int) {
  char c = 'w';
  [[maybe_unused]] ssize_t n = ::write(g_wake_pipe[1], &c, 1);
}

// Raw mode on stdin for as long as it lives.
class RawMode {
 public:
  RawMode() {
    if (::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawMode() {
    if (active_) ::tcsetattr(0, TCSANOW, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

std::pair<int, int> window_size() {
  winsize ws{};
  if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    return {ws.ws_col, ws.ws_row};
  if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    return {ws.ws_col, ws.ws_row};
  return {80, 24};
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
          std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::unique_ptr<Poco::Net::HTTPClientSession> session_for(const Options& o) {
  Poco::URI uri(o.url);
  if (uri.getScheme() == "https") {
    Poco::Net::initializeSSL();
    Poco::Net::Context::Ptr ctx =
        new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, "", "", o.cacert,
                               Poco::Net::Context::VERIFY_RELAXED, 9, o.cacert.empty());
    return std::make_unique<Poco::Net::HTTPSClientSession>(uri.getHost(), uri.getPort(), ctx);
  }
  return std::make_unique<Poco::Net::HTTPClientSession>(uri.getHost(), uri.getPort());
}

struct Outcome {
  std::atomic<bool> done{false};
  std::atomic<int> code{255};
  std::string why;  // set before done when no exit message came
};

// Frames from the server: output to stdout, the exit message, the close.
void read_frames(WebSocket& ws, Outcome& out) {
  std::vector<char> buf(64 << 10);
  bool exited = false;
  try {
    for (;;) {
      int flags = 0;
      int n = ws.receiveFrame(buf.data(), static_cast<int>(buf.size()), flags);
      int op = flags & WebSocket::FRAME_OP_BITMASK;
      if ((n == 0 && flags == 0) || op == WebSocket::FRAME_OP_CLOSE) {
        if (!exited && n > 2)
          out.why = std::string(buf.data() + 2, static_cast<std::size_t>(n - 2));
        break;
      }
      if (op == WebSocket::FRAME_OP_TEXT) {
        auto o = Poco::JSON::Parser()
                     .parse(std::string(buf.data(), static_cast<std::size_t>(n)))
                     .extract<Poco::JSON::Object::Ptr>();
        std::string type = o->optValue<std::string>("type", "");
        if (type == "exit") {
          exited = true;
          out.code = o->isNull("code") ? 255 : o->getValue<int>("code");
        } else if (type == "error") {
          std::cerr << "\r\nsandboxctl: " << terminal_safe(o->optValue<std::string>("message", ""))
                    << "\r\n";
        }
      } else if (n > 0) {
        std::size_t off = 0;
        while (off < static_cast<std::size_t>(n)) {
          ssize_t w = ::write(1, buf.data() + off, static_cast<std::size_t>(n) - off);
          if (w <= 0) break;
          off += static_cast<std::size_t>(w);
        }
      }
    }
  } catch (const Poco::Exception& e) {
    if (!exited) out.why = e.displayText();
  }
  if (!exited && out.why.empty()) out.why = "connection closed";
  out.done = true;
  char c = 'd';
  [[maybe_unused]] ssize_t n = ::write(g_wake_pipe[1], &c, 1);
}

// Input and window changes until the reader ends.
void pump_input(WebSocket& ws, bool tty, Outcome& out) {
  bool stdin_open = true;
  char buf[16384];
  while (!out.done) {
    pollfd fds[2] = {{g_wake_pipe[0], POLLIN, 0}, {stdin_open ? 0 : -1, POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0) continue;
    if (fds[0].revents & POLLIN) {
      char drain[64];
      [[maybe_unused]] ssize_t d = ::read(g_wake_pipe[0], drain, sizeof drain);
      if (out.done) break;
      auto [cols, rows] = window_size();
      std::string msg = "{\"type\":\"resize\",\"cols\":" + std::to_string(cols) +
                        ",\"rows\":" + std::to_string(rows) + "}";
      ws.sendFrame(msg.data(), static_cast<int>(msg.size()), WebSocket::FRAME_TEXT);
    }
    if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP))) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) {
        ws.sendFrame(buf, static_cast<int>(n), WebSocket::FRAME_BINARY);
      } else {
        stdin_open = false;
        if (!tty) ws.sendFrame("\x04", 1, WebSocket::FRAME_BINARY);  // C-d: end of input
      }
    }
  }
}

}  // namespace

int cmd_shell(Client& c, Args& a) {
  std::string id = a.next("sandbox id");
  std::vector<std::string> words;
  if (a.more()) {
    if (a.v[a.i] != "--") throw UsageError("expected -- before the command");
    ++a.i;
    while (a.more()) words.push_back(a.next("COMMAND"));
  }
  std::string command;
  if (words.size() == 1) {
    command = words[0];  // a command line
  } else {
    for (const auto& w : words) command += (command.empty() ? "" : " ") + shell_quote(w);
  }
  const bool tty = ::isatty(0) != 0;
  auto [cols, rows] = window_size();
  std::ostringstream body;
  body << "{\"command\":" << json_string(command) << ",\"cols\":" << cols << ",\"rows\":" << rows
       << "}";
  const std::string base = "/v1/sandboxes/" + url_encode(id) + "/terminals";
  Reply r = c.request("POST", base, body.str());
  check(r, {201});
  const std::string tid = parse_object(r.body)->getValue<std::string>("id");

  Poco::URI uri(c.options().url);
  auto cs = session_for(c.options());
  Poco::Net::HTTPRequest req("GET", uri.getPath() + base + "/" + tid + "/ws", "HTTP/1.1");
  req.set("Authorization", "Bearer " + c.options().token);
  Poco::Net::HTTPResponse resp;
  std::unique_ptr<WebSocket> ws;
  try {
    ws = std::make_unique<WebSocket>(*cs, req, resp);
  } catch (const Poco::Exception& e) {
    throw std::runtime_error("cannot attach to terminal " + tid + ": " + e.displayText());
  }
  if (::pipe(g_wake_pipe) != 0) throw std::runtime_error("pipe failed");
  struct sigaction sa {};
  sa.sa_handler = on_sigwinch;
  ::sigaction(SIGWINCH, &sa, nullptr);
  Outcome out;
  {
    std::optional<RawMode> raw;
    if (tty) raw.emplace();
    std::thread reader([&] { read_frames(*ws, out); });
    try {
      pump_input(*ws, tty, out);
    } catch (const Poco::Exception& e) {
      out.why = e.displayText();
    }
    reader.join();
  }
  if (!out.why.empty()) {
    std::cerr << "sandboxctl: " << terminal_safe(out.why + "; terminal " + tid)
              << " keeps running until it ends or is idle\n";
    return 255;
  }
  c.request("DELETE", base + "/" + tid);  // ended: forget it
  return out.code;
}

}  // namespace pvs::cli
