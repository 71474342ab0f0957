#include "e2b/filesystem/dir_watch.h"

#include <charconv>

namespace pvs::service::e2b {

using ssh_detail::shell_quote;  // pvesandbox/ssh_session.h
namespace {

// inotify through ctypes. Masks: MODIFY 0x2, ATTRIB 0x4, MOVED_FROM 0x40, MOVED_TO 0x80,
// CREATE 0x100, DELETE 0x200, DELETE_SELF 0x400, MOVE_SELF 0x800, ISDIR 0x40000000. A new
// directory under a recursive watch is watched too (its own contents from then on). The
// watched directory itself removed or moved away ends the watch.
constexpr const char* kProgram = R"PY(import ctypes,os,struct,sys
root,rec=os.fsencode(sys.argv[1]),sys.argv[2]=="1"
def out(s):
    sys.stdout.write(s+"\n");sys.stdout.flush()
if not os.path.exists(root):out("error nf");sys.exit(2)
if not os.path.isdir(root):out("error nd");sys.exit(2)
libc=ctypes.CDLL(None,use_errno=True)
fd=libc.inotify_init1(0o2000000)
wd={}
def add(d):
    w=libc.inotify_add_watch(fd,d,0xfc6)
    if w>=0:wd[w]=d
    return w
def tree(d):
    for top,subs,_ in os.walk(d):
        for s in subs:add(os.path.join(top,s))
if add(root)<0:out("error io "+os.strerror(ctypes.get_errno()).encode().hex());sys.exit(2)
if rec:tree(root)
out("ready")
T=((0x180,"c"),(0x2,"w"),(0x200,"r"),(0x40,"n"),(0x4,"m"))
while True:
    b=os.read(fd,65536);i=0;lines=[]
    while i<len(b):
        w,m,c,n=struct.unpack_from("iIII",b,i);i+=16
        name=b[i:i+n].rstrip(b"\0");i+=n
        d=wd.get(w)
        if d==root and m&0xc00:
            if lines:out("\n".join(lines))
            sys.exit(0)
        if d is None or not name:continue
        p=os.path.join(d,name)
        for k,t in T:
            if m&k:lines.append(t+" "+os.path.relpath(p,root).hex())
        if rec and m&0x40000000 and m&0x180:
            add(p);tree(p)
    if lines:out("\n".join(lines))
)PY";

std::optional<std::string> unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);
    if (ec != std::errc() || p != hex.data() + i + 2) return std::nullopt;
    out.push_back(static_cast<char>(v));
  }
  return out;
}

// The WatchDir stream's sink: envd's messages into the stream's queue.
class QueueSink final : public WatchSink {
 public:
  explicit QueueSink(std::shared_ptr<EventQueue> events) : events_(std::move(events)) {}
  void armed() override { events_->push(watch_start_event(), false); }
  void event(WatchEventType type, std::string name) override {
    events_->push(watch_event(type, name), true);
  }
  void ended(std::optional<ConnectError> error) override { events_->finish(std::move(error)); }

 private:
  std::shared_ptr<EventQueue> events_;
};

std::optional<WatchEventType> event_type(char c) {
  switch (c) {
    case 'c': return WatchEventType::kCreate;
    case 'w': return WatchEventType::kWrite;
    case 'r': return WatchEventType::kRemove;
    case 'n': return WatchEventType::kRename;
    case 'm': return WatchEventType::kChmod;
    default: return std::nullopt;
  }
}

}  // namespace

std::string DirWatch::script(const WatchOptions& options) {
  return "printf 'pid %s\\n' \"$$\"; exec python3 -c " + shell_quote(kProgram) + " " +
         shell_quote(options.path) + (options.recursive ? " 1" : " 0");
}

std::unique_ptr<DirWatch> DirWatch::start(std::shared_ptr<pvs::Sandbox> sandbox,
                                          const WatchOptions& options,
                                          std::shared_ptr<EventQueue> events) {
  return start(std::move(sandbox), options, std::make_shared<QueueSink>(std::move(events)));
}

std::unique_ptr<DirWatch> DirWatch::start(std::shared_ptr<pvs::Sandbox> sandbox,
                                          const WatchOptions& options,
                                          std::shared_ptr<WatchSink> sink) {
  std::unique_ptr<DirWatch> w(new DirWatch(sandbox, std::move(sink)));
  w->path_ = options.path;
  ExecOptions o;
  o.timeout = options.timeout;
  o.max_output = 4096;  // the events stream; the result keeps a little
  DirWatch* self = w.get();
  o.on_output = [self](ExecStream s, std::string_view b) {
    if (s == ExecStream::kStdout) self->on_stdout(b);
  };
  w->runner_ = std::jthread([self, sandbox, command = script(options), o = std::move(o)]() mutable {
    self->on_exit(sandbox->exec(std::move(command), std::move(o)));
  });
  return w;
}

DirWatch::~DirWatch() {
  stop();
}

void DirWatch::stop() {
  if (stopped_.exchange(true)) return;
  std::uint32_t pid = 0;
  for (int i = 0; i < 200 && !finished_; ++i) {  // the pid is its first line: milliseconds
    {
      std::lock_guard lock(mu_);
      pid = pid_;
    }
    if (pid != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (pid != 0 && !finished_) {
    ExecOptions o;
    o.timeout = std::chrono::seconds(10);
    (void)sandbox_->exec("kill -s KILL -- -" + std::to_string(pid) + " 2>/dev/null", o);
  }
  if (runner_.joinable()) runner_.join();
}

void DirWatch::on_stdout(std::string_view bytes) {
  std::lock_guard lock(mu_);
  pending_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1)
    on_line(std::string_view(pending_).substr(start, nl - start));
  pending_.erase(0, start);
  if (pending_.size() > 65536) pending_.clear();  // no line is this long
}

void DirWatch::on_line(std::string_view line) {
  if (pid_ == 0 && line.rfind("pid ", 0) == 0) {
    std::from_chars(line.data() + 4, line.data() + line.size(), pid_);
  } else if (!ready_ && line == "ready") {
    ready_ = true;
    sink_->armed();
  } else if (!ready_ && line.rfind("error ", 0) == 0) {
    first_error_ = std::string(line.substr(6, 200));
  } else if (ready_ && line.size() > 2 && line[1] == ' ') {
    auto type = event_type(line[0]);
    auto name = unhex(line.substr(2));
    if (type && name) sink_->event(*type, std::move(*name));
  }
}

void DirWatch::on_exit(const Result<ExecResult>& r) {
  std::optional<ConnectError> error;
  {
    std::lock_guard lock(mu_);
    if (!stopped_ && !ready_) {
      if (first_error_ == "nf")
        error = ConnectError{ConnectCode::kNotFound, "path '" + path_ + "' does not exist"};
      else if (first_error_ == "nd")
        error =
            ConnectError{ConnectCode::kInvalidArgument, "path '" + path_ + "' is not a directory"};
      else if (!first_error_.empty())
        error = ConnectError{
            ConnectCode::kInternal,
            "watching '" + path_ + "': " + unhex(first_error_.substr(3)).value_or("?")};
      else if (r && r->exit_code == 127)
        error = ConnectError{ConnectCode::kFailedPrecondition,
                             "watching a directory needs python3 in the sandbox (docs/e2b.md)"};
      else
        error = ConnectError{
            ConnectCode::kUnavailable,
            "the watcher did not start: " + (r ? r->err.substr(0, 200) : r.error().message)};
    }
  }
  finished_ = true;
  sink_->ended(std::move(error));
}

}  // namespace pvs::service::e2b
