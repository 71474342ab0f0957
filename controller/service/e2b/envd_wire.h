// The envd messages the E2B SDK sends and reads, in protobuf's JSON mapping (packages/envd/
// spec/process/process.proto and filesystem/filesystem.proto in e2b-dev/infra): parsed into
// plain structs, written from them. Pure functions.
//
// Reading follows the JSON mapping's rules: a field by its lowerCamelCase name or its proto
// name, integers as numbers or decimal strings, enums by name or number, bytes as base64
// (standard or URL-safe, padded or not), null as absent; unknown fields are ignored (as
// connect-go's JSON codec does). Writing uses lowerCamelCase, enum names, 64-bit integers as
// strings and standard base64.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "e2b/connect_codec.h"

namespace pvs::service::e2b {

// Bounds on what a request may carry.
inline constexpr std::size_t kMaxEnvdMessage = 1 << 20;  // one JSON message
inline constexpr std::size_t kMaxArgs = 4096;
inline constexpr std::size_t kMaxEnvs = 256;
inline constexpr std::size_t kMaxInputBytes = 256 << 10;  // one SendInput
inline constexpr std::size_t kMaxEnvdPath = 4096;

struct PtySize {
  std::uint32_t cols = 0;
  std::uint32_t rows = 0;
};

struct ProcessConfig {
  std::string cmd;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> envs;  // sorted by name
  std::optional<std::string> cwd;
};

// process.Process/Start
struct StartRequest {
  ProcessConfig process;
  std::optional<PtySize> pty;
  std::optional<std::string> tag;
  std::optional<bool> stdin_open;  // `stdin`; absent means open (envd's default)
};

// A ProcessSelector: by pid or by tag.
struct Selector {
  std::optional<std::uint32_t> pid;
  std::optional<std::string> tag;
};

// process.Process/SendInput
struct InputRequest {
  Selector process;
  bool pty = false;  // the input's case: pty or stdin
  std::string data;  // decoded bytes
};

// process.Process/SendSignal: the signal's number (9 SIGKILL, 15 SIGTERM).
struct SignalRequest {
  Selector process;
  int signal = 0;
};

// process.Process/Update
struct UpdateRequest {
  Selector process;
  std::optional<PtySize> pty;
};

struct ListDirRequest {
  std::string path;
  std::uint32_t depth = 0;
};

struct MoveRequest {
  std::string source;
  std::string destination;
};

struct WatchDirRequest {
  std::string path;
  bool recursive = false;
  bool include_entry = false;
  bool allow_network_mounts = false;
};

template <typename T>
struct Parsed {
  std::optional<T> value;
  std::optional<ConnectError> error;  // kInvalidArgument naming the field
  explicit operator bool() const { return value.has_value(); }
};

Parsed<StartRequest> parse_start(std::string_view json);
// Connect and CloseStdin: {"process": selector}.
Parsed<Selector> parse_selector_request(std::string_view json);
Parsed<InputRequest> parse_send_input(std::string_view json);
Parsed<SignalRequest> parse_send_signal(std::string_view json);
Parsed<UpdateRequest> parse_update(std::string_view json);
// Stat, MakeDir, Remove: {"path"}.
Parsed<std::string> parse_path_request(std::string_view json);
Parsed<ListDirRequest> parse_list_dir(std::string_view json);
Parsed<MoveRequest> parse_move(std::string_view json);
Parsed<WatchDirRequest> parse_watch_dir(std::string_view json);

// The events of a process stream, each the whole StartResponse/ConnectResponse message.
std::string start_event(std::uint32_t pid);
enum class Stream { kStdout, kStderr, kPty };
std::string data_event(Stream stream, std::string_view bytes);
struct EndInfo {
  int exit_code = 0;
  bool exited = true;  // false when a signal ended it
  std::string status;  // "exit status 1", "signal: killed"
  std::optional<std::string> error;
};
std::string end_event(const EndInfo& end);
std::string keepalive_event();
// The events of a WatchDir stream after its start (watch_start_event, below), each the whole
// WatchDirResponse message.
enum class WatchEventType { kCreate = 1, kWrite = 2, kRemove = 3, kRename = 4, kChmod = 5 };
std::string watch_event(WatchEventType type, std::string_view name);
std::string watch_keepalive_event();
// The polled watch (CreateWatcher, GetWatcherEvents, RemoveWatcher: the Python SDK's sync
// files.watch_dir). CreateWatcher's request is WatchDir's (parse_watch_dir); the other two
// name the watcher, {"watcherId"}; CreateWatcher answers {"watcherId"}, GetWatcherEvents
// {"events": [{"name", "type"}]}.
inline constexpr std::size_t kMaxWatcherId = 64;
struct WatchEvent {
  WatchEventType type = WatchEventType::kCreate;
  std::string name;
};
Parsed<std::string> parse_watcher_id(std::string_view json);
std::string watcher_created_reply(std::string_view watcher_id);
std::string watcher_events_reply(const std::vector<WatchEvent>& events);
// EndInfo as envd reports it for an exit code, or a signal name ("KILL", "TERM", ...).
EndInfo end_for_exit(int exit_code);
EndInfo end_for_signal(std::string_view signal_name);

// process.Process/List's reply.
struct ProcessInfo {
  ProcessConfig config;
  std::uint32_t pid = 0;
  std::optional<std::string> tag;
};
std::string list_reply(const std::vector<ProcessInfo>& processes);

// A filesystem EntryInfo.
enum class FileKind { kUnspecified, kFile, kDirectory, kSymlink };
struct Entry {
  std::string name;
  FileKind kind = FileKind::kUnspecified;
  std::string path;
  std::int64_t size = 0;
  std::uint32_t mode = 0;  // permission bits (and setuid/setgid/sticky)
  std::string owner;
  std::string group;
  std::int64_t mtime = 0;  // unix seconds
  std::optional<std::string> symlink_target;
};
// "-rw-r--r--" / "drwxr-xr-x" as Go's fs.FileMode prints it.
std::string permissions_string(FileKind kind, std::uint32_t mode);
// {"entry": {...}} (Stat, MakeDir, Move) and {"entries": [...]} (ListDir).
std::string entry_reply(const Entry& entry);
std::string entries_reply(const std::vector<Entry>& entries);
// WatchDir's first event.
std::string watch_start_event();

// The shell line that runs `process` over SSH (each argument quoted for sh), and the text the
// policy judges: the script of `bash|sh [-l] -c SCRIPT` (what the SDK's commands.run sends),
// else the whole line.
std::string shell_line(const ProcessConfig& process);
std::string policy_text(const ProcessConfig& process);
// Every field of a Start the process acts on, as canonical JSON (sorted keys): what an approval
// of it covers (policy/canonical.h), so a changed env, cwd, argument or pty is a new request.
// `default_env`: the sandbox's envVars, which the process gets too ("default_envs").
std::string canonical_start(const StartRequest& req,
                            const std::map<std::string, std::string>& default_env = {});

}  // namespace pvs::service::e2b
